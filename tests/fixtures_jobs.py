"""Job kinds for testing the engine's machinery, and helpers around them.

`toy` behaves like a measurement kind without models: each unit runs `episodes` episodes of
`turns` turns (sleeping `turn_s` per turn), claims each by run key (so a finished one is reused
and a running one is never run twice), polls should_stop between episodes and should_abort
between turns, spends `cost` per episode, and with `container: true` holds a real Docker
container (labelled depthtui.test=1) for each episode. A unit listed in `fail` returns ok=False;
one in `raise` raises; with `fail_when_stopped` a unit cut short by a stop returns ok=False
(as the measurement kinds do). `blob_kb` pads each finished episode's spec_json.

The jobs table only takes the real kinds' names, so toy jobs are submitted as `check` jobs and
the test's runner resolves `check` to the toy kind: in-process through `resolve`, in an engine
process by running it as `python -m tests.engine_main` (which passes KINDS to the engine's main).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from engine.jobs.owner import owner_alive
from engine.protocol.kinds import JobKind, ProgressEvent, UnitContext, UnitResult
from store.db import Store
from store.queue import claim_episode, complete_episode, set_episode_container

ROOT = Path(__file__).resolve().parents[1]
TEST_LABEL = "depthtui.test"
STORE_LABEL = "depthtui.test.store"  # which test's store a container belongs to
IMAGE = "depthtui/base:bookworm"


def _units(store: Store, params: dict[str, Any]) -> list[str]:
    units = params.get("units")
    if not isinstance(units, list) or not units:
        raise ValueError(f"toy job: parameter 'units': expected a non-empty list, got {units!r}")
    return [str(u) for u in units]


def _start_container(store: Store, owner: str, job_id: int | None, unit: str) -> str:
    import docker

    client = docker.from_env()
    try:
        container = client.containers.run(
            IMAGE,
            ["sleep", "infinity"],
            detach=True,
            network_mode="none",
            labels={
                TEST_LABEL: "1",
                "depthtui.owner": owner,
                "depthtui.job": str(job_id),
                "depthtui.unit": unit,
                STORE_LABEL: str(store.path),
            },
        )
        return container.id
    finally:
        client.close()


def _remove_container(cid: str) -> None:
    import docker

    client = docker.from_env()
    try:
        client.containers.get(cid).remove(force=True)
    except docker.errors.NotFound:
        pass
    finally:
        client.close()


def _run_unit(ctx: UnitContext, unit: str) -> UnitResult:
    p = ctx.params
    if unit in p.get("raise", []):
        raise RuntimeError(f"toy unit {unit} blew up")
    if unit in p.get("fail", []):
        return UnitResult(unit=unit, ok=False, error=f"toy unit {unit}: infrastructure down")
    ran = reused = 0
    for i in range(int(p.get("episodes", 1))):
        if ctx.should_stop():
            if p.get("fail_when_stopped"):  # as the measurement kinds report an unfinished unit
                return UnitResult(unit, False, ran, reused, error="stopped")
            break
        key = f"toy:{unit}:{i}"
        while True:
            claim = claim_episode(
                ctx.store,
                key,
                ctx.owner,
                {
                    "job_id": ctx.job_id,
                    "task_id": unit,
                    "task_hash": "h",
                    "mode": "check",
                    "agent": "toy",
                    "attempt": i,
                },
                owner_alive=owner_alive,
            )
            if claim.state != "busy" or ctx.should_stop():
                break
            time.sleep(0.1)  # another engine runs this very episode: wait for its result
        if claim.state == "done":
            reused += 1
            ctx.progress(ProgressEvent(unit, "reused", claim.episode_id, label=f"#{i}"))
            continue
        if claim.state == "busy":
            break
        cid = None
        if p.get("container"):
            ctx.progress(ProgressEvent(unit, "start", claim.episode_id, label=f"#{i}"))
            cid = _start_container(ctx.store, ctx.owner, ctx.job_id, unit)
            set_episode_container(ctx.store, claim.episode_id, ctx.owner, cid)
        turns = int(p.get("turns", 1))
        for t in range(1, turns + 1):
            if ctx.should_abort():
                return UnitResult(unit=unit, ok=True, episodes_run=ran, episodes_reused=reused)
            ctx.progress(ProgressEvent(unit, "agent", claim.episode_id, f"#{i}", turn=t, cap=turns))
            time.sleep(float(p.get("turn_s", 0.0)))
        ctx.add_cost(float(p.get("cost", 0.0)))
        if cid:
            _remove_container(cid)
        # `blob_kb` makes each finished episode big (the disk-full test fills a small disk).
        blob = "x" * (int(p.get("blob_kb", 0)) * 1024)
        complete_episode(
            ctx.store,
            claim.episode_id,
            ctx.owner,
            {"passed": 1, "turns": turns, "spec_json": f'{{"blob": "{blob}"}}'},
        )
        ran += 1
    return UnitResult(unit=unit, ok=True, episodes_run=ran, episodes_reused=reused)


def _describe(params: dict[str, Any]) -> str:
    return f"toy {' '.join(params.get('units', []))}"


TOY = JobKind(name="check", units=_units, run_unit=_run_unit)
KINDS = {"check": TOY}


def resolve(name: str) -> JobKind:
    return KINDS[name]


# --- helpers for tests ---------------------------------------------------------------------


def submit(store: Store, params: dict[str, Any], kind: str = "check") -> int:
    from store.jobs import submit_job

    return submit_job(store, kind, params, _describe(params))


def engine_env() -> dict[str, str]:
    """The environment for engine subprocesses: our test kinds importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def spawn_engine(
    db: Path,
    workers: int = 1,
    env: dict[str, str] | None = None,
    log_dir: Path | None = None,
    toy: bool = True,
) -> subprocess.Popen:
    """An engine process as the test's child (so the test can kill -9 it), logging to
    `<db>.engine-<n>.log` in `log_dir` (default: beside the store). With `toy`, its `check`
    jobs run the toy kind; without, the real measurement kinds."""
    program = "tests.engine_main" if toy else "engine.jobs.engine"
    argv = [sys.executable, "-m", program, "--db", str(db), "--workers", str(workers)]
    log_path = (log_dir or db.parent) / f"{db.name}.engine-{time.monotonic_ns()}.log"
    log = open(log_path, "wb")  # noqa: SIM115 (the child keeps it open)
    return subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, env=env or engine_env(), cwd=ROOT
    )


def wait_for(predicate: Any, timeout: float = 60.0, every: float = 0.1) -> Any:
    """Poll until predicate() is truthy and return it; AssertionError after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"gave up after {timeout:.0f} s waiting for {predicate}")


def store_containers(db: Path) -> list[str]:
    """Ids of the test containers made for this store (running or not)."""
    out = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={STORE_LABEL}={db}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()


def remove_store_containers(db: Path) -> None:
    ids = store_containers(db)
    if ids:
        subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, check=False)


def owned_by(owners: list[str]) -> list[str]:
    """Containers and images (ids) whose depthtui.owner label is one of `owners`."""
    found: list[str] = []
    for owner in owners:
        for what in (["ps", "-aq"], ["images", "-q"]):
            out = subprocess.run(
                ["docker", *what, "--filter", f"label=depthtui.owner={owner}"],
                capture_output=True,
                text=True,
                check=True,
            )
            found += out.stdout.split()
    return found


def remove_owned_by(owners: list[str]) -> None:
    for owner in owners:
        ids = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=depthtui.owner={owner}"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        if ids:
            subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, check=False)
        images = subprocess.run(
            ["docker", "images", "-q", "--filter", f"label=depthtui.owner={owner}"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        if images:
            subprocess.run(["docker", "rmi", "-f", *images], capture_output=True, check=False)


def owner_of(proc: subprocess.Popen) -> str:
    return f"{socket.gethostname()}:{proc.pid}"
