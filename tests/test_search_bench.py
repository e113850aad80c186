"""`depthtui bench search`: the simulator drives `ladder.evaluate` (the code the real ladder runs)
and counts what each search costs. Hand-computed on deterministic tasks, then a small run."""

from __future__ import annotations

import random

from rich.console import Console

from devtools.bench import search as sb


class NoWandering(random.Random):
    """Uncapped runs take exactly the turns the model needs."""

    def expovariate(self, lambd: float) -> float:
        return 0.0


def certain(need: int) -> sb.SimTask:
    return sb.SimTask("deep", {m: need for m in sb.MODELS}, sb._step(1.0, 0.0), 1.0)


def test_a_task_twenty_deep_by_hand() -> None:
    # N = 20, so both models search caps 1, 2, 3, 5, 10, all failing.
    # protocol: 2 uncapped + 2 x 5 failed caps for each model = 22 runs.
    # bisect over [1, 2, 3, 5, 10]: cap 3 fails, cap 10 fails, cap 10 again (just below the
    # answer) fails -> 3 runs per model, 2 + 3 + 3 = 8.
    task = certain(20)
    protocol = sb.measure_once(task, "protocol", NoWandering(1))
    bisect = sb.measure_once(task, "bisect", NoWandering(1))
    assert (protocol.depth, protocol.runs) == (20, 22)
    assert (bisect.depth, bisect.runs) == (20, 8)
    # Turns: uncapped 2 x 20; failed capped runs use their whole cap.
    assert protocol.turns == 40 + 2 * 2 * (1 + 2 + 3 + 5 + 10)
    assert bisect.turns == 40 + 2 * (3 + 10 + 10)


def test_shallow_tasks_cost_the_same() -> None:
    for need, runs in ((1, 2), (2, 6)):
        task = certain(need)
        for search in ("protocol", "bisect"):
            got = sb.measure_once(task, search, NoWandering(1))
            assert (got.depth, got.runs) == (need, runs), (need, search)


def test_a_small_run_reports_every_group_and_the_targets() -> None:
    result = sb.measure(tasks=120, seed=3)
    assert result["tasks"] == 120
    names = [g["group"] for g in result["groups"]]
    assert names == ["shallow", "deep", "noisy", "needs >= 20 turns", "all"]
    for g in result["groups"]:
        for search in ("protocol", "bisect"):
            s = g[search]
            assert s["runs_per_task"] >= 2 and 0 <= s["agreement"] <= 1
    all_ = result["groups"][-1]
    assert all_["bisect"]["runs_per_task"] < all_["protocol"]["runs_per_task"]
    assert [t["target"] for t in result["targets"]][:2] == [
        "at most half the protocol's runs on tasks needing >= 20 turns",
        "no more runs than the protocol on shallow tasks",
    ]
    console = Console(width=120, record=True)
    console.print(sb.render(result))
    text = console.export_text()
    assert "bisect" in text and "needs >= 20 turns" in text
