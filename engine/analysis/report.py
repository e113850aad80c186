"""The report: per-task and per-dataset N, D, W and model estimates, pass@1 per model, the
headline depth figures, safety/recovery rates with task-cluster bootstrap intervals, reward,
safe success and collateral per training step of `rl` rollouts, and the
few helpers that say a figure as text.

Built from the store alone, so a report can be printed at any time, from any process, and says
whether measurement has finished. The depth figures are engine/analysis/depth_figures.py's, the
rates over runs engine/analysis/run_rates.py's, the typed parts engine/analysis/report_rows.py's.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from engine.analysis import depth_figures as depth
from engine.analysis import rl_steps, verifier_audit
from engine.analysis import run_rates as rates
from engine.analysis.report_rows import (
    DatasetRow,
    Forgeable,
    Headline,
    Report,
    TaskRow,
    estimates_line,
)
from engine.analysis.stats import Rate
from store import headline as headline_q
from store import reports as q

UNCAPPED_MODES = ("free", "ladder", "audit")


def build(
    conn: sqlite3.Connection,
    model: str | None = None,
    task_ids: list[str] | None = None,
    exclude_forgeable: bool = False,
) -> Report:
    """The whole report, or the part about `task_ids` (and `model`). `exclude_forgeable` leaves
    out the tasks whose verdicts agent code could forge (their tests run it), every figure."""
    tasks = q.tasks(conn, task_ids)
    forgeable = {k: v for k, v in q.forgeable_counts(conn).items() if k in {t["id"] for t in tasks}}
    if exclude_forgeable:
        tasks = [t for t in tasks if t["id"] not in forgeable]
    wanted = {t["id"] for t in tasks}

    def episodes(modes: tuple[str, ...] | None, who: str | None = model) -> list[dict]:
        return [e for e in q.done_episodes(conn, modes, who) if e["task_id"] in wanted]

    uncapped = episodes(UNCAPPED_MODES)
    part = _task_figures(conn, tasks, forgeable, uncapped)
    return Report(
        finished=part.finished,
        tasks=part.tasks,
        datasets=part.datasets,
        models=rates.models(uncapped),
        spend=rates.spend(episodes(None)),
        headline=part.headline,
        pass_by_cap=rates.pass_by_cap(episodes(("ladder", "audit"))),
        recovery_depth=depth.recovery_depth(conn, part.tasks),
        search_estimates=depth.search_estimates(conn, tasks, part.tasks),
        safety=rates.safety(episodes(("episodes",))),
        checks=rates.checks(episodes(("check",), None)),
        forgeable=Forgeable(
            runs=sum(forgeable.values()), tasks=tuple(sorted(forgeable)), excluded=exclude_forgeable
        ),
        repeats=rates.repeats(
            [
                r
                for r in q.repeat_runs(conn, (*UNCAPPED_MODES, "episodes"))
                if r["task_id"] in wanted and (model is None or r["agent"] == model)
            ]
        ),
        verifier=verifier_audit.rows(conn, wanted),
        rl_by_step=rl_steps.by_step(
            [r for r in q.rl_rollouts(conn, model) if r["task_id"] in wanted]
        ),
    )


@dataclass(frozen=True)
class _TaskFigures:
    finished: bool
    tasks: tuple[TaskRow, ...]
    datasets: tuple[DatasetRow, ...]
    headline: Headline


def _task_figures(
    conn: sqlite3.Connection, tasks: list[dict], forgeable: dict[str, int], uncapped: list[dict]
) -> _TaskFigures:
    """Each task's row (N, D, W, estimates, pass rate), the datasets and the headline: what
    build and build_headline share. `uncapped`: finished uncapped runs (task_id, cap and
    outcome are read)."""
    pass_rates = rates.pass_rates(tasks, uncapped)
    by_protocol = {p: q.estimates(conn, p) for p in depth.PROTOCOLS}
    task_rows = tuple(depth.task_row(t, by_protocol, forgeable, pass_rates) for t in tasks)
    measured = [r for r in task_rows if r.protocol is not None]
    return _TaskFigures(
        finished=bool(measured) and all(r.figures.finished for r in measured),
        tasks=task_rows,
        datasets=depth.datasets(task_rows),
        headline=depth.headline(measured, pass_rates),
    )


def build_report(
    conn: sqlite3.Connection,
    model: str | None = None,
    task_ids: list[str] | None = None,
    exclude_forgeable: bool = False,
) -> dict[str, Any]:
    """The report as JSON (`build(...).to_json()`): what `--json` prints and summary.json holds,
    and what the TUI's screens read, since they may get it from a child Python as JSON."""
    return build(conn, model, task_ids, exclude_forgeable).to_json()


def build_headline(conn: sqlite3.Connection) -> dict[str, Any]:
    """The part of build_report(conn) that the dashboard heads with, equal to it key for key:
    "finished", "tasks", "datasets", "headline" and "checks". Read narrowly (each uncapped
    run's task, cap and outcome, not its every column) and with no bootstrap, so it is ready
    in a fraction of the whole report's time on a big store."""
    tasks = q.tasks(conn)
    part = _task_figures(
        conn, tasks, q.forgeable_counts(conn), headline_q.done_outcomes(conn, UNCAPPED_MODES)
    )
    return {
        "finished": part.finished,
        "tasks": [r.to_json() for r in part.tasks],
        "datasets": [d.to_json() for d in part.datasets],
        "headline": part.headline.to_json(),
        "checks": [c.to_json() for c in rates.checks(q.done_episodes(conn, ("check",), None))],
    }


def estimates_text(row: dict[str, Any]) -> str:
    """A task's per-model estimates as a person reads them, from the report's JSON (the TUI's
    form): "alpha: 3, beta: >80". Typed rows say it with `Measurement.estimates_text()`."""
    return estimates_line(row["estimates_display"])


def figure_text(value: Any, digits: int = 2, none: str = "-") -> str:
    """A report figure as text: floats with `digits` decimals, `none` for a missing one."""
    if value is None:
        return none
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def rate_text(rate: Rate | dict[str, Any], none: str = "-") -> str:
    """A rate as text: value [95% interval] (successes/episodes). Takes the typed rate or its
    JSON form (`Rate.as_dict()`, what the TUI's screens hold)."""
    if isinstance(rate, dict):
        rate = Rate.from_json(rate)
    if rate.value is None:
        return none
    return f"{rate.value:.2f} [{rate.low:.2f}, {rate.high:.2f}] ({rate.successes}/{rate.episodes})"


def cost_text(cost_usd: float | None) -> str:
    """A model's cost as text: dollars, or "no price" when the model has none (its runs cost
    nothing the store could count, which is not $0)."""
    return "no price" if cost_usd is None else f"${cost_usd:.4f}"
