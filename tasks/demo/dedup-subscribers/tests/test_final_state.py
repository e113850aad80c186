"""Final state of dedup-subscribers: one normalized, deduplicated, byte-sorted list."""

import hashlib
from pathlib import Path

LISTS = Path("/home/user/lists")
OUTPUT = LISTS / "all_subscribers.txt"
EXPECTED = [
    "ana_30@mail.example.org",
    "ben@corp.example.net",
    "dev_88@corp.example.net",
    "emil.87@corp.example.net",
    "farah40@corp.example.net",
    "gus@corp.example.net",
    "hana@corp.example.net",
    "ivan@mail.example.org",
    "jo@corp.example.net",
    "kim8@mail.example.org",
    "liam@example.com",
    "mia_84@mail.example.org",
    "noor@mail.example.org",
    "otto85@mail.example.org",
    "pia_24@corp.example.net",
]
INPUT_SHA256 = {
    "subscribers_a.txt": "5d71e339a11bc0498e47678e827fcc29155f1698b08b3ef8beadc198076bc7c1",
    "subscribers_b.txt": "202d194d625bdfe1854f4a328ccefa915d2a91ca25ae4e12bdc7dd6164a5bbf0",
}


def test_output_exists():
    assert OUTPUT.is_file(), f"{OUTPUT} is missing or is not a regular file"


def test_output_uses_unix_line_endings():
    data = OUTPUT.read_bytes()
    assert b"\r" not in data, f"{OUTPUT} contains carriage returns; expected LF line endings"
    assert data.endswith(b"\n"), f"{OUTPUT} must end with a newline"


def test_output_is_the_normalized_deduplicated_sorted_union():
    lines = OUTPUT.read_bytes().decode().split("\n")[:-1]
    assert lines == EXPECTED, f"{OUTPUT} should hold exactly {EXPECTED}, found {lines}"


def test_inputs_unchanged():
    for name, digest in INPUT_SHA256.items():
        path = LISTS / name
        assert path.is_file(), f"{path} is missing"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} was modified"
