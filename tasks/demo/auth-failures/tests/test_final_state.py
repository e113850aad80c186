"""Final state of auth-failures: IPs with 3+ failed SSH password logins, counts and users."""

import hashlib
from pathlib import Path

LOG = Path("/home/user/logs/auth.log")
REPORT = Path("/home/user/reports/ssh_failures.csv")
LOG_SHA256 = "830932d3bd54a8e0913d0ea5fab6d4bb007767a5139cdc6ec2bac2ac91b9edd2"
EXPECTED = [
    "ip,failures,users",
    "203.0.113.7,7,admin;oracle;root;test",
    "198.51.100.23,5,root",
    "192.0.2.55,3,deploy;git",
]


def test_report_exists():
    assert REPORT.is_file(), f"{REPORT} is missing"


def test_report_lines():
    text = REPORT.read_text()
    assert text.endswith("\n"), f"{REPORT} must end with a newline"
    lines = text.split("\n")[:-1]
    assert lines == EXPECTED, f"{REPORT} should be {EXPECTED}, found {lines}"


def test_ips_below_threshold_absent():
    text = REPORT.read_text()
    for ip in ("203.0.113.99", "198.51.100.80"):
        assert ip not in text, f"{ip} has fewer than 3 failures and must not be listed"


def test_log_unchanged():
    assert LOG.is_file(), f"{LOG} is missing"
    assert hashlib.sha256(LOG.read_bytes()).hexdigest() == LOG_SHA256, f"{LOG} was modified"
