"""Step 'assemble': the good parts concatenated in order, and a summary that matches them."""

import hashlib
import re
from pathlib import Path

BATCH = Path("/home/user/incoming/batch")
MANIFEST = BATCH / "MANIFEST.sha256"
ASSEMBLED = Path("/home/user/report/assembled.dat")
SUMMARY = Path("/home/user/report/summary.txt")
PARTS = [f"part-{i:02d}.dat" for i in range(1, 7)]


def batch():
    """(batch id, good parts in order), recomputed from the delivered batch."""
    assert MANIFEST.is_file(), f"{MANIFEST} is missing"
    lines = MANIFEST.read_text().splitlines()
    head = re.fullmatch(r"# batch ([0-9a-f]{8})", lines[0]) if lines else None
    assert head, f"{MANIFEST} does not start with a '# batch <id>' line"
    sums = {}
    for line in lines[1:]:
        match = re.fullmatch(r"([0-9a-f]{64})  (part-\d\d\.dat)", line)
        assert match, f"unexpected line in {MANIFEST}: {line!r}"
        sums[match.group(2)] = match.group(1)
    assert sorted(sums) == PARTS, f"{MANIFEST} should list {PARTS}"
    good = [p for p in PARTS if hashlib.sha256((BATCH / p).read_bytes()).hexdigest() == sums[p]]
    assert len(good) == 5, "the batch must keep exactly one damaged part"
    return head.group(1), good


def test_assembled_is_the_good_parts_in_order():
    _, good = batch()
    assert ASSEMBLED.is_file(), f"{ASSEMBLED} is missing"
    expected = b"".join((BATCH / p).read_bytes() for p in good)
    assert ASSEMBLED.read_bytes() == expected, (
        f"{ASSEMBLED} should be the concatenation of {good} in this order"
    )


def test_summary():
    batch_id, good = batch()
    assert SUMMARY.is_file(), f"{SUMMARY} is missing"
    digest = hashlib.sha256(b"".join((BATCH / p).read_bytes() for p in good)).hexdigest()
    expected = f"batch={batch_id}\nparts={len(good)}\nsha256={digest}\n"
    assert SUMMARY.read_text() == expected, (
        f"{SUMMARY} should read exactly:\n{expected}found:\n{SUMMARY.read_text()}"
    )
