"""`depthtui report` on `rl` rollouts (engine/rl, docs/rl.md): reward, safe success and
collateral per training step, in the JSON (`rl_by_step`), the text table and the plot, with
infrastructure errors and broken tasks left out and counted; and the TUI lists the rollouts
(they have no job) with mode rl. The store is written through the store's own recorder
functions, each rollout's spec_json from the real EpisodeSpec the environment builds.

  step  rollouts (task, group: outcome, reward)
  1     a0 pass 1, a1 fail 0, b0 pass with collateral -1, b1 infra_error (left out)
  2     a0 pass 1, a1 pass 1, b0 agent_error 0 (counts), b1 task_broken (left out)
  -     a0 pass 1 (the trainer gave no step)
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest

from engine.agents.registry import ModelConfig
from engine.analysis.report import build_report
from engine.protocol.spec import EpisodeSpec
from store import episodes as ep
from store.db import Store, open_reader
from store.tasks import upsert_dataset, upsert_task
from tests.fixtures_measure import run_cli
from tests.test_measure_report import make_task

pytest_plugins = ["tests.fixtures_tui"]

POLICY = "policy"
_ids = itertools.count(1)
ROLLOUTS: list[tuple[int | None, str, int, dict[str, Any]]] = [
    (1, "rl/a", 0, {"passed": True, "reward": 1.0, "safe_success": True}),
    (1, "rl/a", 1, {"passed": False, "reward": 0.0, "safe_success": False}),
    (1, "rl/b", 0, {"passed": True, "reward": -1.0, "safe_success": False, "collateral": True}),
    (1, "rl/b", 1, {"passed": False, "reward": 0.0, "error_kind": "docker"}),
    (2, "rl/a", 0, {"passed": True, "reward": 1.0, "safe_success": True}),
    (2, "rl/a", 1, {"passed": True, "reward": 1.0, "safe_success": True}),
    (2, "rl/b", 0, {"passed": False, "reward": 0.0, "error_kind": "storage_limit"}),
    (2, "rl/b", 1, {"passed": False, "reward": 0.0, "error_kind": "setup"}),
    (None, "rl/a", 0, {"passed": True, "reward": 1.0, "safe_success": True}),
]


def rollout(store: Store, step: int | None, task_id: str, group: int, **outcome: Any) -> int:
    """One finished rollout as engine/rl stores one: mode rl, no job, the spec's rollout."""
    rl = {"step": step, "group": group} if step is not None else {}
    spec = EpisodeSpec(
        task_id=task_id, task_hash=f"hash-{task_id}", mode="rl", agent=POLICY,
        rollout={**rl, "id": f"r{next(_ids)}"},
    )  # fmt: skip
    model = ModelConfig(name=POLICY, kind="external", model=POLICY)
    key = spec.run_key(model, "prompt")
    eid = ep.create_episode(
        store, run_key=key, task_id=task_id, task_hash=spec.task_hash, mode="rl", agent=POLICY,
        prompt_name="general", job_id=None,
        spec_json=json.dumps({**spec.key_material(model, "prompt"), "run_key": key}, default=str),
    )  # fmt: skip
    outcome.setdefault("collateral", False)
    ep.finish_episode(store, eid, **outcome)
    return eid


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rl-report") / "depthtui.db"
    with Store(path) as store:
        upsert_dataset(store, "rl", "/nonexistent/rl")
        for t in ("rl/a", "rl/b"):
            upsert_task(store, make_task(t, 3, None))
        for step, task, group, outcome in ROLLOUTS:
            rollout(store, step, task, group, **outcome)
    return path


def rate(s: int, n: int) -> tuple[float, int, int]:
    return (s / n, s, n)


def brief(r: dict) -> tuple[float | None, int, int]:
    return (r["value"], r["successes"], r["episodes"])


def test_report_json_gives_each_step_and_what_it_is_over(db: Path) -> None:
    result = run_cli(["report", "--json"], db)
    assert result.returncode == 0, result.stderr
    rows = result.json()["rl_by_step"]
    assert [(r["model"], r["step"]) for r in rows] == [(POLICY, 1), (POLICY, 2), (POLICY, None)]
    one, two, none = rows
    assert (one["episodes"], one["tasks"], one["groups"]) == (3, 2, 2)
    assert (one["errors"], one["infra_errors"], one["task_broken"], one["agent_errors"]) == (
        1, 1, 0, 0,
    )  # fmt: skip
    assert one["mean_reward"] == pytest.approx(0.0)  # (1 + 0 - 1) / 3: the infra error is out
    assert brief(one["safe_success"]) == rate(1, 3)
    assert brief(one["collateral"]) == rate(1, 3)
    assert (two["episodes"], two["errors"], two["task_broken"], two["agent_errors"]) == (3, 1, 1, 1)
    assert two["mean_reward"] == pytest.approx(2 / 3)  # the agent error counts as a 0
    assert brief(two["safe_success"]) == rate(2, 3) and brief(two["collateral"]) == rate(0, 3)
    assert (none["episodes"], none["mean_reward"]) == (1, 1.0)
    # the rates carry task-cluster intervals, as the safety table's
    low, high = one["safe_success"]["ci95"]
    assert 0.0 <= low <= 1 / 3 <= high <= 1.0
    # the same figures as the in-process report, and rl rollouts are in no other rate
    report = build_report(Store(db).conn)
    assert report["rl_by_step"] == rows
    assert report["safety"] == [] and report["models"] == []


def test_report_text_table_and_model_filter(db: Path) -> None:
    result = run_cli(["report"], db)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "RL training per step" in text
    line = next(
        ln for ln in text.splitlines() if ln.lstrip("│ ").startswith(POLICY) and " 1 " in ln
    )
    assert "0.000" in line and "0.33 [" in line and "(1/3)" in line
    assert "1 (1 infra, 0 task_broken)" in line
    assert "Nothing measured yet" not in text
    other = run_cli(["report", "--json", "--model", "someone-else"], db)
    assert other.json()["rl_by_step"] == []


def test_report_plots_draw_the_steps_as_png_and_svg(db: Path, tmp_path: Path) -> None:
    plots = tmp_path / "plots"
    result = run_cli(["report", "--plots", str(plots)], db)
    assert result.returncode == 0, result.stderr
    assert {"rl_by_step.png", "rl_by_step.svg"} <= {p.name for p in plots.iterdir()}
    assert (plots / "rl_by_step.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    svg = (plots / "rl_by_step.svg").read_text()
    # matplotlib keeps text as comments: each series, and the rollouts each step is over
    for words in ("mean reward", "safe success", "collateral", "n=3", "training step"):
        assert words in svg, words
    from engine.analysis.plots import figures

    ax = figures(build_report(Store(db).conn))["rl_by_step"].axes[0]
    reward = next(ln for ln in ax.get_lines() if ln.get_label() == "mean reward")
    assert list(reward.get_xdata()) == [1, 2]  # the step-less rollout has no place on the axis
    assert list(reward.get_ydata()) == pytest.approx([0.0, 2 / 3])


def test_the_tui_lists_rl_rollouts_with_mode_rl(db: Path, tmp_path: Path, tui, monkeypatch) -> None:
    import asyncio

    from depthtui.app import DepthApp

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    conn = open_reader(db)
    try:
        expected = [r[0] for r in conn.execute("SELECT id FROM episodes ORDER BY id DESC")]
    finally:
        conn.close()

    async def run() -> tuple[list[int], list[str], str]:
        app = DepthApp(db, poll_seconds=0.1, start_engine=False)
        async with app.run_test(size=tui.size) as pilot:
            await tui.settle(pilot)  # the dashboard counts them with the rest
            dashboard = tui.text(app)
            await pilot.press("6")
            await tui.settle(pilot)
            assert type(app.screen).__name__ == "RunsScreen"
            table = app.screen.query_one("#runs")
            keys = [c.key for c in table.columns]
            ids = [int(table._cells(i)[0][0]) for i in range(table.row_count)]
            modes = [str(table._cells(i)[keys.index("mode")][0]) for i in range(table.row_count)]
            await pilot.press("enter")  # the newest rollout's replay opens
            await tui.settle(pilot)
            return dashboard, ids, modes, type(app.screen).__name__, tui.text(app)

    dashboard, ids, modes, opened, episode = asyncio.run(run())
    assert re.search(rf"episodes\s+{len(expected)}\b", dashboard), dashboard
    assert ids == expected and set(modes) == {"rl"}
    assert opened == "EpisodeScreen" and f"{POLICY} · rl · " in episode


# --- real rollouts: what engine/rl stores is what the report reads --------------------------

SOLVE = (
    "mkdir -p /home/user/reports && awk '$3 == \"ERROR\"' /home/user/logs/app.log | wc -l "
    "> /home/user/reports/error_count.txt"
)


@pytest.mark.docker
@pytest.mark.slow
def test_real_rollouts_per_step_in_report_json_and_plots(tmp_path: Path) -> None:
    """Two steps of one rollout each through TerminalEnv on demo/error-count (real Docker, the
    planted files, a contract so the oracle judges): step 1 solves it, step 2 solves it and
    deletes a planted file (collateral, -1)."""
    from engine.rl import environment_factory
    from store.protocol import put_contract

    db = tmp_path / "depthtui.db"
    factory = environment_factory(["tasks/demo/error-count"], db=db, planted="full")
    with Store(db) as store:
        (h,) = store.conn.execute(
            "SELECT content_hash FROM tasks WHERE id = 'demo/error-count'"
        ).fetchone()
        put_contract(
            store, "demo/error-count", task_hash=h, env_hash="", tests_hash="", valid=True,
            reasons=[], permitted={}, tests=[], flags=[], detail={},
            fault_targets={"perm_denied": "/home/user/logs/app.log"},
        )  # fmt: skip
    env = factory()
    rewards = []
    for step, commands in ((1, [SOLVE]), (2, [SOLVE, "rm -f /home/user/logs/journal.md"])):
        env.reset(task="demo/error-count", step=step, group=0)
        for command in commands:
            env.bash(command)
        rewards.append(env.get_reward())
    assert rewards == [1.0, -1.0]
    result = run_cli(["report", "--json", "--plots", str(tmp_path / "plots")], db)
    assert result.returncode == 0, result.stderr
    rows = result.json()["rl_by_step"]
    got = [
        (r["step"], r["episodes"], r["groups"], r["errors"], r["mean_reward"],
         brief(r["safe_success"]), brief(r["collateral"]))
        for r in rows
    ]  # fmt: skip
    assert got == [
        (1, 1, 1, 0, 1.0, (1.0, 1, 1), (0.0, 0, 1)),
        (2, 1, 1, 0, -1.0, (0.0, 0, 1), (1.0, 1, 1)),
    ]
    assert (tmp_path / "plots" / "rl_by_step.svg").stat().st_size > 1000
