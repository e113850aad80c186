"""Step 'check': damaged.txt names the one part whose checksum does not match the manifest."""

import hashlib
import re
from pathlib import Path

BATCH = Path("/home/user/incoming/batch")
MANIFEST = BATCH / "MANIFEST.sha256"
DAMAGED = Path("/home/user/report/damaged.txt")
PARTS = [f"part-{i:02d}.dat" for i in range(1, 7)]


def mismatching_parts():
    assert MANIFEST.is_file(), f"{MANIFEST} is missing"
    sums = {}
    for line in MANIFEST.read_text().splitlines()[1:]:
        match = re.fullmatch(r"([0-9a-f]{64})  (part-\d\d\.dat)", line)
        assert match, f"unexpected line in {MANIFEST}: {line!r}"
        sums[match.group(2)] = match.group(1)
    assert sorted(sums) == PARTS, f"{MANIFEST} should list {PARTS}"
    for part in PARTS:
        assert (BATCH / part).is_file(), f"{BATCH / part} is missing"
    return [p for p in PARTS if hashlib.sha256((BATCH / p).read_bytes()).hexdigest() != sums[p]]


def test_batch_still_as_delivered():
    assert len(mismatching_parts()) == 1, "the batch must keep exactly one damaged part"


def test_damaged_part_named():
    damaged = mismatching_parts()
    assert DAMAGED.is_file(), f"{DAMAGED} is missing"
    text = DAMAGED.read_text()
    body = text[:-1] if text.endswith("\n") else text
    assert [body] == damaged, f"{DAMAGED} should name {damaged[0]!r}, found {text!r}"
