"""Crash safety with the real `check` kind: real engine processes, real Docker containers, the
real episode runner, on demo tasks. `check` runs an oracle and a nop episode per task."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from devtools.scripted_server import ScriptedServer, calls, text
from engine.jobs.params import read_params
from engine.protocol.common import DEFAULT_TRIES
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
DEPTHTUI = str(Path(sys.executable).with_name("depthtui"))
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
        return submit_job(store, "check", params, read_params("check", params).cli(store.path))


def rows(path: Path, sql: str, params: tuple = ()) -> list[dict]:
    with Store(path) as store:
        return [dict(r) for r in store.query(sql, params)]


def status(path: Path, job_id: int) -> str:
    with Store(path) as store:
        return get_job(store, job_id).status


def done_by_task_and_agent(path: Path, job_id: int | None = None) -> Counter:
    """Completed runs per (task, agent). A try that ended in an infrastructure error (a busy
    machine can time out a Docker call) is recorded apart, as its own run with the next retry
    index, and is not a completion."""
    sql = "SELECT task_id, agent FROM episodes WHERE status = 'done' AND error_kind IS NULL"
    found = rows(path, sql + (" AND job_id = ?" if job_id else ""), (job_id,) if job_id else ())
    return Counter((r["task_id"], r["agent"]) for r in found)


def test_kill_9_mid_job_then_restart(setup) -> None:
    path, procs = setup
    job_id = submit_check(path, [f"demo/{t}" for t in TASKS])
    first = spawn_engine(path, workers=2, toy=False)
    procs.append(first)
    dead = owner_of(first)

    def frozen_holding_a_container() -> bool:
        """The engine stopped (SIGSTOP) mid-episode while it owns a container or snapshot: an
        episode's resources come and go between its phases, so look only while it is frozen."""
        if not (
            rows(path, "SELECT 1 FROM episodes WHERE status = 'done'")
            and rows(path, "SELECT 1 FROM episodes WHERE status = 'running'")
        ):
            return False
        first.send_signal(signal.SIGSTOP)
        time.sleep(0.3)  # let Docker finish a request the engine sent just before
        if owned_by([dead]):
            return True
        first.send_signal(signal.SIGCONT)
        return False

    wait_for(frozen_holding_a_container, timeout=300, every=0.05)
    first.kill()
    first.wait()
    done_before = rows(path, "SELECT id, run_key FROM episodes WHERE status = 'done'")
    in_flight = rows(path, "SELECT id FROM episodes WHERE status = 'running'")
    assert done_before and in_flight
    assert owned_by([dead]), "the killed engine should have left its container behind"

    second = spawn_engine(path, workers=2, toy=False)
    procs.append(second)
    wait_for(lambda: status(path, job_id) == "done", timeout=600)

    assert done_by_task_and_agent(path) == EXPECTED
    done_after = rows(path, "SELECT id, run_key, error_kind FROM episodes WHERE status = 'done'")
    assert len({r["run_key"] for r in done_after}) == len(done_after)
    assert len([r for r in done_after if r["error_kind"] is None]) == 4
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


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def models_file(path: Path, name: str, base_url: str, model_id: str = "m") -> Path:
    file = path.parent / "models.toml"
    # Fast retries: the policy is the registry's to set; the test needs its shape, not its pace.
    file.write_text(
        f'[models.{name}]\nbase_url = "{base_url}"\nmodel = "{model_id}"\n'
        "retry_attempts = 6\nretry_base_delay_s = 0.05\nretry_max_delay_s = 0.2\n"
    )
    return file


def submit_free(path: Path, task: str, model: str, models: Path) -> int:
    params = {"tasks": [task], "models": [model], "models_file": str(models), "attempts": 1}
    with Store(path) as store:
        return submit_job(store, "free", params, read_params("free", params).cli(store.path))


@pytest.mark.slow  # the agent's own policy waits between attempts: minutes, by design
def test_model_endpoint_down_records_infrastructure_errors_and_does_not_spin(setup) -> None:
    path, procs = setup
    models = models_file(path, "down", f"http://127.0.0.1:{closed_port()}/v1")
    job_id = submit_free(path, f"demo/{TASKS[0]}", "down", models)
    engine = spawn_engine(path, toy=False)
    procs.append(engine)
    wait_for(lambda: status(path, job_id) not in ("queued", "running"), timeout=600)
    with Store(path) as store:
        job = get_job(store, job_id)
    assert job.status == "failed"
    assert f"demo/{TASKS[0]}" in job.message and "down #1" in job.message
    eps = rows(path, "SELECT status, error_kind, error_detail, turns FROM episodes")
    # Bounded retries: a first try and the retries the policy allows, each recorded as an error
    # of the infrastructure (never as the model failing), and then the job stops.
    assert len(eps) == DEFAULT_TRIES
    assert all(e["status"] == "done" and e["error_kind"] for e in eps)
    assert all(e["error_kind"] not in ("", None) for e in eps)
    assert rows(path, "SELECT 1 FROM episodes WHERE passed = 1") == []
    # The engine stays up and idle: the job is not picked up again.
    assert engine.poll() is None
    assert status(path, job_id) == "failed"
    assert owned_by([owner_of(engine)]) == []


def docker_top(ids: list[str]) -> str:
    """The processes of the given containers, as `docker top` lists them."""
    out = [subprocess.run(["docker", "top", i], capture_output=True, text=True).stdout for i in ids]
    return "\n".join(out)


def test_cancel_during_a_turn_stops_the_job_and_leaves_no_container(setup) -> None:
    path, procs = setup
    # The model's first reply runs a command that would take ten minutes.
    with ScriptedServer([calls("sleep 600"), text("done")]) as server:
        models = models_file(path, "slow", server.base_url, server.model)
        job_id = submit_free(path, f"demo/{TASKS[0]}", "slow", models)
        engine = spawn_engine(path, toy=False)
        procs.append(engine)
        owner = owner_of(engine)
        wait_for(lambda: server.requests, timeout=300)
        wait_for(lambda: "sleep 600" in docker_top(owned_by([owner])), timeout=120)
        done = subprocess.run(
            [DEPTHTUI, "jobs", "cancel", str(job_id), "--db", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        wait_for(lambda: status(path, job_id) == "cancelled", timeout=120)
    with Store(path) as store:
        job = get_job(store, job_id)
    assert job.message.startswith("cancelled (requested)")
    eps = rows(path, "SELECT status FROM episodes")
    assert eps and all(e["status"] == "interrupted" for e in eps)
    assert owned_by([owner]) == []
    assert engine.poll() is None  # the engine carries on with the next job


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 2 MiB tmpfs for the store (needs root, as CI and the dev machine have)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_full_disk_fails_the_check_job_cleanly_and_keeps_earlier_rows(
    setup, small_disk: Path, tmp_path: Path
) -> None:
    source, procs = setup
    path = small_disk / "depthtui.db"
    shutil.copy(source, path)
    job_id = submit_check(path, [f"demo/{t}" for t in TASKS])
    tasks_before = rows(path, "SELECT id, content_hash, task_json FROM tasks ORDER BY id")
    # Leave about 200 KiB free: enough to start the job, not enough to record its episodes
    # (every commit appends whole 4 KiB pages to the WAL).
    filler = small_disk / "filler"
    stat = os.statvfs(small_disk)
    filler.write_bytes(b"\0" * (stat.f_bavail * stat.f_frsize - 200 * 1024))
    logs = tmp_path / "logs"
    logs.mkdir()
    engine = spawn_engine(path, log_dir=logs, toy=False)
    procs.append(engine)
    log = wait_for(lambda: next(logs.glob("*.log"), None))
    # The job's end is recorded at once, or (when even that write finds no room) later.
    wait_for(
        lambda: "could not record its end" in log.read_text() or status(path, job_id) == "failed",
        timeout=600,
    )
    assert "the disk is full" in log.read_text()
    assert engine.poll() is None  # the engine carries on (backing off), it does not crash

    reader = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    assert reader.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finished = reader.execute(
        "SELECT e.id, e.run_key, e.passed, count(t.id) FROM episodes e "
        "LEFT JOIN turns t ON t.episode_id = e.id WHERE e.status = 'done' GROUP BY e.id"
    ).fetchall()
    reader.close()
    assert rows(path, "SELECT id, content_hash, task_json FROM tasks ORDER BY id") == tasks_before
    assert owned_by([owner_of(engine)]) == []  # the episodes' containers went anyway

    filler.unlink()  # room again: a failure the engine could not write before is recorded now
    wait_for(lambda: status(path, job_id) == "failed", timeout=300)
    with Store(path) as store:
        assert "the disk is full" in get_job(store, job_id).message
    assert rows(path, "SELECT 1 FROM episodes WHERE status = 'running'") == []
    assert rows(path, "SELECT id, content_hash, task_json FROM tasks ORDER BY id") == tasks_before
    # Episodes finished before the disk filled are there, whole (with their turns).
    after = rows(
        path,
        "SELECT e.id, e.run_key, e.passed, count(t.id) AS n FROM episodes e "
        "LEFT JOIN turns t ON t.episode_id = e.id WHERE e.status = 'done' GROUP BY e.id",
    )
    assert [tuple(r.values()) for r in after] == finished
