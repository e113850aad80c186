"""The engine as real processes on a real store file, with real Docker containers: kill -9 and
restart, two engines at once, stop, no Docker, a corrupt store. Jobs are toy `check` jobs
(tests/fixtures_jobs.py) so these tests exercise the machinery, not the measurement protocol."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from engine.jobs.launch import ensure_engine, live_engines, start_engine, stop_engines
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


@pytest.fixture
def db(db_path: Path):
    path = db_path.resolve()
    Store(path).close()
    procs: list[subprocess.Popen] = []
    yield path, procs
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    with Store(path) as store:
        for e in live_engines(store):
            os.kill(e["pid"], signal.SIGKILL)
    remove_store_containers(path)


def rows(path: Path, sql: str, params: tuple = ()) -> list[dict]:
    with Store(path) as store:
        return [dict(r) for r in store.query(sql, params)]


def job_status(path: Path, job_id: int) -> str:
    with Store(path) as store:
        return get_job(store, job_id).status


def test_kill_9_mid_job_then_restart_completes_exactly_the_expected_episodes(db) -> None:
    path, procs = db
    with Store(path) as store:
        params = {
            "units": ["a", "b", "c"],
            "episodes": 3,
            "turns": 15,
            "turn_s": 0.1,
            "container": True,
        }
        job_id = submit(store, params)
    first = spawn_engine(path, workers=2)
    procs.append(first)

    def frozen_holding_a_container() -> bool:
        """The engine stopped (SIGSTOP) mid-episode while a container of its is up: an episode's
        container comes and goes between its phases, so look only while the engine is frozen
        (a kill that lands just after an episode removed its container leaves nothing)."""
        if not rows(
            path,
            "SELECT 1 FROM episodes WHERE status = 'running' AND container_id IS NOT NULL "
            "AND id > (SELECT min(id) FROM episodes WHERE status = 'done')",
        ):
            return False
        first.send_signal(signal.SIGSTOP)
        time.sleep(0.3)  # let Docker finish a request the engine sent just before
        if store_containers(path):
            return True
        first.send_signal(signal.SIGCONT)
        return False

    wait_for(frozen_holding_a_container, timeout=120, every=0.05)
    first.kill()  # SIGKILL: no cleanup of any kind
    first.wait()
    dead_owner = f"{os.uname().nodename}:{first.pid}"
    assert store_containers(path), "the killed engine should have left containers behind"
    running = rows(path, "SELECT id FROM episodes WHERE status = 'running'")
    assert running
    assert job_status(path, job_id) == "running"

    second = spawn_engine(path, workers=2)
    procs.append(second)
    wait_for(lambda: job_status(path, job_id) == "done", timeout=180)

    eps = rows(path, "SELECT run_key, status, owner FROM episodes WHERE job_id = ?", (job_id,))
    done = Counter(e["run_key"] for e in eps if e["status"] == "done")
    assert done == Counter({f"toy:{u}:{i}": 1 for u in "abc" for i in range(3)})
    interrupted = [e for e in eps if e["status"] == "interrupted"]
    assert {e["owner"] for e in interrupted} == {dead_owner}
    assert len(interrupted) == len(running)
    assert not [e for e in eps if e["status"] == "running"]
    assert store_containers(path) == []
    engines = rows(path, "SELECT owner, status FROM engines")
    assert {"owner": dead_owner, "status": "dead"} in engines


def test_two_engines_at_once_never_claim_the_same_job_or_episode(db) -> None:
    path, procs = db
    # Six jobs over overlapping units: a run key shared by two jobs must run once only.
    unit_sets = [["a", "b"], ["b", "c"], ["a", "c"], ["d"], ["a", "d"], ["b", "e"]]
    with Store(path) as store:
        ids = [
            submit(store, {"units": u, "episodes": 2, "turns": 3, "turn_s": 0.05})
            for u in unit_sets
        ]
    engines = [spawn_engine(path, workers=2), spawn_engine(path, workers=2)]
    procs.extend(engines)
    wait_for(lambda: all(job_status(path, i) == "done" for i in ids), timeout=180)
    for p in engines:
        p.send_signal(signal.SIGTERM)
        p.wait(30)
    claimed: list[int] = []
    for log in path.parent.glob(path.name + ".engine-*.log"):
        claimed += [int(n) for n in re.findall(r"job (\d+) \(check\) claimed", log.read_text())]
    assert sorted(claimed) == sorted(ids)
    eps = rows(path, "SELECT run_key, status FROM episodes")
    expected = {f"toy:{u}:{i}" for units in unit_sets for u in units for i in range(2)}
    assert Counter(e["run_key"] for e in eps) == Counter({k: 1 for k in expected})
    assert {e["status"] for e in eps} == {"done"}


def test_engine_stop_puts_the_job_back_and_a_new_engine_finishes_it(db) -> None:
    path, procs = db
    with Store(path) as store:
        job_id = submit(
            store,
            {"units": ["a", "b"], "episodes": 3, "turns": 30, "turn_s": 0.1, "container": True},
        )
    pid = start_engine(path, 2, module="tests.engine_main")
    wait_for(lambda: rows(path, "SELECT 1 FROM episodes WHERE container_id IS NOT NULL"))
    ended = stop_engines(path, timeout_s=60)
    assert ended[0][0].endswith(f":{pid}") and ended[0][1] == "stopped"
    with Store(path) as store:
        job = get_job(store, job_id)
    assert job.status == "queued" and job.owner is None
    assert "engine stopping: queued again" in job.message
    assert not rows(path, "SELECT 1 FROM episodes WHERE status = 'running'")
    assert store_containers(path) == []
    procs.append(spawn_engine(path))
    wait_for(lambda: job_status(path, job_id) == "done", timeout=180)
    done = rows(path, "SELECT run_key FROM episodes WHERE status = 'done'")
    assert sorted(r["run_key"] for r in done) == [f"toy:{u}:{i}" for u in "ab" for i in range(3)]


def test_ensure_engine_starts_one_engine_only(db, monkeypatch) -> None:
    path, _ = db
    monkeypatch.setenv("PYTHONPATH", engine_env()["PYTHONPATH"])
    pid = ensure_engine(path)
    assert ensure_engine(path) == pid
    with Store(path) as store:
        assert [e["pid"] for e in live_engines(store)] == [pid]
    stop_engines(path)
    with Store(path) as store:
        assert live_engines(store) == []


def test_no_docker_engine_keeps_the_job_queued_with_a_clear_message(db) -> None:
    path, procs = db
    with Store(path) as store:
        job_id = submit(store, {"units": ["a"]})
    env = {**engine_env(), "DOCKER_HOST": f"unix://{path.parent}/no-docker.sock"}
    engine = spawn_engine(path, env=env)
    procs.append(engine)
    log = next(path.parent.glob(path.name + ".engine-*.log"))
    # It backs off (5 s, then 10 s) instead of retrying in a loop.
    wait_for(lambda: "retrying in 10 s" in log.read_text(), timeout=60)
    with Store(path) as store:
        job = get_job(store, job_id)
    assert job.status == "queued"
    assert "no Docker engine answers" in job.message and "the job stays queued" in job.message
    assert len(re.findall("not starting queued jobs", log.read_text())) == 2
    engine.send_signal(signal.SIGTERM)
    assert engine.wait(30) == 0


def test_a_corrupt_store_is_reported_and_left_untouched(tmp_path: Path) -> None:
    bad = tmp_path / "corrupt.db"
    bad.write_bytes(b"SQLite format 3\x00" + os.urandom(8192))
    before = bad.read_bytes()
    commands = [
        [sys.executable, "-m", "engine.jobs.engine", "--db", str(bad)],
        [DEPTHTUI, "engine", "start", "--db", str(bad)],
        [DEPTHTUI, "jobs", "list", "--db", str(bad)],
        [DEPTHTUI, "jobs", "cancel", "1", "--db", str(bad)],
        [DEPTHTUI, "engine", "status", "--db", str(bad)],
    ]
    for argv in commands:
        done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert done.returncode != 0, argv
        # rich wraps the message at the terminal's width: compare with the wrapping undone
        assert "not a readable depthtui store" in " ".join(done.stderr.split()), argv
        assert "Traceback" not in done.stderr
    assert bad.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corrupt.db"]
