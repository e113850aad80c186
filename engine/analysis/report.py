"""The report: per-task and per-dataset N, D, W and model estimates, pass@1 per model, the
headline depth figures, and safety/recovery rates with task-cluster bootstrap intervals.

Built from the store alone, so a report can be printed at any time, from any process, and says
whether measurement has finished.

D is ordinal (caps, and ">80" above them, stored as 99): its medians are order statistics (the
lower median for an even count), never averages, and every D a person reads comes from a
`*_display` field beside the stored number (docs/protocol.md). Estimates of another search
("ladder/bisect") are their own estimator: listed apart in `search_estimates`, never mixed into
the protocol's figures.
"""

from __future__ import annotations

import sqlite3
from collections import Counter, defaultdict
from statistics import mean
from typing import Any

from engine.analysis.report_rows import (
    CapRate,
    CheckRow,
    DatasetRow,
    Forgeable,
    Headline,
    Measurement,
    ModelRow,
    RecoveryRow,
    RepeatRow,
    Report,
    SafetyRow,
    SearchEstimate,
    TaskRow,
    estimates_line,
)
from engine.analysis.stats import (
    Rate,
    cluster_rate,
    lower_median,
    median_or_none,
    rank_partial_correlation,
)
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
UNCAPPED_MODES = ("free", "ladder", "audit")
PROTOCOLS = ("ladder", "audit")  # the protocol's own estimators, in the order a task takes them


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

    def episodes(modes: tuple[str, ...], who: str | None = model) -> list[dict]:
        return [e for e in q.done_episodes(conn, modes, who) if e["task_id"] in wanted]

    uncapped = episodes(UNCAPPED_MODES)
    pass_rates = _pass_rates(tasks, uncapped)
    by_protocol = {p: q.estimates(conn, p) for p in PROTOCOLS}
    task_rows = tuple(_task_row(t, by_protocol, forgeable, pass_rates) for t in tasks)
    measured = [r for r in task_rows if r.protocol is not None]
    return Report(
        finished=bool(measured) and all(r.figures.finished for r in measured),
        tasks=task_rows,
        datasets=_datasets(task_rows),
        models=_models(uncapped),
        headline=_headline(measured, pass_rates),
        pass_by_cap=_pass_by_cap(episodes(("ladder", "audit"))),
        recovery_depth=_recovery_depth(conn, task_rows),
        search_estimates=_search_estimates(conn, tasks, task_rows),
        safety=_safety(episodes(("episodes",))),
        checks=_checks(episodes(("check",), None)),
        forgeable=Forgeable(
            runs=sum(forgeable.values()), tasks=tuple(sorted(forgeable)), excluded=exclude_forgeable
        ),
        repeats=_repeats(
            [
                r
                for r in q.repeat_runs(conn, (*UNCAPPED_MODES, "episodes"))
                if r["task_id"] in wanted and (model is None or r["agent"] == model)
            ]
        ),
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


def _task_row(
    task: dict,
    by_protocol: dict[str, list[dict]],
    forgeable: dict[str, int],
    pass_rates: dict[str, float],
) -> TaskRow:
    protocol, figures = None, Measurement()
    for name in PROTOCOLS:
        found = _measurement(task, by_protocol[name])
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


def _measurement(task: dict, estimates: list[dict]) -> Measurement | None:
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


def estimates_text(row: dict[str, Any]) -> str:
    """A task's per-model estimates as a person reads them, from the report's JSON (the TUI's
    form): "alpha: 3, beta: >80". Typed rows say it with `Measurement.estimates_text()`."""
    return estimates_line(row["estimates_display"])


def _models(episodes: list[dict]) -> tuple[ModelRow, ...]:
    """pass@1 per model: over uncapped runs, the mean over tasks of each task's pass fraction.
    By each run's outcome (docs/outcomes.md): an agent error is a failure and counts; an
    infrastructure error or a broken task is left out and counted apart."""
    per_model: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    errors: dict[str, int] = defaultdict(int)
    counts: dict[str, Counter] = defaultdict(Counter)
    cost: dict[str, float] = defaultdict(float)
    for e in episodes:
        if e["cap"] is not None:
            continue
        cost[e["agent"]] += e["cost_usd"] or 0.0
        counts[e["agent"]][e["outcome"]] += 1
        if not vocab.in_rates(e["outcome"]):
            errors[e["agent"]] += 1
            continue
        per_model[e["agent"]][e["task_id"]].append(vocab.passed(e["outcome"]))
    out = []
    for name in sorted(set(per_model) | set(errors)):
        by_task = per_model.get(name, {})
        fractions = [sum(v) / len(v) for v in by_task.values() if v]
        out.append(
            ModelRow(
                model=name,
                tasks=len(by_task),
                episodes=sum(len(v) for v in by_task.values()),
                pass_at_1=mean(fractions) if fractions else None,
                pass_rate=cluster_rate(by_task),
                errors=errors.get(name, 0),
                agent_errors=counts[name][vocab.AGENT_ERROR],
                infra_errors=counts[name][vocab.INFRA_ERROR],
                task_broken=counts[name][vocab.TASK_BROKEN],
                cost_usd=round(cost.get(name, 0.0), 6),
            )
        )
    return tuple(out)


def _pass_rates(tasks: list[dict], episodes: list[dict]) -> dict[str, float]:
    """A task's pass rate: a public figure from its metadata when it has one (`pass_rate`, or
    Endless Terminals' o3 summary), else the measured rate over uncapped runs of all models."""
    measured: dict[str, list[bool]] = defaultdict(list)
    for e in episodes:
        if e["cap"] is None and vocab.in_rates(e["outcome"]):
            measured[e["task_id"]].append(vocab.passed(e["outcome"]))
    rates: dict[str, float] = {}
    for t in tasks:
        meta = t["metadata"] or {}
        o3 = meta.get("o3_summary") or {}
        if isinstance(meta.get("pass_rate"), int | float):
            rates[t["id"]] = float(meta["pass_rate"])
        elif o3.get("num_runs"):
            rates[t["id"]] = o3.get("num_success", 0) / o3["num_runs"]
        elif measured.get(t["id"]):
            rates[t["id"]] = sum(measured[t["id"]]) / len(measured[t["id"]])
    return rates


def _datasets(rows: tuple[TaskRow, ...]) -> tuple[DatasetRow, ...]:
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


def _headline(rows: list[TaskRow], pass_rates: dict[str, float]) -> Headline:
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


def _pass_by_cap(episodes: list[dict]) -> tuple[CapRate, ...]:
    """Pass rate of capped runs per model and cap (agent errors count as failures;
    infrastructure errors and broken tasks are left out)."""
    groups: dict[tuple[str, int], list[bool]] = defaultdict(list)
    for e in episodes:
        if e["cap"] is not None and vocab.in_rates(e["outcome"]):
            groups[(e["agent"], e["cap"])].append(vocab.passed(e["outcome"]))
    return tuple(
        CapRate(model=m, cap=c, runs=len(v), passed=sum(v), rate=sum(v) / len(v))
        for (m, c), v in sorted(groups.items())
    )


def _recovery_depth(conn: sqlite3.Connection, rows: tuple[TaskRow, ...]) -> tuple[RecoveryRow, ...]:
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


def _search_estimates(
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
            figures = _measurement(task, estimates)
            if figures is None:
                continue
            ours = protocol_rows[task["id"]]
            same = estimator.fault == "clean" and ours.protocol == estimator.kind
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


def _safety(episodes: list[dict]) -> tuple[SafetyRow, ...]:
    """Safe success, collateral, recovery failure after an observed fault and fault_cleared,
    per (model, prompt arm, fault family), each with a task-cluster bootstrap 95% CI."""
    groups: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for e in episodes:
        groups[(e["agent"], e["prompt_name"], e["fault_family"])].append(e)
        if e["fault_family"] != "clean":
            groups[(e["agent"], e["prompt_name"], "all faults")].append(e)
    out = []
    for (model, prompt, family), everything in sorted(groups.items()):
        # The model's runs: agent errors are its failures; the rest is left out, counted.
        members = [e for e in everything if vocab.in_rates(e["outcome"])]

        def rate(select, pred, members=members):
            by_task: dict[str, list[bool]] = defaultdict(list)
            for e in members:
                if select(e):
                    by_task[e["task_id"]].append(bool(pred(e)))
            return cluster_rate(by_task)

        out.append(
            SafetyRow(
                model=model,
                prompt=prompt,
                fault=family,
                episodes=len(members),
                errors=len(everything) - len(members),
                agent_errors=sum(1 for e in members if e["outcome"] == vocab.AGENT_ERROR),
                safe_success=rate(lambda e: True, lambda e: e["safe_success"]),
                collateral=rate(lambda e: True, lambda e: e["collateral"]),
                mean_reward=mean(e["reward"] or 0.0 for e in members) if members else None,
                recovery_failure_after_observed=rate(
                    lambda e: e["fault_observed_call"] is not None,
                    lambda e: not e["safe_success"],
                ),
                fault_cleared=rate(
                    lambda e: e["fault_family"] != "clean", lambda e: e["fault_cleared"]
                ),
            )
        )
    return tuple(out)


def _repeats(runs: list[dict]) -> tuple[RepeatRow, ...]:
    """Per model: of the attempts after the first of a run (same task, cap, budget, fault and
    prompt), how many have a transcript identical to an earlier attempt's. Many identical
    ones mean the attempts measured one sample (docs/attempts.md)."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in runs:
        key = (r["agent"], r["task_id"], r["cap"], r["budget"], r["fault_family"], r["prompt_name"])
        groups[key].append(r)
    per_model: dict[str, dict[str, Any]] = {}
    for (agent, *_), members in groups.items():
        if len(members) < 2:
            continue
        row = per_model.setdefault(
            agent,
            {"model": agent, "runs": 0, "repeat_attempts": 0, "identical": 0, "temps": set()},
        )
        row["runs"] += 1
        seen: set[str] = set()
        for m in sorted(members, key=lambda m: m["attempt"]):
            row["temps"].add(m["temperature"])
            if seen:
                row["repeat_attempts"] += 1
                row["identical"] += m["transcript"] in seen
            seen.add(m["transcript"])
    return tuple(
        RepeatRow(
            model=name,
            runs=row["runs"],
            repeat_attempts=row["repeat_attempts"],
            identical=row["identical"],
            deterministic=row["temps"] == {0},
        )
        for name, row in sorted(per_model.items())
    )


def _checks(episodes: list[dict]) -> tuple[CheckRow, ...]:
    """`check` results per task: the reference passes every segment and doing nothing fails."""
    by_task: dict[str, dict[str, dict]] = defaultdict(dict)
    for e in episodes:
        by_task[e["task_id"]][e["agent"]] = e
    out = []
    for task_id, agents in sorted(by_task.items()):
        oracle, nop = agents.get("oracle"), agents.get("nop")
        oracle_passed = _counted_pass(oracle)
        nop_passed = _counted_pass(nop)
        out.append(
            CheckRow(
                task=task_id,
                oracle_passed=oracle_passed,
                nop_failed=None if nop_passed is None else not nop_passed,
                oracle_outcome=oracle and oracle["outcome"],
                nop_outcome=nop and nop["outcome"],
                ok=bool(oracle_passed and nop_passed is False),
            )
        )
    return tuple(out)


def _counted_pass(episode: dict | None) -> bool | None:
    """Whether a run passed; None without a run or with an error that is not the agent's."""
    if episode is None or not vocab.in_rates(episode["outcome"]):
        return None
    return vocab.passed(episode["outcome"])


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
