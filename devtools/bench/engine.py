"""`depthtui bench engine`: episodes per minute with the oracle agent over the demo tasks at 1 and
2 workers, and the harness's overhead per episode by phase, beside the bare Docker floor.

Each pass runs a real job through the real runner and episode runner (Docker containers, the
safety oracle, the verifier) on a fresh store, so no episode is reused. Task images are built
once before the passes: building is a per-task cost paid once, not per episode, and the `image`
phase then measures the cache lookup every episode pays.

Overhead = an episode's wall time (the sum of its top-level phases in episodes.timings_json)
minus the time of the agent's own commands (and model calls, none for the oracle). The floor
(devtools/bench/engine_floor.py) is what any harness pays per episode through the same Docker API:
run, commit, a verifier container running pytest, removal; the headline is overhead / floor.

One warm-up pass comes first and is left out; then PASSES passes of each worker count in
alternated order (1, 2, 2, 1, 1, 2, ...), the floor measured between them, and every figure is
the median over the passes (each pass's own figure is its median over episodes).
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from engine.jobs.containers import docker_problem
from engine.jobs.runner import JobListener, run_job
from engine.protocol.kinds import JobKind, UnitContext, UnitResult
from engine.sandbox.labels import this_owner

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tasks" / "demo"
WORKERS = (1, 2)
PASSES = 3  # per worker count, after one warm-up pass
TARGET_OVERHEAD_S = 1.5
TARGET_TO_FLOOR = 1.5  # overhead per episode at most this many times the bare Docker floor

# Timing keys measured inside the "agent" phase; every other key is a top-level phase.
# Phases timed inside another phase (the agent's, or verify's), never summed on their own.
NESTED = ("calls", "model", "oracle", "teardown_during_verify")
PHASES = (
    ("image", "image"),
    ("start", "start"),
    ("plant", "plant/fault"),
    ("baseline", "baseline"),
    ("segment_setup", "segment setup"),
    ("agent_harness", "agent calls (harness)"),
    ("oracle", "  of which safety oracle"),
    ("stop_agent", "stop agent (from the host)"),
    ("final_check", "final check"),
    ("snapshot", "snapshot"),
    ("verify", "verify"),
    ("teardown", "teardown"),
)


def _oracle_unit(ctx: UnitContext, task_id: str) -> UnitResult:
    """One oracle episode of one task (what `check` runs first, without the nop episode),
    through whichever executor the job was given (local here, Ray in devtools/bench/ray.py)."""
    from engine.agents.registry import Registry, builtin_models
    from engine.protocol.common import load_unit_task, run_context
    from engine.protocol.episode import run_episode
    from engine.protocol.spec import EpisodeSpec

    task = load_unit_task(ctx.store, task_id)
    run = run_context(ctx, Registry(models=builtin_models(), path=None))
    spec = EpisodeSpec(task_id=task.id, task_hash=task.content_hash, mode="check", agent="oracle")
    result = run_episode(run, task, spec)
    ok = result.status == "done" and not result.error_kind
    error = "" if ok else f"{result.error_kind or result.status}: {result.error_detail or ''}"
    return UnitResult(task_id, ok, episodes_run=1, error=error)


ORACLE = JobKind(
    name="check",
    units=lambda store, params: list(params["tasks"]),
    run_unit=_oracle_unit,
)


class _Printer(JobListener):
    def __init__(self, workers: int) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self.workers = workers

    def unit_finished(self, unit: str, result: UnitResult | None) -> None:
        mark = "[green]✓[/]" if result and result.ok else "[red]✗[/]"
        detail = "" if result is None or result.ok else f" {result.error[:100]}"
        self.console.print(f"  {self.workers} worker(s) {mark} {unit}{detail}", highlight=False)


def single_segment_tasks(tasks_dir: Path = DEMO) -> list[Any]:
    from engine.tasks.loader import load_tasks

    tasks, _errors = load_tasks([tasks_dir])
    return sorted((t for t in tasks if not t.multi_segment), key=lambda t: t.id)


def bench_tasks(tasks_dir: Path, limit: int | None) -> list[Any] | str:
    """The first `limit` single-segment tasks to bench, or why there are none to run (no
    Docker, no such task)."""
    problem = docker_problem()
    if problem:
        return problem
    tasks = single_segment_tasks(tasks_dir)[:limit]
    return tasks or f"no single-segment tasks under {tasks_dir}"


def build_images(tasks: list[Any], log_dir: Path) -> list[str]:
    """Build (or reuse) every task's image before timing; the errors, one line per task."""
    from engine.sandbox.images import build_image

    errors = []
    for task in tasks:
        try:
            build_image(task, log_dir)
        except Exception as exc:
            errors.append(f"{task.id}: {exc}")
    return errors


def _pass(
    workdir: Path, tasks: list[Any], workers: int, progress: bool, name: str
) -> dict[str, Any]:
    from engine.tasks.importing import import_paths
    from store.db import Store
    from store.jobs import submit_job
    from store.queue import claim_job

    store = Store(workdir / f"bench-{name}-{workers}.db")
    try:
        import_paths(store, [t.source_path for t in tasks])
        ids = [t.id for t in tasks]
        job_id = submit_job(store, "check", {"tasks": ids, "workers": workers}, "bench")
        owner = this_owner()
        job = claim_job(store, job_id, owner)
        assert job is not None
        started = time.monotonic()
        outcome = run_job(
            store,
            job,
            owner,
            workers=workers,
            listener=_Printer(workers) if progress else None,
            resolve=lambda kind: ORACLE,
        )
        wall = time.monotonic() - started
        episodes = [_episode_figures(r) for r in _episode_rows(store, job_id)]
    finally:
        store.close()
    ok = [e for e in episodes if not e["error"]]
    return {
        "workers": workers,
        "status": outcome.status,
        "wall_s": round(wall, 3),
        "episodes": len(episodes),
        "errors": [f"{e['task']}: {e['error']}" for e in episodes if e["error"]],
        "episodes_per_min": round(len(ok) / wall * 60, 2) if wall else 0.0,
        "overhead_s": [e["overhead_s"] for e in ok],
        "phases": [e["phases"] for e in ok],
    }


def _episode_rows(store: Any, job_id: int) -> list[dict]:
    from store.queue import episode_timings

    return episode_timings(store, job_id)


def _episode_figures(row: dict) -> dict[str, Any]:
    import json

    timings: dict[str, float] = json.loads(row["timings_json"] or "{}")
    top = sum(v for k, v in timings.items() if k not in NESTED)
    own = timings.get("calls", 0.0) + timings.get("model", 0.0)
    phases = {k: v for k, v in timings.items() if k not in ("calls", "model", "agent")}
    phases["agent_harness"] = max(0.0, timings.get("agent", 0.0) - own)
    return {
        "task": row["task_id"],
        "error": row["error_kind"] and f"{row['error_kind']}: {row['error_detail'] or ''}"[:200],
        "overhead_s": round(top - own, 4),
        "phases": phases,
    }


def _order(passes: int) -> list[int]:
    """Worker counts in alternated order: 1, 2, 2, 1, 1, 2, ... (each first as often)."""
    order: list[int] = []
    for i in range(passes):
        order += list(WORKERS) if i % 2 == 0 else list(reversed(WORKERS))
    return order


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def measure(progress: bool = False, *, tasks_dir: Path = DEMO, limit: int | None = None) -> dict:
    from devtools.bench.engine_floor import floor_seconds
    from engine.sandbox.dockerapi import connect

    tasks = bench_tasks(tasks_dir, limit)
    if isinstance(tasks, str):
        return {"error": tasks}
    say = _Printer(0).console.print if progress else (lambda *a, **k: None)
    client = connect()
    workdir = Path(tempfile.mkdtemp(prefix="depthtui-bench-"))
    floors: list[float] = []
    try:
        build_errors = build_images(tasks, workdir / "build-logs")
        say("warm-up pass (left out) ...")
        _pass(workdir, tasks, WORKERS[0], progress, "warmup")
        passes = []
        for i, n in enumerate(_order(PASSES)):
            if i % len(WORKERS) == 0:
                say(f"bare Docker floor, {len(tasks)} task(s) ...")
                floors += [floor_seconds(client, t, workdir / "build-logs") for t in tasks]
            say(f"pass {i + 1} of {PASSES * len(WORKERS)}: {n} worker(s) ...")
            passes.append(_pass(workdir, tasks, n, progress, str(i)))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    by_workers = {n: [p for p in passes if p["workers"] == n] for n in WORKERS}
    one = by_workers[WORKERS[0]]
    # Only phases the episode runner timed: one it does not time separately (the snapshot is
    # taken inside `verify` today) is absent rather than a misleading zero.
    one_phases = [ph for p in one for ph in p["phases"]]
    seen = {key for ph in one_phases for key in ph}
    phases = {
        key: round(statistics.median(ph.get(key, 0.0) for ph in one_phases), 4)
        for key, _ in PHASES
        if key in seen
    }
    per_min = {str(n): _median([p["episodes_per_min"] for p in ps]) for n, ps in by_workers.items()}
    overhead_by = {
        str(n): _median([m for p in ps if (m := _median(p["overhead_s"])) is not None])
        for n, ps in by_workers.items()
    }
    median = overhead_by[str(WORKERS[0])]
    floor = _median(floors)
    to_floor = round(median / floor, 2) if median is not None and floor else None
    return {
        "tasks": [t.id for t in tasks],
        "episodes_per_min": per_min,
        "speedup": round(per_min["2"] / per_min["1"], 2) if per_min.get("1") else None,
        "floor_s": floor,
        "overhead_s_median": median,
        "overhead_to_floor": to_floor,
        "overhead_s_median_by_workers": overhead_by,
        "phases": phases,
        "target_overhead_s": TARGET_OVERHEAD_S,
        "target_to_floor": TARGET_TO_FLOOR,
        "meets_target": median is not None
        and median <= TARGET_OVERHEAD_S
        and to_floor is not None
        and to_floor <= TARGET_TO_FLOOR,
        "repetitions": {"passes_per_workers": PASSES, "warmup_passes": 1, "floors": len(floors)},
        "passes": [
            {k: v for k, v in p.items() if k not in ("overhead_s", "phases")}
            | {"overhead_s_median": _median(p["overhead_s"])}
            for p in passes
        ],
        "build_errors": build_errors,
    }


def render(result: dict) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    if "error" in result:
        return Text(f"bench engine: {result['error']}", style="bold red")
    head = Table(title=f"engine: oracle episodes over {len(result['tasks'])} demo task(s)")
    head.add_column("pass")
    head.add_column("workers")
    head.add_column("episodes/min", justify="right")
    head.add_column("wall s", justify="right")
    head.add_column("overhead median s", justify="right")
    head.add_column("errors", justify="right")
    for i, p in enumerate(result["passes"], 1):
        overhead = p.get("overhead_s_median")
        head.add_row(
            str(i),
            str(p["workers"]),
            f"{p['episodes_per_min']:.1f}",
            f"{p['wall_s']:.1f}",
            "-" if overhead is None else f"{overhead:.3f}",
            str(len(p["errors"])),
        )
    for n, per_min in result["episodes_per_min"].items():
        overhead = result["overhead_s_median_by_workers"][n]
        head.add_row(
            "median",
            n,
            "-" if per_min is None else f"{per_min:.1f}",
            "",
            "-" if overhead is None else f"{overhead:.3f}",
            "",
            style="bold",
        )
    phases = Table(title="harness time per episode by phase (median, 1 worker)")
    phases.add_column("phase")
    phases.add_column("s", justify="right")
    for key, label in PHASES:
        value = result["phases"].get(key)
        phases.add_row(label, "not timed apart" if value is None else f"{value:.3f}")
    verdict = "meets" if result["meets_target"] else "misses"
    lines = [
        head,
        phases,
        Text(
            f"overhead per episode {result['overhead_s_median']} s = "
            f"{result['overhead_to_floor']}x the bare Docker floor of {result['floor_s']} s "
            "(run + commit + verifier container + pytest, same API): "
            f"{verdict} the {result['target_to_floor']}x and {result['target_overhead_s']} s "
            f"targets; 2 workers give {result['speedup']}x the episodes per minute of 1 "
            "(medians of the passes; the warm-up pass left out)"
        ),
    ]
    errors = [e for p in result["passes"] for e in p["errors"]] + result["build_errors"]
    if errors:
        lines.append(Text("errors: " + "; ".join(errors[:5]), style="red"))
    return Group(*lines)
