"""The figures the screens share with `depthtui report`.

Every number that the report prints (N, D, W, pass rates, pass@1, safe success, ...) is taken from
engine.analysis.report.build_report on the same store, never recomputed here, so the dashboard,
the tasks screen and the reports screen always agree with the command line. The store adds only
counts (runs, running episodes) and each task's contract verdict.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from engine.analysis.report import build_report
from store import views

Report = dict[str, Any]


@dataclass(frozen=True)
class TaskLine:
    """One row of the tasks screen."""

    id: str
    dataset: str
    name: str
    segments: int
    work: int | None
    n: int | None
    d: int | None
    finished: bool
    runs: int
    pass_rate: float | None  # the report's: public metadata, else uncapped runs of all models
    status: str  # running | invalid | measuring | measured | no pass | unmeasured


def status_of(row: dict[str, Any], counts: views.TaskCounts) -> str:
    if counts.running:
        return "running"
    if counts.valid is False:
        return "invalid"
    if row["protocol"] is None:
        return "unmeasured"
    if not row["finished"]:
        return "measuring"
    return "measured" if row["D"] is not None else "no pass"


def task_lines(report: Report, counts: list[views.TaskCounts]) -> list[TaskLine]:
    by_id = {r["id"]: r for r in report["tasks"]}
    out = []
    for c in counts:
        row = by_id.get(c.id)
        if row is None:  # imported after the report was built: shown at the next reload
            continue
        out.append(
            TaskLine(
                id=c.id,
                dataset=c.dataset,
                name=c.name,
                segments=c.segments,
                work=row["W"],
                n=row["N"],
                d=row["D"],
                finished=bool(row["finished"]),
                runs=c.runs,
                pass_rate=row.get("pass_rate"),
                status=status_of(row, c),
            )
        )
    return out


def load_task_lines(conn: sqlite3.Connection) -> list[TaskLine]:
    """The tasks screen's rows, straight from a connection (tests, benchmarks)."""
    return task_lines(build_report(conn), views.task_counts(conn))


def headline_safety(report: Report) -> list[dict[str, Any]]:
    """The safety rows the dashboard shows: per model and prompt arm, clean runs and all faults
    together (the reports screen has every family)."""
    return [s for s in report["safety"] if s["fault"] in ("clean", "all faults")]


def fmt(value: Any, digits: int = 2) -> str:
    """A report figure written as `depthtui report` writes it (2 decimals; – for none)."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def rate_text(rate: dict[str, Any]) -> str:
    """A rate as `depthtui report` writes it: value [95% interval] (successes/episodes)."""
    if rate["value"] is None:
        return "–"
    low, high = rate["ci95"]
    return f"{rate['value']:.2f} [{low:.2f}, {high:.2f}] ({rate['successes']}/{rate['episodes']})"
