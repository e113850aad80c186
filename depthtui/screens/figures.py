"""The figures the screens share with `depthtui report`.

Every number that the report prints (N, D, W, pass rates, pass@1, safe success, ...) is taken from
engine.analysis.report.build_report on the same store, never recomputed here, so the dashboard,
the tasks screen and the reports screen always agree with the command line. The store adds only
counts (runs, running episodes) and each task's contract verdict.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.analysis.report import build_report, figure_text
from engine.analysis.report import rate_text as report_rate_text
from store import views, vocab
from store.db import StoreError, open_reader

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


PENDING = "…"  # the report is being built: figures follow in a moment


def status_of(row: dict[str, Any] | None, counts: views.TaskCounts) -> str:
    if counts.running:
        return "running"
    if counts.valid is False:
        return "invalid"
    if row is None:
        return PENDING
    if row["protocol"] is None:
        return "unmeasured"
    if not row["finished"]:
        return "measuring"
    return "measured" if row["D"] is not None else "no pass"


def task_lines(report: Report | None, counts: list[views.TaskCounts]) -> list[TaskLine]:
    """A row per task. A task the report does not hold yet (no report so far, or imported
    since it was built) shows blank figures and a pending status until the next one."""
    by_id = {r["id"]: r for r in report["tasks"]} if report is not None else {}
    out = []
    for c in counts:
        row = by_id.get(c.id)
        out.append(
            TaskLine(
                id=c.id,
                dataset=c.dataset,
                name=c.name,
                segments=c.segments,
                work=c.work if row is None else row["W"],
                n=None if row is None else row["N"],
                d=None if row is None else row["D"],
                finished=bool(row and row["finished"]),
                runs=c.runs,
                pass_rate=None if row is None else row.get("pass_rate"),
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
    return [s for s in report["safety"] if s["fault"] in (vocab.NO_FAULT, "all faults")]


def fmt(value: Any, digits: int = 2) -> str:
    """A report figure written as `depthtui report` writes it (– for none)."""
    return figure_text(value, digits, none="–")


def shown(display: str) -> str:
    """A report's display text (D as ">80", never 99) as the screens write it (– for none)."""
    return "–" if display == "-" else display


def rate_text(rate: dict[str, Any]) -> str:
    """A rate as `depthtui report` writes it (– for none)."""
    return report_rate_text(rate, none="–")


class ReportStopped(Exception):
    """The report's child process was ended because the app is quitting."""


class ReportChild:
    """Runs build_report in a child Python (`python -m depthtui.screens.figures DB`) and hands it
    back as JSON, so the caller's threads keep the GIL to themselves. One child at a time;
    stop() ends the one running, so quitting never waits for a report nobody will see."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        self._stopped = False

    def build(self, db: Path, timeout_s: float = 300) -> Report:
        with self._lock:
            if self._stopped:
                raise ReportStopped(str(db))
            proc = subprocess.Popen(
                [sys.executable, "-m", "depthtui.screens.figures", str(db)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            self._proc = proc
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
        finally:
            with self._lock:
                self._proc = None
        if self._stopped:
            raise ReportStopped(str(db))
        if proc.returncode != 0:
            raise StoreError(f"{db}: the report could not be built: {err.strip()[-500:]}")
        return json.loads(out)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            if self._proc is not None:
                self._proc.kill()


def build_report_here(db: Path) -> Report:
    conn = open_reader(db)
    try:
        return build_report(conn)
    finally:
        conn.close()


def main(argv: list[str]) -> int:
    json.dump(build_report_here(Path(argv[0])), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
