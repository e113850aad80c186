"""`depthtui check` through the real CLI, runner, containers and verifier on three demo tasks (one
of them multi-segment): the oracle agent (each segment's reference solution) passes and the nop
agent fails, a rerun of the same command runs nothing, and a replay agrees. That the oracle
passes and the nop fails on every demo task is asserted on the runs of test_demo_validate.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DEMO, ROOT

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def depthtui(*args: str, db: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "depthtui", *args, "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=1800,
    )


TASKS = ["batch-pipeline", "error-count", "fix-permissions"]


def test_oracle_passes_nop_fails_a_rerun_runs_nothing_and_a_replay_agrees(tmp_path: Path) -> None:
    db = tmp_path / "demo.db"
    folders = [str(DEMO / name) for name in TASKS]
    done = depthtui("check", *folders, "--workers", "2", "--json", db=db)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout)
    assert sorted(r["task"] for r in rows) == [f"demo/{name}" for name in TASKS]
    for row in rows:
        assert row["reference_passed"] is True, row
        assert row["noop_failed"] is True, row
        assert row["ok"] and row["problems"] == [], row

    again = depthtui("check", *folders, "--workers", "2", "--json", db=db)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"0 episode(s) run, {2 * len(TASKS)} reused" in " ".join(again.stderr.split())
    assert json.loads(again.stdout) == rows

    # A replay re-executes the stored commands in a fresh environment: same verdict, same
    # outputs, recorded as a replay of the original.
    chosen = next(r["episodes"] for r in rows if r["task"] == "demo/error-count")
    replayed = depthtui("replay", *map(str, chosen), "--json", db=db)
    assert replayed.returncode == 0, replayed.stderr[-3000:]
    results = json.loads(replayed.stdout)
    assert [r["episode"] for r in results] == chosen
    for r in results:
        assert r["agree"] and r["replay"] not in chosen, r
    oracle = next(r for r in results if r["original_passed"])
    assert oracle["replay_passed"] and oracle["same_outputs"] == 1
