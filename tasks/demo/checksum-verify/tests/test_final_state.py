"""Final state of checksum-verify: bad_files.txt names exactly the damaged downloads."""

import hashlib
from pathlib import Path

DOWNLOADS = Path("/home/user/downloads")
REPORT = DOWNLOADS / "bad_files.txt"
EXPECTED_LINES = ["data-2024-q1.csv", "firmware-7.1.bin"]

# The downloads as shipped (the damaged ones included): nothing may be "repaired" or removed.
ORIGINAL_SHA256 = {
    "pkg-1.0.2.tar": "8f6676d2620373c27ffff2318895553cbacdc52293047b57e2057d4cbd4707e0",
    "data-2024-q1.csv": "92fe72621e91c4e2b9b6b1496b8ed7512d3b801efe51ce9f021faf24767d5363",
    "notes-v3.txt": "a465d430b3a8d52cbc4ce195bbbe97737997bbf8156b2dc110904e64cdb5303c",
    "firmware-7.1.bin": "cc3e79ad8c165b9023e36834fbd7b6725f0c9c88b753282166b462390084ad49",
    "manual-2.pdf": "d098e90a4d489f0c10cdb659938a01109233693322ad46a999ecf8b9f2a15dda",
    "schema-12.sql": "d4fd8873b588b6427d22b3a76058fa9423400bdd3add9638e26dd7eedbd5ddf6",
    "icons-3.zip": "98f344c925f83b81eac810ceddf5c6c8628cad5d75f96710bc1c372a0f1c6e44",
    "SHA256SUMS": "e562ebfce57286dc2c7a34b63c269abf1e552280782267d0cbc0a9a1646761b4",
}


def test_report_exists():
    assert REPORT.is_file(), f"{REPORT} is missing or is not a regular file"


def test_report_lists_exactly_the_damaged_files():
    text = REPORT.read_text()
    assert text.endswith("\n"), f"{REPORT} must end with a newline"
    lines = text.split("\n")[:-1]
    assert lines == EXPECTED_LINES, (
        f"{REPORT} should list exactly {EXPECTED_LINES} (sorted, one per line), found {lines}"
    )


def test_downloads_and_manifest_untouched():
    for name, digest in ORIGINAL_SHA256.items():
        path = DOWNLOADS / name
        assert path.is_file(), f"{path} is missing"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} was modified"
