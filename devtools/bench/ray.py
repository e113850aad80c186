"""`depthtui bench engine --executor ray`: the local executor beside the Ray executor on a local
Ray instance, in the same run, over the same oracle episodes of the demo tasks.

Passes alternate (local, ray, local, ray) at the same number of workers, each on a fresh store
so nothing is reused; task images are built once first. Overhead per episode is measured on the
driver for both executors alike: the episode row's claim-to-completion time (started_at to
finished_at, both written by the driver) minus the agent's own time (its commands; the oracle
calls no model). For Ray that includes shipping the episode, scheduling it on the node and
streaming its records back; `ray_overhead_ratio` = Ray's median / local's median. Ray's worker
processes are started (and import the engine) once before the passes, as on a cluster that is
already up. `dispatch_s_median` is the part of that span outside the episode's own phases (for
Ray: scheduling, shipping and streaming; for local: the driver's claim and completion).
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from devtools.bench.engine import DEMO, ORACLE, bench_tasks, build_images
from engine.jobs.runner import run_job
from engine.sandbox.labels import this_owner

WORKERS = 2
ROUNDS = 2
TARGET_RATIO = 1.3
# Timings measured inside another phase (the agent's, or verify's): never summed on their own.
NESTED = ("calls", "model", "oracle", "teardown_during_verify")


def _pass(db: Path, tasks: list[Any], executor: Any) -> dict[str, Any]:
    import json

    from engine.tasks.importing import import_paths
    from store.db import Store
    from store.jobs import submit_job
    from store.queue import claim_job, episode_timings

    with Store(db) as store:
        import_paths(store, [t.source_path for t in tasks])
        params = {"tasks": [t.id for t in tasks], "workers": WORKERS}
        job_id = submit_job(store, "check", params, "bench")
        owner = this_owner()
        job = claim_job(store, job_id, owner)
        assert job is not None
        started = time.monotonic()
        outcome = run_job(
            store, job, owner, workers=WORKERS, resolve=lambda k: ORACLE, executor=executor
        )
        wall = time.monotonic() - started
        rows = episode_timings(store, job_id)
    overheads, dispatch, errors = [], [], []
    for r in rows:
        if r["error_kind"]:
            errors.append(f"{r['task_id']}: {r['error_kind']}: {(r['error_detail'] or '')[:100]}")
            continue
        timings = json.loads(r["timings_json"] or "{}")
        span = (
            datetime.fromisoformat(r["finished_at"]) - datetime.fromisoformat(r["started_at"])
        ).total_seconds()
        overheads.append(span - timings.get("calls", 0.0) - timings.get("model", 0.0))
        phases = sum(v for k, v in timings.items() if k not in NESTED)
        dispatch.append(span - phases)
    ok = len(rows) - len(errors)
    return {
        "status": outcome.status,
        "wall_s": round(wall, 3),
        "episodes": len(rows),
        "episodes_per_min": round(ok / wall * 60, 2) if wall else 0.0,
        "overhead_s": overheads,
        "dispatch_s": dispatch,
        "errors": errors,
    }


def _warm(workers: int) -> None:
    """Start `workers` Ray worker processes that hold the `docker` resource and import the
    episode runner, so no timed episode pays a worker's start."""
    import ray

    from engine.jobs.ray_executor import DOCKER_RESOURCE

    def load() -> int:
        import os

        import engine.protocol.episode  # noqa: F401

        time.sleep(1.0)  # held, so the next warm-up lands on another worker
        return os.getpid()

    task = ray.remote(load).options(num_cpus=0, resources={DOCKER_RESOURCE: 1})
    ray.get([task.remote() for _ in range(workers)])


def measure(
    progress: bool = False,
    *,
    tasks_dir: Path = DEMO,
    limit: int | None = None,
    address: str | None = None,
) -> dict[str, Any]:
    import ray

    from engine.jobs.ray_executor import DOCKER_RESOURCE, RayExecutor

    tasks = bench_tasks(tasks_dir, limit)
    if isinstance(tasks, str):
        return {"error": tasks}
    workdir = Path(tempfile.mkdtemp(prefix="depthtui-bench-ray-"))
    started_ray = False
    try:
        build_errors = build_images(tasks, workdir / "build-logs")
        if not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False)
            else:  # a local instance on this machine, offering as many Docker slots as workers
                ray.init(
                    num_cpus=WORKERS,
                    resources={DOCKER_RESOURCE: WORKERS},
                    include_dashboard=False,
                    log_to_driver=False,
                )
            started_ray = True
        executor = RayExecutor(address)
        _warm(WORKERS)
        passes: dict[str, list[dict[str, Any]]] = {"local": [], "ray": []}
        for i in range(ROUNDS):
            for name, ex in (("local", None), ("ray", executor)):
                figures = _pass(workdir / f"{name}-{i}.db", tasks, ex)
                passes[name].append(figures)
                if progress:
                    print(
                        f"  round {i + 1} {name}: {figures['episodes']} episode(s) in "
                        f"{figures['wall_s']:.1f} s",
                        flush=True,
                    )
    finally:
        if started_ray:
            ray.shutdown()
        shutil.rmtree(workdir, ignore_errors=True)
    by: dict[str, Any] = {}
    for name, runs in passes.items():
        over = [o for p in runs for o in p["overhead_s"]]
        disp = [d for p in runs for d in p["dispatch_s"]]
        by[name] = {
            "episodes_per_min": round(statistics.median(p["episodes_per_min"] for p in runs), 2),
            "overhead_s_median": round(statistics.median(over), 4) if over else None,
            "dispatch_s_median": round(statistics.median(disp), 4) if disp else None,
            "episodes": sum(p["episodes"] for p in runs),
            "errors": [e for p in runs for e in p["errors"]],
        }
    lo, ra = by["local"]["overhead_s_median"], by["ray"]["overhead_s_median"]
    ratio = round(ra / lo, 3) if lo and ra is not None else None
    return {
        "tasks": [t.id for t in tasks],
        "workers": WORKERS,
        "rounds": ROUNDS,
        "executors": by,
        "ray_overhead_ratio": ratio,
        "target_ratio": TARGET_RATIO,
        "meets_target": ratio is not None and ratio <= TARGET_RATIO,
        "computed_from": (
            "per episode: driver-side claim-to-completion time minus the agent's own command "
            "time; medians over every episode of every pass"
        ),
        "build_errors": build_errors,
    }


def render(result: dict) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    if "error" in result:
        return Text(f"bench engine --executor ray: {result['error']}", style="bold red")
    table = Table(
        title=f"executors: oracle episodes over {len(result['tasks'])} demo task(s), "
        f"{result['workers']} workers, {result['rounds']} alternated rounds"
    )
    columns = ("executor", "episodes/min", "overhead median s", "dispatch median s", "episodes")
    for col in (*columns, "errors"):
        table.add_column(col, justify="left" if col == "executor" else "right")
    for name, f in result["executors"].items():
        over, disp = f["overhead_s_median"], f["dispatch_s_median"]
        table.add_row(
            name,
            f"{f['episodes_per_min']:.1f}",
            "-" if over is None else f"{over:.3f}",
            "-" if disp is None else f"{disp:.3f}",
            str(f["episodes"]),
            str(len(f["errors"])),
        )
    ratio = result["ray_overhead_ratio"]
    verdict = "meets" if result["meets_target"] else "misses"
    lines = [
        table,
        Text(
            f"Ray's overhead per episode is {ratio}x local's: {verdict} the "
            f"{result['target_ratio']}x target ({result['computed_from']})"
        ),
    ]
    errors = [e for f in result["executors"].values() for e in f["errors"]]
    errors += result["build_errors"]
    if errors:
        lines.append(Text("errors: " + "; ".join(errors[:5]), style="red"))
    return Group(*lines)
