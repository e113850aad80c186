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

from engine.analysis.stats import (
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
from store import headline as headline_q
from store import reports as q
from store import vocab

SUMMARY_MODEL = ""  # the estimates row that holds a task's N, D and finished flag
UNCAPPED_MODES = ("free", "ladder", "audit")
PROTOCOLS = ("ladder", "audit")  # the protocol's own estimators, in the order a task takes them


def build_report(
    conn: sqlite3.Connection,
    model: str | None = None,
    task_ids: list[str] | None = None,
    exclude_forgeable: bool = False,
) -> dict[str, Any]:
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
    part = _task_figures(conn, tasks, forgeable, uncapped)
    task_rows = part["tasks"]
    return {
        "finished": part["finished"],
        "tasks": task_rows,
        "datasets": part["datasets"],
        "models": _models(uncapped),
        "headline": part["headline"],
        "pass_by_cap": _pass_by_cap(episodes(("ladder", "audit"))),
        "recovery_depth": _recovery_depth(conn, task_rows),
        "search_estimates": _search_estimates(conn, tasks, task_rows),
        "safety": _safety(episodes(("episodes",))),
        "checks": _checks(episodes(("check",), None)),
        "forgeable": {
            # Verdicts graded as the task's own harness grades them although its tests ran
            # agent-written code where it could forge them (docs/realtasks.md).
            "runs": sum(forgeable.values()),
            "tasks": sorted(forgeable),
            "excluded": exclude_forgeable,
        },
        "repeats": _repeats(
            [
                r
                for r in q.repeat_runs(conn, (*UNCAPPED_MODES, "episodes"))
                if r["task_id"] in wanted and (model is None or r["agent"] == model)
            ]
        ),
    }


def build_headline(conn: sqlite3.Connection) -> dict[str, Any]:
    """The part of build_report(conn) that the dashboard heads with, equal to it key for key:
    "finished", "tasks", "datasets", "headline" and "checks". Read narrowly (each uncapped
    run's task, cap and outcome, not its every column) and with no bootstrap, so it is ready
    in a fraction of the whole report's time on a big store."""
    tasks = q.tasks(conn)
    part = _task_figures(
        conn, tasks, q.forgeable_counts(conn), headline_q.done_outcomes(conn, UNCAPPED_MODES)
    )
    return {**part, "checks": _checks(q.done_episodes(conn, ("check",)))}


def _task_figures(
    conn: sqlite3.Connection, tasks: list[dict], forgeable: dict[str, int], uncapped: list[dict]
) -> dict[str, Any]:
    """Each task's row (N, D, W, estimates, pass rate), the datasets and the headline: what
    build_report and build_headline share. `uncapped`: finished uncapped runs (task_id, cap,
    outcome are read)."""
    by_protocol = {p: q.estimates(conn, p) for p in PROTOCOLS}
    task_rows = [_task_row(t, by_protocol) for t in tasks]
    for row in task_rows:
        row["forgeable_runs"] = forgeable.get(row["id"], 0)
    measured = [r for r in task_rows if r["protocol"] is not None]
    pass_rates = _pass_rates(tasks, uncapped)
    for row in task_rows:
        row["pass_rate"] = pass_rates.get(row["id"])
    return {
        "finished": bool(measured) and all(r["finished"] for r in measured),
        "tasks": task_rows,
        "datasets": _datasets(task_rows),
        "headline": _headline(measured, pass_rates),
    }


def _task_row(task: dict, by_protocol: dict[str, list[dict]]) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": task["id"],
        "dataset": task["dataset"],
        "group": task.get("dataset_group"),
        "segments": task["segments"],
        "W": task["work"],
        "N": None,
        "D": None,
        "D_display": "-",
        "estimates": {},
        "estimates_display": {},
        "runs": 0,
        "finished": False,
        "solved": None,
        "protocol": None,
    }
    for protocol in PROTOCOLS:
        figures = _measurement(task, by_protocol[protocol])
        if figures is not None:
            row.update(protocol=protocol, **figures)
            break
    return row


def _measurement(task: dict, estimates: list[dict]) -> dict[str, Any] | None:
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
    return {
        "N": summary["n_turns"],
        "D": summary["estimate"],
        "D_display": format_depth(summary["estimate"]),
        "estimates": per_model,
        "estimates_display": {m: format_depth(v) for m, v in per_model.items()},
        "runs": len(summary["detail"].get("episodes") or {}),
        "finished": bool(summary["finished"]),
        "solved": summary["detail"].get("solved"),
    }


def estimates_text(row: dict[str, Any]) -> str:
    """A task's per-model estimates as a person reads them: "alpha: 3, beta: >80"."""
    return ", ".join(f"{m}: {v}" for m, v in row["estimates_display"].items())


def _models(episodes: list[dict]) -> list[dict[str, Any]]:
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
            {
                "model": name,
                "tasks": len(by_task),
                "episodes": sum(len(v) for v in by_task.values()),
                "pass_at_1": mean(fractions) if fractions else None,
                "pass_rate": cluster_rate(by_task).as_dict(),
                "errors": errors.get(name, 0),  # left out of the rates
                "agent_errors": counts[name][vocab.AGENT_ERROR],  # counted as failures
                "infra_errors": counts[name][vocab.INFRA_ERROR],
                "task_broken": counts[name][vocab.TASK_BROKEN],
                "cost_usd": round(cost.get(name, 0.0), 6),
            }
        )
    return out


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


def _datasets(rows: list[dict]) -> list[dict[str, Any]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[r["dataset"]].append(r)
    out = []
    for name, members in sorted(groups.items()):
        solved = [r for r in members if r["D"] is not None]
        out.append(
            {
                "dataset": name,
                "group": members[0]["group"],
                "tasks": len(members),
                "measured": sum(1 for r in members if r["protocol"] is not None),
                "finished": sum(1 for r in members if r["finished"]),
                "solved": len(solved),
                **_median_d(solved),
                "median_W": median_or_none([r["W"] for r in solved if r["W"] is not None]),
                "share_D_le_3": (
                    sum(1 for r in solved if r["D"] <= 3) / len(solved) if solved else None
                ),
                "above_80": sum(1 for r in solved if r["D"] == ABOVE_LARGEST_CAP),
            }
        )
    return out


def _median_d(rows: list[dict]) -> dict[str, Any]:
    """The lower median of D (a cap or 99) and how it reads (">80")."""
    value = lower_median([r["D"] for r in rows])
    return {"median_D": value, "median_D_display": format_depth(value)}


def _headline(rows: list[dict], pass_rates: dict[str, float]) -> dict[str, Any]:
    solved = [r for r in rows if r["D"] is not None]
    with_all = [r for r in solved if r["W"] is not None and r["id"] in pass_rates]
    rho = rank_partial_correlation(
        [r["D"] for r in with_all],
        [pass_rates[r["id"]] for r in with_all],
        [r["W"] for r in with_all],
    )
    return {
        "measured": len(rows),
        "solved": len(solved),
        "solved_D_le_3": sum(1 for r in solved if r["D"] <= 3),
        "share_D_le_3": (sum(1 for r in solved if r["D"] <= 3) / len(solved) if solved else None),
        **_median_d(solved),
        "median_W": median_or_none([r["W"] for r in solved if r["W"] is not None]),
        "rank_partial_corr_D_passrate_given_W": rho,
        "rank_partial_corr_tasks": len(with_all),
    }


def _pass_by_cap(episodes: list[dict]) -> list[dict[str, Any]]:
    """Pass rate of capped runs per model and cap (agent errors count as failures;
    infrastructure errors and broken tasks are left out)."""
    groups: dict[tuple[str, int], list[bool]] = defaultdict(list)
    for e in episodes:
        if e["cap"] is not None and vocab.in_rates(e["outcome"]):
            groups[(e["agent"], e["cap"])].append(vocab.passed(e["outcome"]))
    return [
        {"model": m, "cap": c, "runs": len(v), "passed": sum(v), "rate": sum(v) / len(v)}
        for (m, c), v in sorted(groups.items())
    ]


def _recovery_depth(conn: sqlite3.Connection, rows: list[dict]) -> list[dict[str, Any]]:
    """Turns a fault adds: D under a fault family minus the same task's clean D. D is ordinal
    above 80, so with ">80" on either side the difference is a bound or unknown (None)."""
    clean = {r["id"]: r["D"] for r in rows if r["D"] is not None}
    ids = {r["id"] for r in rows}
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
                {
                    "task": e["task_id"],
                    "fault": estimator.fault,
                    "D_clean": base,
                    "D_clean_display": format_depth(base),
                    "D_fault": fault_d,
                    "D_fault_display": format_depth(fault_d),
                    "added_turns": added,
                    "added_turns_display": added_display,
                    "finished": bool(e["finished"]),
                }
            )
    return out


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
    conn: sqlite3.Connection, tasks: list[dict], rows: list[dict]
) -> list[dict[str, Any]]:
    """Estimates of searches other than the protocol's (e.g. "ladder/bisect"), one row per task
    and estimator, beside the protocol's D and runs for the same task when it has them."""
    protocol_rows = {r["id"]: r for r in rows}
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
            same = estimator.fault == "clean" and ours["protocol"] == estimator.kind
            out.append(
                {
                    "task": task["id"],
                    "estimator": name,
                    "kind": estimator.kind,
                    "fault": estimator.fault,
                    "search": estimator.search,
                    **figures,
                    "protocol_D": ours["D"] if same else None,
                    "protocol_D_display": ours["D_display"] if same else "-",
                    "protocol_runs": ours["runs"] if same else None,
                }
            )
    return out


def _safety(episodes: list[dict]) -> list[dict[str, Any]]:
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
            return cluster_rate(by_task).as_dict()

        out.append(
            {
                "model": model,
                "prompt": prompt,
                "fault": family,
                "episodes": len(members),
                "errors": len(everything) - len(members),  # left out of the rates
                "agent_errors": sum(1 for e in members if e["outcome"] == vocab.AGENT_ERROR),
                "safe_success": rate(lambda e: True, lambda e: e["safe_success"]),
                "collateral": rate(lambda e: True, lambda e: e["collateral"]),
                "mean_reward": mean(e["reward"] or 0.0 for e in members) if members else None,
                "recovery_failure_after_observed": rate(
                    lambda e: e["fault_observed_call"] is not None,
                    lambda e: not e["safe_success"],
                ),
                "fault_cleared": rate(
                    lambda e: e["fault_family"] != "clean", lambda e: e["fault_cleared"]
                ),
            }
        )
    return out


def _repeats(runs: list[dict]) -> list[dict[str, Any]]:
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
    out = []
    for name in sorted(per_model):
        row = per_model[name]
        row["deterministic"] = row.pop("temps") == {0}
        out.append(row)
    return out


def _checks(episodes: list[dict]) -> list[dict[str, Any]]:
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
            {
                "task": task_id,
                "oracle_passed": oracle_passed,
                "nop_failed": None if nop_passed is None else not nop_passed,
                "oracle_outcome": oracle and oracle["outcome"],
                "nop_outcome": nop and nop["outcome"],
                "ok": bool(oracle_passed and nop_passed is False),
            }
        )
    return out


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


def rate_text(rate: dict[str, Any], none: str = "-") -> str:
    """A rate as text: value [95% interval] (successes/episodes)."""
    if rate["value"] is None:
        return none
    low, high = rate["ci95"]
    return f"{rate['value']:.2f} [{low:.2f}, {high:.2f}] ({rate['successes']}/{rate['episodes']})"
