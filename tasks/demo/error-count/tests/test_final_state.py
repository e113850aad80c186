"""Final state of error-count: the ERROR-level entries of app.log are counted in error_count.txt."""

import hashlib
from pathlib import Path

LOG = Path("/home/user/logs/app.log")
REPORT = Path("/home/user/reports/error_count.txt")
LOG_SHA256 = "f0f30b8c7ea1ff68e943f4da0f2b7a0ccb29a8f9d03606653bec41d58a0949db"
EXPECTED_COUNT = "11"


def test_report_exists_and_is_a_regular_file():
    assert REPORT.is_file(), f"{REPORT} is missing or is not a regular file"


def test_report_holds_only_the_count():
    text = REPORT.read_text()
    body = text[:-1] if text.endswith("\n") else text
    assert body == EXPECTED_COUNT, (
        f"{REPORT} should hold exactly one line '{EXPECTED_COUNT}', found {text!r}"
    )


def test_log_is_unchanged():
    assert LOG.is_file(), f"{LOG} is missing"
    digest = hashlib.sha256(LOG.read_bytes()).hexdigest()
    assert digest == LOG_SHA256, f"{LOG} was modified"
