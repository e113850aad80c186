"""Stopping and failing cleanly, with real processes and real Docker containers: Ctrl-C of a
foreground run, cancel during a long turn, and the store's disk filling up mid-job."""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from store.db import Store
from store.jobs import get_job
from tests.fixtures_jobs import (
    ROOT,
    engine_env,
    remove_store_containers,
    spawn_engine,
    store_containers,
    submit,
    wait_for,
)

DEPTHTUI = str(Path(sys.executable).with_name("depthtui"))
FOREGROUND = """
import sys
from store.db import Store
from depthtui.progress import run_foreground
from tests.fixtures_jobs import resolve
store = Store(sys.argv[1])
print(run_foreground(store, int(sys.argv[2]), 2, resolve=resolve), flush=True)
"""


@pytest.fixture
def procs(db_path: Path):
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        if p.poll() is None:
            p.kill()
            p.wait()
    remove_store_containers(db_path.resolve())


def rows(path: Path, sql: str, params: tuple = ()) -> list[dict]:
    with Store(path) as store:
        return [dict(r) for r in store.query(sql, params)]


def running_with_container(path: Path) -> list[dict]:
    return rows(
        path, "SELECT id FROM episodes WHERE status = 'running' AND container_id IS NOT NULL"
    )


def test_ctrl_c_cancels_a_foreground_run_and_removes_its_containers(db_path: Path, procs) -> None:
    path = db_path.resolve()
    with Store(path) as store:
        job_id = submit(
            store,
            {"units": ["a", "b"], "episodes": 3, "turns": 200, "turn_s": 0.1, "container": True},
        )
    proc = subprocess.Popen(
        [sys.executable, "-c", FOREGROUND, str(path), str(job_id)],
        env=engine_env(),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    procs.append(proc)
    wait_for(lambda: running_with_container(path), timeout=120)
    assert store_containers(path)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert out.strip().splitlines()[-1] == "cancelled"
    assert "stopping: cancelled (Ctrl-C)" in err
    with Store(path) as store:
        job = get_job(store, job_id)
    assert job.status == "cancelled" and job.message.startswith("cancelled (Ctrl-C)")
    statuses = [r["status"] for r in rows(path, "SELECT status FROM episodes")]
    assert "interrupted" in statuses and "running" not in statuses
    assert store_containers(path) == []


def test_cancel_during_a_long_turn_stops_and_leaves_no_container(db_path: Path, procs) -> None:
    path = db_path.resolve()
    with Store(path) as store:
        # One turn of 10 minutes: the unit never polls in time, so the engine has to end it.
        job_id = submit(store, {"units": ["a"], "turns": 1, "turn_s": 600, "container": True})
    procs.append(spawn_engine(path))
    wait_for(lambda: running_with_container(path), timeout=120)
    done = subprocess.run(
        [DEPTHTUI, "jobs", "cancel", str(job_id), "--db", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "cancel requested" in done.stdout
    wait_for(lambda: get_job_status(path, job_id) == "cancelled", timeout=120)
    with Store(path) as store:
        job = get_job(store, job_id)
    assert job.message.startswith("cancelled (requested)")
    assert [r["status"] for r in rows(path, "SELECT status FROM episodes")] == ["interrupted"]
    assert store_containers(path) == []


def get_job_status(path: Path, job_id: int) -> str:
    with Store(path) as store:
        return get_job(store, job_id).status


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 1 MiB tmpfs for the store (needs root, as CI and the dev machine have)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_fails_the_job_cleanly_and_keeps_earlier_rows(
    small_disk: Path, tmp_path: Path, procs
) -> None:
    path = small_disk / "depthtui.db"
    with Store(path) as store:
        job_id = submit(store, {"units": ["a", "b"], "episodes": 40, "blob_kb": 48})
    logs = tmp_path / "logs"
    logs.mkdir()
    engine = spawn_engine(path, log_dir=logs)
    procs.append(engine)
    log = wait_for(lambda: next(logs.glob("*.log"), None))
    wait_for(lambda: "could not record its end" in log.read_text(), timeout=120)
    assert "the disk is full" in log.read_text()
    assert engine.poll() is None  # the engine carries on (backing off), it does not crash

    # What was written before the disk filled is whole: every finished episode has its blob.
    reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert reader.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    done = reader.execute(
        "SELECT run_key, length(spec_json) FROM episodes WHERE status = 'done'"
    ).fetchall()
    reader.close()
    assert done and all(size == 48 * 1024 + len('{"blob": ""}') for _, size in done)

    # Room again: the engine records the failure it could not write before.
    subprocess.run(["mount", "-o", "remount,size=16m", str(small_disk)], check=True)
    wait_for(lambda: get_job_status(path, job_id) == "failed", timeout=180)
    with Store(path) as store:
        job = get_job(store, job_id)
        assert "the disk is full" in job.message
        after = [
            tuple(r)
            for r in store.query(
                "SELECT run_key, length(spec_json) FROM episodes WHERE status = 'done'"
            )
        ]
        assert store.query("SELECT count(*) FROM episodes WHERE status = 'running'")[0][0] == 0
    assert sorted(after) == sorted(done)
    shutil.rmtree(logs)
