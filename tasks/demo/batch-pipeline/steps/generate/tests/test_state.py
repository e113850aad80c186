"""Step 'generate': the batch exists as the generator made it, and its id was recorded."""

import hashlib
import re
from pathlib import Path

BATCH = Path("/home/user/incoming/batch")
MANIFEST = BATCH / "MANIFEST.sha256"
BATCH_ID = Path("/home/user/report/batch_id.txt")
PARTS = [f"part-{i:02d}.dat" for i in range(1, 7)]


def manifest():
    """(batch id, {part name: sha256}) as written by the generator."""
    assert MANIFEST.is_file(), f"{MANIFEST} is missing: was the generator run?"
    lines = MANIFEST.read_text().splitlines()
    head = re.fullmatch(r"# batch ([0-9a-f]{8})", lines[0]) if lines else None
    assert head, f"{MANIFEST} does not start with a '# batch <id>' line"
    sums = {}
    for line in lines[1:]:
        match = re.fullmatch(r"([0-9a-f]{64})  (part-\d\d\.dat)", line)
        assert match, f"unexpected line in {MANIFEST}: {line!r}"
        sums[match.group(2)] = match.group(1)
    return head.group(1), sums


def test_batch_has_six_parts_and_a_manifest():
    _, sums = manifest()
    assert sorted(sums) == PARTS, f"{MANIFEST} should list {PARTS}, lists {sorted(sums)}"
    found = sorted(p.name for p in BATCH.glob("part-*.dat"))
    assert found == PARTS, f"{BATCH} should hold {PARTS}, holds {found}"


def test_batch_is_as_delivered_with_exactly_one_damaged_part():
    _, sums = manifest()
    damaged = [p for p in PARTS if hashlib.sha256((BATCH / p).read_bytes()).hexdigest() != sums[p]]
    assert len(damaged) == 1, (
        f"the delivered batch has exactly one damaged part; found {len(damaged)} mismatching: "
        "the batch was modified"
    )


def test_batch_id_recorded():
    batch_id, _ = manifest()
    assert BATCH_ID.is_file(), f"{BATCH_ID} is missing"
    text = BATCH_ID.read_text()
    body = text[:-1] if text.endswith("\n") else text
    assert body == batch_id, f"{BATCH_ID} should hold the batch id {batch_id!r}, found {text!r}"
