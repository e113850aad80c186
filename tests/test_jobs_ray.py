"""Episodes on a Ray cluster (engine/jobs/ray_executor.py), end to end: a real multi-node Ray
cluster on this machine (ray.cluster_utils.Cluster: a head without the `docker` resource, where
the driver connects, and a worker node with it), real Docker sandboxes, real verifiers, a real
SQLite file, and the scripted model server on loopback. One cluster serves the whole module:
a ladder gives the local executor's N, D and verdicts; the TUI shows a Ray episode's turns live
(through the CLI and the background engine); a driver killed mid-episode is recovered by the next
engine; a worker node killed mid-episode leads to one requeue and no duplicate (last: it replaces
the module's Docker node).

The ladder (demo/error-count, model `alpha` = BatchingPolicy that never batches, caps 1 and 3),
by hand under engine/protocol/ladder.py: uncapped runs take look, mkdir, awk = 3 turns (the
closing "done" is no turn) and pass (N = 3); cap 1 fails twice (the look); cap 3 is not below N,
whose runs pass within 3 turns -> D = 3.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import ray
from ray.cluster_utils import Cluster

from depthtui.app import DepthApp
from depthtui.widgets.messages import OpenEpisode
from devtools.scripted_server import ScriptedReply, ScriptedServer
from engine.jobs.executor import ExecutorChoice, make_executor
from engine.jobs.launch import stop_engines
from engine.jobs.params import read_params
from engine.jobs.ray_executor import DOCKER_RESOURCE, RayExecutor
from engine.jobs.runner import JobOutcome, run_job
from engine.sandbox.labels import this_owner
from engine.tasks.importing import import_paths
from store.db import Store
from store.jobs import submit_job
from store.queue import claim_job
from tests.conftest import DEMO
from tests.fixtures_measure import DEPTHTUI, BatchingPolicy, endless, rows, write_models

pytestmark = [pytest.mark.docker, pytest.mark.slow]
pytest_plugins = ["tests.fixtures_tui"]

EC = "demo/error-count"
POLICY = BatchingPolicy(
    look="ls -la /home/user/logs",
    work={
        "app.log": (
            "mkdir -p /home/user/reports",
            "awk '$3 == \"ERROR\"' /home/user/logs/app.log | wc -l "
            "> /home/user/reports/error_count.txt",
        ),
    },
    batch_at_most={},
)


def slow(body: dict[str, Any]) -> ScriptedReply:
    """POLICY with a pause before each reply, so an episode is in flight long enough to watch
    (and to lose a node under)."""
    return replace(POLICY(body), delay_s=0.6)


@pytest.fixture(scope="module")
def cluster():
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    docker_node = c.add_node(num_cpus=1, resources={DOCKER_RESOURCE: 2})
    ray.init(address=c.address)
    try:
        yield SimpleNamespace(cluster=c, address=c.address, docker=docker_node, head=c.head_node)
    finally:
        ray.shutdown()
        c.shutdown()


@pytest.fixture(scope="module")
def server():
    with ScriptedServer(endless(POLICY), models=("model-a",)) as s:
        yield s


@pytest.fixture(scope="module")
def slow_server():
    with ScriptedServer(endless(slow), models=("model-a",)) as s:
        yield s


def _run(db: Path, kind: str, params: dict[str, Any], executor: Any) -> JobOutcome:
    with Store(db) as store:
        import_paths(store, [DEMO / "error-count"])
        params = {"tasks": [EC], "workers": 1, **params}
        job_id = submit_job(store, kind, params, read_params(kind, params).cli(store.path))
        owner = this_owner()
        job = claim_job(store, job_id, owner)
        return run_job(store, job, owner, workers=1, executor=executor)


def _remove_containers(db: Path) -> None:
    """The containers this store's episodes had (nodes remove them; a killed node cannot)."""
    ids = [r["container_id"] for r in rows(db, "SELECT container_id FROM episodes")]
    ids = [i for i in ids if i]
    if ids:
        subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, check=False)


def _container_exists(container_id: str) -> bool:
    out = subprocess.run(
        ["docker", "ps", "-aq", "--no-trunc", "--filter", f"id={container_id}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return bool(out.stdout.strip())


def _has_turns(db: Path) -> bool:
    try:
        return bool(rows(db, "SELECT 1 FROM turns LIMIT 1"))
    except sqlite3.OperationalError:  # not created yet, or its tables not yet
        return False


def _runs(db: Path) -> list[tuple]:
    return sorted(
        (r["agent"], r["cap"] or 0, r["attempt"], r["status"], r["passed"], r["turns"])
        for r in rows(db, "SELECT * FROM episodes")
    )


def test_a_ladder_through_ray_gives_the_local_executors_n_d_and_verdicts(
    cluster, server, tmp_path: Path
) -> None:
    models = write_models(tmp_path / "models.toml", server, {"alpha": "model-a"})
    params = {"models": ["alpha"], "caps": [1, 3], "models_file": str(models)}
    executor = make_executor(ExecutorChoice("ray", cluster.address))
    assert isinstance(executor, RayExecutor)
    try:
        local = _run(tmp_path / "local.db", "ladder", params, None)
        remote = _run(tmp_path / "ray.db", "ladder", params, executor)
    finally:
        _remove_containers(tmp_path / "local.db")
        _remove_containers(tmp_path / "ray.db")
    assert local.status == remote.status == "done", (local.message, remote.message)
    summary = remote.results[0].summary
    # N = 3 turns with commands (the closing reply is no turn); cap 1 fails twice, and cap 3
    # is not below N: D = 3, which the uncapped runs show passing (docs/protocol.md).
    assert (summary["N"], summary["D"]) == (3, 3)
    assert (local.results[0].summary["N"], local.results[0].summary["D"]) == (3, 3)
    expected = [
        ("alpha", 0, 0, "done", 1, 3),
        ("alpha", 0, 1, "done", 1, 3),
        ("alpha", 1, 0, "done", 0, 1),
        ("alpha", 1, 1, "done", 0, 1),
    ]
    assert _runs(tmp_path / "local.db") == _runs(tmp_path / "ray.db") == expected
    # Every Ray episode ran on the node with Docker, none on the head (the driver's node).
    ids = [r["id"] for r in rows(tmp_path / "ray.db", "SELECT id FROM episodes")]
    assert {executor.placements[i] for i in ids} == {cluster.docker.node_id}
    # The driver wrote each turn as it came: the turn rows are all there, in order.
    turns = rows(tmp_path / "ray.db", "SELECT episode_id, idx FROM turns ORDER BY id")
    # every reply is a row, the uncapped runs' closing replies too
    assert len(turns) == 4 + 4 + 1 + 1


def test_the_tui_shows_a_ray_episodes_turns_while_it_runs(
    cluster, slow_server, tmp_path: Path, tui
) -> None:
    db = tmp_path / "depthtui.db"
    models = write_models(tmp_path / "models.toml", slow_server, {"alpha": "model-a"})
    # Through the CLI and the background engine, as a user runs it on a cluster.
    launched = subprocess.run(
        [DEPTHTUI, "free", str(DEMO / "error-count"), "--model", "alpha", "--models", str(models),
         "--executor", "ray", "--ray-address", cluster.address, "--detach", "--db", str(db)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert launched.returncode == 0, launched.stderr[-2000:]
    seen: dict[str, Any] = {}

    def running_with_turns() -> int | None:
        found = rows(
            db,
            "SELECT e.id FROM episodes e JOIN turns t ON t.episode_id = e.id "
            "WHERE e.status = 'running' GROUP BY e.id HAVING count(*) >= 1",
        )
        return found[0]["id"] if found else None

    async def main() -> None:
        app = DepthApp(db, poll_seconds=0.1, start_engine=False)
        async with app.run_test(size=tui.size) as pilot:
            assert await tui.until(pilot, running_with_turns, tries=1200)
            episode_id = running_with_turns()
            app.post_message(OpenEpisode(episode_id))
            await tui.settle(pilot)
            screen = app.screen
            first = len(screen.marks)
            # More turns arrive while it runs, and the screen shows them live.
            assert await tui.until(pilot, lambda: len(screen.marks) > first, tries=400)
            seen["live"] = screen.info.status == "running" and "● live" in tui.text(app)
            seen["marks"] = len(screen.marks)

    try:
        asyncio.run(main())
    finally:
        stop_engines(db, timeout_s=30)
        _remove_containers(db)
    assert seen["marks"] >= 2 and seen["live"]


def _cli(args: list[str], db: Path, address: str) -> None:
    out = subprocess.run(
        [DEPTHTUI, *args, "--executor", "ray", "--ray-address", address, "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]


def _wait(condition, what: str, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_a_crashed_driver_is_recovered_by_the_next_engine(
    cluster, slow_server, tmp_path: Path
) -> None:
    db = tmp_path / "depthtui.db"
    models = write_models(tmp_path / "models.toml", slow_server, {"alpha": "model-a"})
    free = ["free", str(DEMO / "error-count"), "--model", "alpha", "--models", str(models)]
    _cli([*free, "--attempts", "1", "--detach"], db, cluster.address)
    try:
        _wait(lambda: _has_turns(db), "no turn was recorded")
        (engine,) = rows(db, "SELECT pid FROM engines")
        os.kill(engine["pid"], signal.SIGKILL)  # the driver dies mid-episode
        _cli(["engine", "start"], db, cluster.address)
        _wait(
            lambda: rows(db, "SELECT status FROM jobs")[0]["status"] == "done",
            "the next engine did not finish the job",
        )
        # The dead driver's container goes too (its node ends the episode, or the sweep).
        (first,) = rows(db, "SELECT container_id FROM episodes ORDER BY id LIMIT 1")
        _wait(lambda: not _container_exists(first["container_id"]), "its container stayed", 60)
    finally:
        stop_engines(db, timeout_s=30)
        _remove_containers(db)
    episodes = rows(db, "SELECT * FROM episodes ORDER BY id")
    assert [(e["status"], e["run_key"]) for e in episodes] == [
        ("interrupted", episodes[0]["run_key"]),
        ("done", episodes[0]["run_key"]),
    ]
    assert (episodes[1]["passed"], episodes[1]["turns"], episodes[1]["error_kind"]) == (1, 3, None)


def test_a_node_lost_mid_episode_is_requeued_once_and_never_duplicated(
    cluster, slow_server, tmp_path: Path
) -> None:
    """Runs last: it replaces the module's Docker node."""
    db = tmp_path / "depthtui.db"
    models = write_models(tmp_path / "models.toml", slow_server, {"alpha": "model-a"})
    c = cluster.cluster
    c.remove_node(cluster.docker)
    victim = c.add_node(num_cpus=1, resources={DOCKER_RESOURCE: 1})
    executor = make_executor(ExecutorChoice("ray", cluster.address))
    params = {"models": ["alpha"], "attempts": 1, "models_file": str(models)}
    outcome: list[JobOutcome] = []
    worker = threading.Thread(
        target=lambda: outcome.append(_run(db, "free", params, executor)), daemon=True
    )
    worker.start()
    try:
        deadline = time.monotonic() + 300
        while not _has_turns(db):
            assert time.monotonic() < deadline and worker.is_alive(), "no turn was recorded"
            time.sleep(0.2)
        c.remove_node(victim)  # mid-episode: a turn is in, more are to come
        rescuer = c.add_node(num_cpus=1, resources={DOCKER_RESOURCE: 1})
        worker.join(timeout=300)
        # The lost node's container (on this machine's Docker) was removed by the driver.
        (lost,) = rows(db, "SELECT container_id FROM episodes ORDER BY id LIMIT 1")
        assert lost["container_id"] and not _container_exists(lost["container_id"])
    finally:
        _remove_containers(db)
    assert not worker.is_alive() and outcome[0].status == "done", outcome
    episodes = rows(db, "SELECT * FROM episodes ORDER BY id")
    assert [(e["status"], e["run_key"]) for e in episodes] == [
        ("interrupted", episodes[0]["run_key"]),
        ("done", episodes[0]["run_key"]),
    ]
    assert "lost by the ray executor" in episodes[0]["error_detail"]
    done = episodes[1]
    # The rerun is the model's own clean run: 3 turns, passed, no error; nothing counted twice.
    assert (done["passed"], done["turns"], done["error_kind"]) == (1, 3, None)
    assert executor.placements[episodes[0]["id"]] == victim.node_id
    assert executor.placements[done["id"]] == rescuer.node_id
    assert outcome[0].results[0].episodes_run == 1
