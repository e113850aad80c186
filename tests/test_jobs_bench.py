"""The engine bench's arithmetic: overhead = top-level phases minus the agent's own time."""

from __future__ import annotations

import json

from rich.console import Console

from devtools.bench.engine import PHASES, _episode_figures, render


def test_overhead_is_wall_time_minus_the_agents_own_commands() -> None:
    timings = {
        "image": 0.1,
        "start": 0.4,
        "plant": 0.05,
        "baseline": 0.02,
        "agent": 3.0,  # holds calls, model and the per-call oracle
        "calls": 2.0,
        "model": 0.5,
        "oracle": 0.1,
        "final_check": 0.03,
        "snapshot": 0.1,
        "verify": 0.6,
        "teardown": 0.2,
    }
    row = {"task_id": "demo/x", "error_kind": None, "error_detail": None}
    figures = _episode_figures({**row, "timings_json": json.dumps(timings)})
    wall = 0.1 + 0.4 + 0.05 + 0.02 + 3.0 + 0.03 + 0.1 + 0.6 + 0.2
    assert abs(figures["overhead_s"] - (wall - 2.5)) < 1e-9
    assert abs(figures["phases"]["agent_harness"] - 0.5) < 1e-9
    assert "calls" not in figures["phases"] and "agent" not in figures["phases"]
    assert figures["error"] is None
    failed = _episode_figures({**row, "timings_json": "{}", "error_kind": "verifier"})
    assert failed["error"] == "verifier: " and failed["overhead_s"] == 0


def test_render_shows_every_phase_and_pass() -> None:
    result = {
        "tasks": ["demo/a", "demo/b"],
        "episodes_per_min": {"1": 10.0, "2": 18.0},
        "speedup": 1.8,
        "floor_s": 1.0,
        "overhead_s_median": 1.2,
        "overhead_to_floor": 1.2,
        "target_to_floor": 1.5,
        "overhead_s_median_by_workers": {"1": 1.2, "2": 1.4},
        "phases": {key: 0.1 for key, _ in PHASES if key != "snapshot"},
        "target_overhead_s": 1.5,
        "meets_target": True,
        "passes": [
            {"workers": 1, "wall_s": 12.0, "episodes_per_min": 10.0, "errors": []},
            {"workers": 2, "wall_s": 6.7, "episodes_per_min": 18.0, "errors": ["demo/b: x"]},
            {"workers": 2, "wall_s": 6.9, "episodes_per_min": 17.4, "errors": []},
        ],
        "build_errors": [],
    }
    console = Console(width=120, record=True)
    console.print(render(result))
    text = console.export_text()
    for _, label in PHASES:
        assert label.strip() in text
    assert "not timed apart" in text
    assert "meets the 1.5x and 1.5 s targets" in text and "1.8x" in text and "demo/b: x" in text
    assert "1.2x the bare Docker floor of 1.0 s" in text and "17.4" in text and "median" in text
    console = Console(width=120, record=True)
    console.print(render({"error": "no Docker engine answers"}))
    assert "no Docker engine answers" in console.export_text()


def test_passes_alternate_so_each_worker_count_goes_first_as_often() -> None:
    from devtools.bench.engine import _order

    assert _order(3) == [1, 2, 2, 1, 1, 2]
    assert _order(4).count(1) == _order(4).count(2) == 4
