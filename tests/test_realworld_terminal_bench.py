"""`depthtui validate` on Terminal-Bench-shaped tasks (tests/fixtures/terminal-bench; real CLI,
Docker, verifier and SQLite file): tasks whose test.sh runs pytest get their test inventory and
per-test rows; the one whose test.sh runs no pytest is valid and marked as having none."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from engine.sandbox.images import remove_task_images
from engine.tasks.loader import load_task
from engine.verify.toolchain import toolchain_dir
from store import views
from tests.conftest import ROOT

pytestmark = [pytest.mark.docker, pytest.mark.slow]

DATASET = ROOT / "tests" / "fixtures" / "terminal-bench"


def test_validate_records_per_test_results(tmp_path: Path) -> None:
    db = tmp_path / "store" / "validate.db"
    db.parent.mkdir()
    # Build logs go to the cache folder the README names ($DEPTHTUI_CACHE here), not beside
    # the store; the toolchain stays where it is.
    cache = tmp_path / "cache"
    argv = ["validate", str(DATASET), "--json", "--db", str(db)]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "depthtui", *argv],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=600,
            env={
                **os.environ,
                "COLUMNS": "500",
                "DEPTHTUI_CACHE": str(cache),
                "DEPTHTUI_TOOLCHAIN": str(toolchain_dir()),
            },
        )
    finally:
        client = docker.from_env()
        for task in ("word-stats", "log-digest", "reward-only"):
            remove_task_images(client, load_task(DATASET / task))
        client.close()
    assert done.returncode == 0, done.stderr[-3000:]
    logs = sorted(p.name for p in (cache / "build-logs").iterdir())
    assert [n.split("-")[0] for n in logs] == ["terminal", "terminal", "terminal"], logs
    assert sorted(p.name for p in db.parent.iterdir() if "log" in p.name) == []
    rows = {r["task"]: r for r in json.loads(done.stdout)}
    assert {t: (r["valid"], r["tests"]) for t, r in rows.items()} == {
        "terminal-bench/word-stats": (True, 7),
        "terminal-bench/log-digest": (True, 6),
        "terminal-bench/reward-only": (True, 0),
    }, {t: r["reasons"] for t, r in rows.items()}
    assert rows["terminal-bench/reward-only"]["flags"] == ["no_per_test_results"]
    assert rows["terminal-bench/word-stats"]["flags"] == []

    with sqlite3.connect(db) as conn:
        episodes = conn.execute(
            "SELECT e.task_id, e.agent, e.passed, e.tests_passed, e.tests_total, e.reward, "
            "(SELECT count(*) FROM test_results r WHERE r.episode_id = e.id) "
            "FROM episodes e WHERE e.spec_json NOT LIKE '%probe%' "
            "AND e.agent IN ('nop', 'oracle') ORDER BY e.id"
        ).fetchall()
    seen = {(t, a, p, tp, tt, r, n) for t, a, p, tp, tt, r, n in episodes}
    assert ("terminal-bench/word-stats", "oracle", 1, 7, 7, 1.0, 7) in seen
    assert ("terminal-bench/word-stats", "nop", 0, 0, 7, 0.0, 7) in seen
    assert ("terminal-bench/log-digest", "oracle", 1, 6, 6, 1.0, 6) in seen
    # No pytest: the reward file's verdict as one pass/fail, no per-test rows.
    assert ("terminal-bench/reward-only", "oracle", 1, 1, 1, 1.0, 0) in seen
    # The mutation audit found the reference's output and the tests catch every mutation.
    detail = json.loads(
        sqlite3.connect(db)
        .execute("SELECT detail_json FROM contracts WHERE task_id = 'terminal-bench/word-stats'")
        .fetchone()[0]
    )
    assert detail["discrimination"]["/app/stats.json"]["ok"] is True

    # What the TUI's episode view shows: each test of the reference run, passed.
    with sqlite3.connect(db) as conn:
        [eid] = conn.execute(
            "SELECT id FROM episodes WHERE task_id = 'terminal-bench/word-stats' "
            "AND agent = 'oracle' AND attempt = 0 AND spec_json LIKE '%reference%'"
        ).fetchone()
        shown = views.verifier_results(conn, eid)
    assert sorted(t.nodeid for t in shown) == sorted(
        f"test_outputs.py::test_{n}"
        for n in ("file_exists", "is_an_object", "lines", "words", "unique", "longest", "top")
    )
    assert {(t.outcome, t.in_inventory) for t in shown} == {("passed", True)}
