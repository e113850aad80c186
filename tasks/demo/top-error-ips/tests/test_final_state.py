"""Final state of top-error-ips: the three IPs with the most 5xx responses, with their counts."""

import hashlib
from pathlib import Path

LOG = Path("/home/user/logs/access.log")
REPORT = Path("/home/user/reports/top_error_ips.txt")
LOG_SHA256 = "d3fd01df097cbba643c7a81d505846159798d7af2f84fb1d7d1b60771c0f8ede"
EXPECTED = ["9 203.0.113.42", "7 198.51.100.23", "4 192.0.2.10"]


def test_report_exists():
    assert REPORT.is_file(), f"{REPORT} is missing or is not a regular file"


def test_report_has_exactly_three_lines_ending_in_newline():
    text = REPORT.read_text()
    assert text.endswith("\n"), f"{REPORT} must end with a newline"
    assert len(text.split("\n")[:-1]) == 3, f"{REPORT} must have exactly three lines: {text!r}"


def test_report_content():
    lines = REPORT.read_text().split("\n")[:-1]
    assert lines == EXPECTED, f"{REPORT} should be {EXPECTED}, found {lines}"


def test_log_unchanged():
    assert LOG.is_file(), f"{LOG} is missing"
    assert hashlib.sha256(LOG.read_bytes()).hexdigest() == LOG_SHA256, f"{LOG} was modified"
