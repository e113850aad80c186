"""Crash safety with the real `check` kind: real engine processes, real Docker containers, the
real episode runner, on demo tasks. `check` runs an oracle and a nop episode per task."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from engine.protocol.registry import get_kind
from engine.tasks.importing import import_paths
from store.db import Store
from store.jobs import get_job, submit_job
from tests.conftest import DEMO
from tests.fixtures_jobs import (
    ROOT,
    engine_env,
    owned_by,
    owner_of,
    remove_owned_by,
    spawn_engine,
    wait_for,
)

TASKS = ("error-count", "csv-to-json")
EXPECTED = Counter({(f"demo/{t}", a): 1 for t in TASKS for a in ("oracle", "nop")})


@pytest.fixture
def setup(db_path: Path):
    """A store holding two demo tasks; engines started by the test are killed and everything
    they own in Docker is removed at the end."""
    path = db_path.resolve()
    with Store(path) as store:
        imported = import_paths(store, [DEMO / t for t in TASKS])
        assert not imported.errors
    procs: list[subprocess.Popen] = []
    yield path, procs
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    remove_owned_by([owner_of(p) for p in procs])


def submit_check(path: Path, tasks: list[str]) -> int:
    params = {"tasks": tasks}
    with Store(path) as store:
        return submit_job(store, "check", params, get_kind("check").describe(params))


def rows(path: Path, sql: str, params: tuple = ()) -> list[dict]:
    with Store(path) as store:
        return [dict(r) for r in store.query(sql, params)]


def status(path: Path, job_id: int) -> str:
    with Store(path) as store:
        return get_job(store, job_id).status


def done_by_task_and_agent(path: Path, job_id: int | None = None) -> Counter:
    sql = "SELECT task_id, agent FROM episodes WHERE status = 'done'"
    found = rows(path, sql + (" AND job_id = ?" if job_id else ""), (job_id,) if job_id else ())
    return Counter((r["task_id"], r["agent"]) for r in found)


def test_kill_9_mid_job_then_restart(setup) -> None:
    path, procs = setup
    job_id = submit_check(path, [f"demo/{t}" for t in TASKS])
    first = spawn_engine(path, workers=2, toy=False)
    procs.append(first)
    wait_for(
        lambda: (
            rows(path, "SELECT 1 FROM episodes WHERE status = 'done'")
            and rows(
                path,
                "SELECT 1 FROM episodes WHERE status = 'running' AND container_id IS NOT NULL",
            )
        ),
        timeout=300,
        every=0.05,
    )
    first.kill()
    first.wait()
    dead = owner_of(first)
    done_before = rows(path, "SELECT id, run_key FROM episodes WHERE status = 'done'")
    in_flight = rows(path, "SELECT id FROM episodes WHERE status = 'running'")
    assert done_before and in_flight
    assert owned_by([dead]), "the killed engine should have left its container behind"

    second = spawn_engine(path, workers=2, toy=False)
    procs.append(second)
    wait_for(lambda: status(path, job_id) == "done", timeout=600)

    assert done_by_task_and_agent(path) == EXPECTED
    done_after = rows(path, "SELECT id, run_key FROM episodes WHERE status = 'done'")
    assert len({r["run_key"] for r in done_after}) == len(done_after) == 4
    # What was finished before the crash was reused, not run again.
    assert {r["id"] for r in done_before} <= {r["id"] for r in done_after}
    interrupted = rows(path, "SELECT id, owner FROM episodes WHERE status = 'interrupted'")
    assert {r["id"] for r in interrupted} == {r["id"] for r in in_flight}
    assert {r["owner"] for r in interrupted} == {dead}
    assert rows(path, "SELECT 1 FROM episodes WHERE status = 'running'") == []
    assert owned_by([dead]) == []  # no orphan container or snapshot of the dead engine
    assert owned_by([owner_of(second)]) == []  # nor of the engine that finished the job


def test_two_engines_at_once_never_claim_the_same_job_or_episode(setup) -> None:
    path, procs = setup
    ids = [submit_check(path, [f"demo/{t}" for t in order]) for order in (TASKS, TASKS[::-1])]
    ids.append(submit_check(path, [f"demo/{TASKS[0]}"]))
    engines = [spawn_engine(path, workers=2, toy=False) for _ in range(2)]
    procs.extend(engines)
    wait_for(lambda: all(status(path, i) == "done" for i in ids), timeout=900)
    for p in engines:
        p.send_signal(signal.SIGTERM)
        assert p.wait(60) == 0
    claimed: list[int] = []
    for log in path.parent.glob(path.name + ".engine-*.log"):
        claimed += [int(n) for n in re.findall(r"job (\d+) \(check\) claimed", log.read_text())]
    assert sorted(claimed) == sorted(ids)
    # Every run happened once: no episode row beyond the four finished ones.
    assert done_by_task_and_agent(path) == EXPECTED
    assert len(rows(path, "SELECT id FROM episodes")) == 4
    assert owned_by([owner_of(p) for p in engines]) == []


FOREGROUND = """
import sys
from store.db import Store
from depthtui.progress import run_foreground
print(run_foreground(Store(sys.argv[1]), int(sys.argv[2]), 1), flush=True)
"""


def test_no_docker_engine_leaves_the_job_queued(setup) -> None:
    path, procs = setup
    job_id = submit_check(path, [f"demo/{TASKS[0]}"])
    env = {**engine_env(), "DOCKER_HOST": f"unix://{path.parent}/no-docker.sock"}
    done = subprocess.run(
        [sys.executable, "-c", FOREGROUND, str(path), str(job_id)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.strip() == "queued"
    assert "no Docker engine answers" in done.stderr and "stays queued" in done.stderr
    with Store(path) as store:
        job = get_job(store, job_id)
    assert job.status == "queued" and "no Docker engine answers" in job.message
    engine = spawn_engine(path, env=env, toy=False)
    procs.append(engine)
    log = wait_for(lambda: next(path.parent.glob(path.name + ".engine-*.log"), None))
    wait_for(lambda: "retrying in 5 s" in log.read_text(), timeout=60)
    assert status(path, job_id) == "queued"
    assert rows(path, "SELECT 1 FROM episodes") == []
    engine.send_signal(signal.SIGTERM)
    assert engine.wait(60) == 0
