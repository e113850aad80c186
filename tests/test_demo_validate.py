"""`depthtui validate tasks/demo`: every bundled task passes the validity audit (no-op fails; the
reference passes twice with the same changes and tests; a planted deletion latches; the tests
reject mutated outputs) and freezes a contract, and each single-instruction task has the fault
families its inputs allow. Its runs are also where the oracle agent is seen to pass, and the nop
agent to fail, every demo task. Real Docker, the real CLI, a real SQLite file."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DEMO, ROOT

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Families a task cannot take (the audit's own reasons, in the contract's detail): each family's
# target is fixed by a hash of the task and family among the files the instruction names, and
# where that target is a file the reference never reads (a decoy the instruction names, say) the
# fault does not break the reference, so the family is not usable. fix-permissions' inputs must
# also keep their modes, so `chmod u+rw` is no clean repair there.
EXPECTED_FAMILIES = {
    "demo/fix-permissions": [],
    "demo/rename-photos": ["perm_denied"],
    "demo/backup-archive": ["perm_denied"],
}
ALL_FAMILIES = ["blocking_fifo", "moved_input", "perm_denied"]


def test_every_demo_task_is_valid_with_its_fault_families(tmp_path: Path) -> None:
    db = tmp_path / "validate.db"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "depthtui",
            "validate",
            str(DEMO),
            "--workers",
            "2",
            "--json",
            "--db",
            str(db),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = {r["task"]: r for r in json.loads(done.stdout)}
    folders = sorted(p.name for p in DEMO.iterdir() if (p / "task.toml").is_file())
    assert sorted(t.split("/", 1)[1] for t in rows) == folders
    for task_id, row in rows.items():
        assert row["valid"] is True and row["reasons"] == [], row
        if (DEMO / task_id.split("/", 1)[1] / "steps").is_dir():
            # Multi-segment tasks are graded by their steps' test.sh; faults need one segment.
            assert row["fault_families"] == [], row
        else:
            assert row["tests"] > 0, row  # the frozen pytest inventory
            assert row["fault_families"] == EXPECTED_FAMILIES.get(task_id, ALL_FAMILIES), row

    # The audit's own runs: the oracle agent (each segment's reference solution) passed every
    # demo task twice (attempts 0 and 1), and the nop agent failed each. (A try that hit an
    # infrastructure error is recorded too, and retried: only finished tries count here.)
    conn = sqlite3.connect(db)
    runs = conn.execute(
        "SELECT task_id, agent, json_extract(spec_json, '$.spec.variant'), attempt, passed "
        "FROM episodes WHERE error_kind IS NULL AND status = 'done' "
        "AND json_extract(spec_json, '$.spec.variant') IN ('reference', 'noop')"
    ).fetchall()
    conn.close()
    for task_id in rows:
        mine = sorted((a, v, n, p) for t, a, v, n, p in runs if t == task_id)
        assert mine == [
            ("nop", "noop", 0, 0),
            ("oracle", "reference", 0, 1),
            ("oracle", "reference", 1, 1),
        ], (task_id, mine)
