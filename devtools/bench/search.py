"""`depthtui bench search`: the protocol's cap search against bisection, on simulated tasks.

Each simulated task gives every model a number of turns it needs (t) and a pass probability at
each stated cap; uncapped runs pass with a high probability and take t turns plus some wandering.
The searches are driven through `ladder.evaluate`, the same code the real ladder runs, with each
run's outcome drawn from the task instead of an episode. Per task and search the benchmark counts
runs and turns (a failed capped run uses its whole cap; turns stand in for cost), and compares
each search's D with a second protocol run on fresh outcomes: the protocol's agreement with itself
is the yardstick a cheaper search has to meet.

Shapes:
- shallow: t in 1..3, a sharp step (passes 90% at caps >= t, 5% below);
- deep: t in 20..120, a sharp step (85% at caps >= t, 3% below);
- noisy: t log-uniform in 2..60, a gradual rise p(c) = 0.9 / (1 + (t / c)^2).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.protocol.ladder import (
    CAPS,
    SEARCHES,
    Run,
    RunVerdict,
    evaluate,
)

MODELS = ("model-a", "model-b")
SHAPES = {"shallow": 0.5, "deep": 0.25, "noisy": 0.25}  # share of the simulated tasks
DEFAULT_TASKS = 3000
SEED = 14
DEEP = 20  # the target: at most half the protocol's runs on tasks with D >= 20


@dataclass(frozen=True)
class SimTask:
    shape: str
    need: dict[str, int]  # model -> turns it needs
    p_capped: Callable[[int, int], float]  # (cap, need) -> pass probability
    p_uncapped: float


def _task(shape: str, rng: random.Random) -> SimTask:
    if shape == "shallow":
        t = rng.choice((1, 1, 1, 2, 2, 3))
        step = _step(0.9, 0.05)
    elif shape == "deep":
        t = rng.choice((20, 25, 30, 40, 50, 60, 80, 120))
        step = _step(0.85, 0.03)
    else:
        t = max(2, round(math.exp(rng.uniform(math.log(2), math.log(60)))))
        step = _gradual(0.9, 2.0)
    # The second model needs between half and one and a half times as many turns.
    need = {MODELS[0]: t, MODELS[1]: max(1, round(t * rng.uniform(0.5, 1.5)))}
    return SimTask(shape, need, step, 0.9)


def _step(high: float, low: float) -> Callable[[int, int], float]:
    return lambda cap, need: high if cap >= need else low


def _gradual(top: float, slope: float) -> Callable[[int, int], float]:
    return lambda cap, need: top / (1 + (need / cap) ** slope)


def _draw(task: SimTask, run: Run, rng: random.Random) -> RunVerdict:
    need = task.need[run.model]
    if run.cap is None:
        # Without a cap a model wanders: it takes what it needs and some more.
        turns = need + int(rng.expovariate(1 / (1 + 0.4 * need)))
        return RunVerdict(rng.random() < task.p_uncapped, turns)
    passed = rng.random() < task.p_capped(run.cap, need)
    return RunVerdict(passed, min(run.cap, need) if passed else run.cap)


@dataclass(frozen=True)
class Measured:
    depth: int | None
    runs: int
    turns: int


def measure_once(task: SimTask, search: str, rng: random.Random) -> Measured:
    """One ladder over `task` with `search`, driven exactly as the real ladder drives it."""
    outcomes: dict[Run, RunVerdict] = {}
    while True:
        state = evaluate(MODELS, outcomes, CAPS, search)
        if state.finished:
            break
        outcomes[state.next] = _draw(task, state.next, rng)
    return Measured(state.depth, len(outcomes), sum(o.turns for o in outcomes.values()))


def measure(progress: bool = False, tasks: int = DEFAULT_TASKS, seed: int = SEED) -> dict[str, Any]:
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for shape, share in SHAPES.items():
        for _ in range(round(tasks * share)):
            task = _task(shape, rng)
            first = measure_once(task, "protocol", rng)
            again = measure_once(task, "protocol", rng)
            row = {"shape": shape, "need": task.need[MODELS[0]], "protocol": first, "again": again}
            for search in SEARCHES:
                if search != "protocol":
                    row[search] = measure_once(task, search, rng)
            rows.append(row)
    groups: dict[str, list[dict[str, Any]]] = {}
    for shape in SHAPES:
        groups[shape] = [r for r in rows if r["shape"] == shape]
    groups[f"needs >= {DEEP} turns"] = [r for r in rows if r["need"] >= DEEP]
    groups["all"] = rows
    out = []
    for name, members in groups.items():
        entry: dict[str, Any] = {"group": name, "tasks": len(members)}
        for search in SEARCHES:
            runs = [r[search].runs for r in members]
            turns = [r[search].turns for r in members]
            agree = [r[search].depth == r["again"].depth for r in members]
            entry[search] = {
                "runs_per_task": sum(runs) / len(members) if members else None,
                "turns_per_task": sum(turns) / len(members) if members else None,
                "agreement": sum(agree) / len(members) if members else None,
            }
        out.append(entry)
    result = {"tasks": len(rows), "seed": seed, "models": list(MODELS), "groups": out}
    result["targets"] = [{"target": what, "met": ok} for what, ok in targets(result)]
    return result


def targets(result: dict[str, Any]) -> list[tuple[str, bool]]:
    """The issue's targets for bisection, each with whether this run met it."""
    groups = {g["group"]: g for g in result["groups"]}
    deep, shallow = groups[f"needs >= {DEEP} turns"], groups["shallow"]
    out = [
        (
            f"at most half the protocol's runs on tasks needing >= {DEEP} turns",
            deep["bisect"]["runs_per_task"] <= 0.5 * deep["protocol"]["runs_per_task"],
        ),
        (
            "no more runs than the protocol on shallow tasks",
            shallow["bisect"]["runs_per_task"] <= shallow["protocol"]["runs_per_task"],
        ),
    ]
    for g in result["groups"]:
        out.append(
            (
                f"agreement no worse than the protocol's with itself ({g['group']})",
                g["bisect"]["agreement"] >= g["protocol"]["agreement"],
            )
        )
    return out


def render(result: dict[str, Any]) -> Any:
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table(
        title=f"Cap search on {result['tasks']} simulated tasks, 2 models (seed {result['seed']})",
        title_justify="left",
        caption="runs, turns: per task (uncapped runs included; turns stand in for cost); "
        "x: against the protocol; agree: share of tasks whose D equals a second protocol run's",
        caption_justify="left",
    )
    for col in ("group (tasks)", "search", "runs", "turns", "runs x", "turns x", "agree"):
        table.add_column(col, justify="left" if col in ("group (tasks)", "search") else "right")
    for g in result["groups"]:
        base = g["protocol"]
        for search in SEARCHES:
            s = g[search]
            if s["runs_per_task"] is None:
                continue
            table.add_row(
                f"{g['group']} ({g['tasks']})" if search == "protocol" else "",
                search,
                f"{s['runs_per_task']:.2f}",
                f"{s['turns_per_task']:.1f}",
                f"{s['runs_per_task'] / base['runs_per_task']:.2f}",
                f"{s['turns_per_task'] / base['turns_per_task']:.2f}",
                f"{s['agreement']:.3f}",
            )
    lines = [
        Text(f"{'met   ' if ok else 'MISSED'} {what}", style="green" if ok else "red")
        for what, ok in ((t["target"], t["met"]) for t in result["targets"])
    ]
    return Group(table, *lines)
