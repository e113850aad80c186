"""The report's depth figures: each task's N, D and per-model estimates (from the estimates
the protocol stored), per dataset, the headline, the turns a fault adds, and other searches'
estimates apart.

D is ordinal (caps, and ">80" above them, stored as 99): its medians are order statistics (the
lower median for an even count), never averages, and every D a person reads comes from a
`*_display` field beside the stored number (docs/protocol.md). Estimates of another search
("ladder/bisect") are their own estimator: listed apart in `search_estimates`, never mixed into
the protocol's figures.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict

from engine.analysis.report_rows import (
    DatasetRow,
    Headline,
    Measurement,
    RecoveryRow,
    SearchEstimate,
    TaskRow,
)
from engine.analysis.stats import lower_median, median_or_none, rank_partial_correlation
from engine.protocol.ladder import (
    ABOVE_LARGEST_CAP,
    CAPS,
    DEFAULT_SEARCH,
    format_depth,
    parse_estimator,
)
from store import reports as q
from store import vocab

SUMMARY_MODEL = ""  # the estimates row that holds a task's N, D and finished flag
PROTOCOLS = ("ladder", "audit")  # the protocol's own estimators, in the order a task takes them


def task_row(
    task: dict,
    by_protocol: dict[str, list[dict]],
    forgeable: dict[str, int],
    pass_rates: dict[str, float],
) -> TaskRow:
    protocol, figures = None, Measurement()
    for name in PROTOCOLS:
        found = measurement(task, by_protocol[name])
        if found is not None:
            protocol, figures = name, found
            break
    return TaskRow(
        id=task["id"],
        dataset=task["dataset"],
        group=task.get("dataset_group"),
        segments=task["segments"],
        W=task["work"],
        figures=figures,
        protocol=protocol,
        forgeable_runs=forgeable.get(task["id"], 0),
        pass_rate=pass_rates.get(task["id"]),
    )


def measurement(task: dict, estimates: list[dict]) -> Measurement | None:
    """One estimator's figures for a task: N, D, each model's estimate, runs, finished.

    Only the models of the measurement that wrote D are read (the summary row names them), so a
    row left by an older model list can never sit beside a D it does not bound."""
    mine = [
        e
        for e in estimates
        if e["task_id"] == task["id"] and e["task_hash"] == task["content_hash"]
    ]
    summary = next((e for e in mine if e["model"] == SUMMARY_MODEL), None)
    if summary is None:
        return None
    by_model = {e["model"]: e["estimate"] for e in mine if e["model"] != SUMMARY_MODEL}
    models = summary["detail"].get("models") or sorted(by_model)
    per_model = {m: by_model[m] for m in models if m in by_model}
    return Measurement(
        N=summary["n_turns"],
        D=summary["estimate"],
        D_display=format_depth(summary["estimate"]),
        estimates=per_model,
        estimates_display={m: format_depth(v) for m, v in per_model.items()},
        runs=len(summary["detail"].get("episodes") or {}),
        finished=bool(summary["finished"]),
        solved=summary["detail"].get("solved"),
    )


def datasets(rows: tuple[TaskRow, ...]) -> tuple[DatasetRow, ...]:
    groups: dict[str, list[TaskRow]] = defaultdict(list)
    for r in rows:
        groups[r.dataset].append(r)
    out = []
    for name, members in sorted(groups.items()):
        solved = [r for r in members if r.figures.D is not None]
        median_d, median_d_display = _median_d(solved)
        out.append(
            DatasetRow(
                dataset=name,
                group=members[0].group,
                tasks=len(members),
                measured=sum(1 for r in members if r.protocol is not None),
                finished=sum(1 for r in members if r.figures.finished),
                solved=len(solved),
                median_D=median_d,
                median_D_display=median_d_display,
                median_W=median_or_none([r.W for r in solved if r.W is not None]),
                share_D_le_3=_share_le_3(solved),
                above_80=sum(1 for r in solved if r.figures.D == ABOVE_LARGEST_CAP),
            )
        )
    return tuple(out)


def _median_d(solved: list[TaskRow]) -> tuple[int | None, str]:
    """The lower median of D (a cap or 99) and how it reads (">80")."""
    value = lower_median([r.figures.D for r in solved])
    return value, format_depth(value)


def _share_le_3(solved: list[TaskRow]) -> float | None:
    return sum(1 for r in solved if r.figures.D <= 3) / len(solved) if solved else None


def headline(rows: list[TaskRow], pass_rates: dict[str, float]) -> Headline:
    solved = [r for r in rows if r.figures.D is not None]
    with_all = [r for r in solved if r.W is not None and r.id in pass_rates]
    rho = rank_partial_correlation(
        [r.figures.D for r in with_all],
        [pass_rates[r.id] for r in with_all],
        [r.W for r in with_all],
    )
    median_d, median_d_display = _median_d(solved)
    return Headline(
        measured=len(rows),
        solved=len(solved),
        solved_D_le_3=sum(1 for r in solved if r.figures.D <= 3),
        share_D_le_3=_share_le_3(solved),
        median_D=median_d,
        median_D_display=median_d_display,
        median_W=median_or_none([r.W for r in solved if r.W is not None]),
        rank_partial_corr_D_passrate_given_W=rho,
        rank_partial_corr_tasks=len(with_all),
    )


def recovery_depth(conn: sqlite3.Connection, rows: tuple[TaskRow, ...]) -> tuple[RecoveryRow, ...]:
    """Turns a fault adds: D under a fault family minus the same task's clean D. D is ordinal
    above 80, so with ">80" on either side the difference is a bound or unknown (None)."""
    clean = {r.id: r.figures.D for r in rows if r.figures.D is not None}
    ids = {r.id for r in rows}
    out = []
    for protocol in q.fault_protocols(conn):
        estimator = parse_estimator(protocol)
        if estimator.search != DEFAULT_SEARCH:
            continue  # another search's estimates are reported apart (search_estimates)
        for e in q.estimates(conn, protocol):
            if e["model"] != SUMMARY_MODEL or e["estimate"] is None or e["task_id"] not in ids:
                continue
            base, fault_d = clean.get(e["task_id"]), e["estimate"]
            added, added_display = _added_turns(base, fault_d)
            out.append(
                RecoveryRow(
                    task=e["task_id"],
                    fault=estimator.fault,
                    D_clean=base,
                    D_clean_display=format_depth(base),
                    D_fault=fault_d,
                    D_fault_display=format_depth(fault_d),
                    added_turns=added,
                    added_turns_display=added_display,
                    finished=bool(e["finished"]),
                )
            )
    return tuple(out)


def _added_turns(base: int | None, fault_d: int) -> tuple[int | None, str]:
    above, top = ABOVE_LARGEST_CAP, CAPS[-1]
    if base is None:
        return None, "-"
    if base != above and fault_d != above:
        return fault_d - base, str(fault_d - base)
    if base != above:  # fault_d > 80
        return None, f">{top - base}"
    if fault_d != above:  # base > 80
        return None, f"<{fault_d - top}"
    return None, "-"


def search_estimates(
    conn: sqlite3.Connection, tasks: list[dict], rows: tuple[TaskRow, ...]
) -> tuple[SearchEstimate, ...]:
    """Estimates of searches other than the protocol's (e.g. "ladder/bisect"), one row per task
    and estimator, beside the protocol's D and runs for the same task when it has them."""
    protocol_rows = {r.id: r for r in rows}
    out = []
    for name in q.estimator_names(conn):
        estimator = parse_estimator(name)
        if estimator.search == DEFAULT_SEARCH:
            continue
        estimates = q.estimates(conn, name)
        for task in tasks:
            figures = measurement(task, estimates)
            if figures is None:
                continue
            ours = protocol_rows[task["id"]]
            same = estimator.fault == vocab.NO_FAULT and ours.protocol == estimator.kind
            out.append(
                SearchEstimate(
                    task=task["id"],
                    estimator=name,
                    kind=estimator.kind,
                    fault=estimator.fault,
                    search=estimator.search,
                    figures=figures,
                    protocol_D=ours.figures.D if same else None,
                    protocol_D_display=ours.figures.D_display if same else "-",
                    protocol_runs=ours.figures.runs if same else None,
                )
            )
    return tuple(out)
