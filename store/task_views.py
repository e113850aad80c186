"""Read-only queries for the task screens: the dashboard's counts, a task's detail and its
ladder grid (caps x models).

The task's N, D and pass rate are not here: they are the report's (engine.analysis.report).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from store import vocab
from store.episode_views import outcome
from store.json_column import json_or


def depth_label(d: int | None) -> str:
    if d is None:
        return "–"
    return vocab.ABOVE_LARGEST_CAP_TEXT if d >= vocab.ABOVE_LARGEST_CAP else str(d)


# --------------------------------------------------------------------------- dashboard
# Counts only: every figure `depthtui report` prints (pass@1, D, safe success, ...) comes from
# engine.analysis.report.build_report, which the screens call.


@dataclass(frozen=True)
class DatasetCount:
    dataset: str
    tasks: int
    episodes: int
    errors: int
    running: int


def datasets(conn: sqlite3.Connection) -> list[DatasetCount]:
    rows = conn.execute(
        """
        SELECT t.dataset, count(*) AS tasks, coalesce(sum(e.runs), 0),
               coalesce(sum(e.errors), 0), coalesce(sum(e.running), 0)
        FROM tasks t
        LEFT JOIN (
            SELECT task_id, count(*) AS runs,
                   sum(outcome IN ('infra_error', 'task_broken')) AS errors,
                   sum(status = 'running') AS running
            FROM episodes GROUP BY task_id
        ) e ON e.task_id = t.id
        GROUP BY t.dataset ORDER BY t.dataset
        """
    ).fetchall()
    return [DatasetCount(*tuple(r)) for r in rows]


# --------------------------------------------------------------------------- tasks


@dataclass(frozen=True)
class TaskCounts:
    """What the store counts about a task; its N, D and pass rate are the report's."""

    id: str
    dataset: str
    name: str
    segments: int
    work: int | None
    runs: int
    running: int
    valid: bool | None  # the frozen contract's verdict; None when not validated


def task_counts(conn: sqlite3.Connection) -> list[TaskCounts]:
    rows = conn.execute(
        """
        SELECT t.id, t.dataset, t.name, t.segments, t.work,
               coalesce(r.runs, 0), coalesce(r.running, 0), c.valid
        FROM tasks t
        LEFT JOIN (
            SELECT task_id, count(*) AS runs, sum(status = 'running') AS running
            FROM episodes GROUP BY task_id
        ) r ON r.task_id = t.id
        LEFT JOIN contracts c ON c.task_id = t.id
        ORDER BY t.dataset, t.id
        """
    ).fetchall()
    return [
        TaskCounts(*tuple(r)[:7], None if r[7] is None else bool(r[7]))  # type: ignore[arg-type]
        for r in rows
    ]


@dataclass(frozen=True)
class SegmentInfo:
    idx: int
    name: str
    instruction: str
    solution: str | None
    tests: dict[str, str]
    work: int | None


@dataclass(frozen=True)
class ContractInfo:
    valid: bool
    reasons: list[str]
    permitted: dict[str, list[str]]
    tests: list[str]
    fault_targets: dict[str, str]
    flags: list[str]
    created_at: str


@dataclass(frozen=True)
class EstimateInfo:
    model: str
    protocol: str
    n_turns: int | None
    estimate: int | None
    finished: bool


@dataclass(frozen=True)
class TaskDetail:
    id: str
    dataset: str
    name: str
    format: str
    source_path: str
    verifier_kind: str
    work: int | None
    instruction: str
    warnings: list[str]
    segments: tuple[SegmentInfo, ...]
    contract: ContractInfo | None
    estimates: tuple[EstimateInfo, ...]  # the task's N and D are the report's (build_report)


def task_detail(conn: sqlite3.Connection, task_id: str) -> TaskDetail | None:
    t = conn.execute(
        "SELECT id, dataset, name, format, source_path, verifier_kind, work, instruction, "
        "warnings_json FROM tasks WHERE id = ?",
        (task_id,),
    ).fetchone()
    if t is None:
        return None
    segments = tuple(
        SegmentInfo(r[0], r[1], r[2], r[3], json_or(r[4], {}), r[5])
        for r in conn.execute(
            "SELECT idx, name, instruction, solution, tests_json, work FROM segments "
            "WHERE task_id = ? ORDER BY idx",
            (task_id,),
        )
    )
    c = conn.execute(
        "SELECT valid, reasons_json, permitted_json, tests_json, fault_targets_json, flags_json, "
        "created_at FROM contracts WHERE task_id = ?",
        (task_id,),
    ).fetchone()
    contract = None
    if c is not None:
        contract = ContractInfo(
            bool(c[0]),
            json_or(c[1], []),
            json_or(c[2], {}),
            json_or(c[3], []),
            json_or(c[4], {}),
            json_or(c[5], []),
            c[6],
        )
    estimates = tuple(
        EstimateInfo(r[0], r[1], r[2], r[3], bool(r[4]))
        for r in conn.execute(
            "SELECT model, protocol, n_turns, estimate, finished FROM estimates WHERE task_id = ? "
            "ORDER BY protocol, model",
            (task_id,),
        )
    )
    return TaskDetail(
        t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], json_or(t[8], []), segments, contract,
        estimates,
    )  # fmt: skip


# --------------------------------------------------------------------------- ladder grid


@dataclass(frozen=True)
class LadderRun:
    episode_id: int
    attempt: int
    outcome: str


@dataclass(frozen=True)
class LadderGrid:
    """Runs of the depth protocol for one task: caps (None = uncapped) x models."""

    caps: tuple[int | None, ...]
    models: tuple[str, ...]
    cells: dict[tuple[str, int | None], tuple[LadderRun, ...]]
    estimates: dict[str, EstimateInfo]

    def implied(self, model: str, cap: int | None) -> bool:
        """Caps at or above the first model's N count as passed without runs
        (docs/protocol.md)."""
        est = self.estimates.get(model)
        return (
            cap is not None
            and est is not None
            and est.n_turns is not None
            and cap >= est.n_turns
            and not self.cells.get((model, cap))
        )


def ladder(conn: sqlite3.Connection, task_id: str) -> LadderGrid:
    cells: dict[tuple[str, int | None], list[LadderRun]] = {}
    models: list[str] = []
    # The protocol's uncapped runs may have been made by `free` (the ladder reuses them), so
    # clean uncapped runs of any verb count; they join the rows of models the ladder measured.
    free_runs: list[sqlite3.Row | tuple] = []
    for r in conn.execute(
        "SELECT id, agent, cap, attempt, status, outcome, end_reason, collateral, "
        "mode IN ('ladder', 'audit') FROM episodes WHERE task_id = ? AND (mode IN "
        "('ladder', 'audit') OR (mode = 'free' AND cap IS NULL AND fault_family = 'clean')) "
        "ORDER BY id",
        (task_id,),
    ):
        if not r[8]:
            free_runs.append(r)
            continue
        if r[1] not in models:
            models.append(r[1])
        cells.setdefault((r[1], r[2]), []).append(LadderRun(r[0], r[3], outcome(*tuple(r)[4:8])))
    # The row with model '' is the protocol's summary of the task (its N, D and whether it is
    # finished), not a model: the task's D is shown with the task, not as a grid row.
    estimates = {
        e.model: e
        for e in (
            EstimateInfo(r[0], r[1], r[2], r[3], bool(r[4]))
            for r in conn.execute(
                "SELECT model, protocol, n_turns, estimate, finished FROM estimates "
                "WHERE task_id = ? AND model != '' AND protocol IN ('ladder', 'audit')",
                (task_id,),
            )
        )
    }
    for m in estimates:
        if m not in models:
            models.append(m)
    for r in free_runs:
        # a model with free runs only gets its row too: its uncapped runs are the protocol's
        # first step, and when none passed that is the reason it has no N and no D
        if r[1] not in models:
            models.append(r[1])
        run = LadderRun(r[0], r[3], outcome(*tuple(r)[4:8]))
        cells.setdefault((r[1], None), []).append(run)
    for key, runs in cells.items():
        cells[key] = sorted(runs, key=lambda run: run.episode_id)
    return LadderGrid(
        caps=(*vocab.CAPS, None),
        models=tuple(models),
        cells={k: tuple(v) for k, v in cells.items()},
        estimates=estimates,
    )
