"""The report: per-task and per-dataset N, D, W and model estimates, pass@1 per model, the
headline depth figures, and safety/recovery rates with task-cluster bootstrap intervals.

Built from the store alone, so a report can be printed at any time, from any process, and says
whether measurement has finished.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from statistics import mean
from typing import Any

from engine.analysis.stats import (
    cluster_rate,
    median_or_none,
    rank_partial_correlation,
)
from engine.protocol.ladder import ABOVE_LARGEST_CAP, format_depth
from store import reports as q

SUMMARY_MODEL = ""  # the estimates row that holds a task's N, D and finished flag
UNCAPPED_MODES = ("free", "ladder", "audit")


def build_report(
    conn: sqlite3.Connection, model: str | None = None, task_ids: list[str] | None = None
) -> dict[str, Any]:
    """The whole report, or the part about `task_ids` (and `model`)."""
    tasks = q.tasks(conn, task_ids)
    wanted = {t["id"] for t in tasks}
    by_protocol = {p: q.estimates(conn, p) for p in ("ladder", "audit")}
    task_rows = [_task_row(t, by_protocol) for t in tasks]
    measured = [r for r in task_rows if r["protocol"] is not None]

    def episodes(modes: tuple[str, ...], who: str | None = model) -> list[dict]:
        return [e for e in q.done_episodes(conn, modes, who) if e["task_id"] in wanted]

    uncapped = episodes(UNCAPPED_MODES)
    models = _models(uncapped)
    pass_rates = _pass_rates(tasks, uncapped)
    for row in task_rows:
        row["pass_rate"] = pass_rates.get(row["id"])
    return {
        "finished": bool(measured) and all(r["finished"] for r in measured),
        "tasks": task_rows,
        "datasets": _datasets(task_rows),
        "models": models,
        "headline": _headline(measured, pass_rates),
        "pass_by_cap": _pass_by_cap(episodes(("ladder", "audit"))),
        "recovery_depth": _recovery_depth(conn, task_rows),
        "safety": _safety(episodes(("episodes",))),
        "checks": _checks(episodes(("check",), None)),
        "repeats": _repeats(
            [
                r
                for r in q.repeat_runs(conn, (*UNCAPPED_MODES, "episodes"))
                if r["task_id"] in wanted and (model is None or r["agent"] == model)
            ]
        ),
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
        "finished": False,
        "solved": None,
        "protocol": None,
    }
    for protocol in ("ladder", "audit"):
        mine = [
            e
            for e in by_protocol[protocol]
            if e["task_id"] == task["id"] and e["task_hash"] == task["content_hash"]
        ]
        summary = next((e for e in mine if e["model"] == SUMMARY_MODEL), None)
        if summary is None:
            continue
        row.update(
            protocol=protocol,
            N=summary["n_turns"],
            D=summary["estimate"],
            D_display=format_depth(summary["estimate"]),
            finished=bool(summary["finished"]),
            solved=summary["detail"].get("solved"),
            estimates={e["model"]: e["estimate"] for e in mine if e["model"] != SUMMARY_MODEL},
        )
        break
    return row


def _models(episodes: list[dict]) -> list[dict[str, Any]]:
    """pass@1 per model: over uncapped runs, the mean over tasks of each task's pass fraction.
    Errored runs are infrastructure, not the model: they are left out and counted apart."""
    per_model: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    errors: dict[str, int] = defaultdict(int)
    cost: dict[str, float] = defaultdict(float)
    for e in episodes:
        if e["cap"] is not None:
            continue
        cost[e["agent"]] += e["cost_usd"] or 0.0
        if e["error_kind"]:
            errors[e["agent"]] += 1
            continue
        per_model[e["agent"]][e["task_id"]].append(bool(e["passed"]))
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
                "errors": errors.get(name, 0),
                "cost_usd": round(cost.get(name, 0.0), 6),
            }
        )
    return out


def _pass_rates(tasks: list[dict], episodes: list[dict]) -> dict[str, float]:
    """A task's pass rate: a public figure from its metadata when it has one (`pass_rate`, or
    Endless Terminals' o3 summary), else the measured rate over uncapped runs of all models."""
    measured: dict[str, list[bool]] = defaultdict(list)
    for e in episodes:
        if e["cap"] is None and not e["error_kind"]:
            measured[e["task_id"]].append(bool(e["passed"]))
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
                "median_D": median_or_none([r["D"] for r in solved]),
                "median_W": median_or_none([r["W"] for r in solved if r["W"] is not None]),
                "share_D_le_3": (
                    sum(1 for r in solved if r["D"] <= 3) / len(solved) if solved else None
                ),
                "above_80": sum(1 for r in solved if r["D"] == ABOVE_LARGEST_CAP),
            }
        )
    return out


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
        "median_D": median_or_none([r["D"] for r in solved]),
        "median_W": median_or_none([r["W"] for r in solved if r["W"] is not None]),
        "rank_partial_corr_D_passrate_given_W": rho,
        "rank_partial_corr_tasks": len(with_all),
    }


def _pass_by_cap(episodes: list[dict]) -> list[dict[str, Any]]:
    """Pass rate of capped runs per model and cap (errors left out)."""
    groups: dict[tuple[str, int], list[bool]] = defaultdict(list)
    for e in episodes:
        if e["cap"] is not None and not e["error_kind"]:
            groups[(e["agent"], e["cap"])].append(bool(e["passed"]))
    return [
        {"model": m, "cap": c, "runs": len(v), "passed": sum(v), "rate": sum(v) / len(v)}
        for (m, c), v in sorted(groups.items())
    ]


def _recovery_depth(conn: sqlite3.Connection, rows: list[dict]) -> list[dict[str, Any]]:
    """Turns a fault adds: D under a fault family minus the same task's clean D."""
    clean = {r["id"]: r["D"] for r in rows if r["D"] is not None}
    ids = {r["id"] for r in rows}
    out = []
    families = q.fault_protocols(conn)
    for protocol in families:
        for e in q.estimates(conn, protocol):
            if e["model"] != SUMMARY_MODEL or e["estimate"] is None or e["task_id"] not in ids:
                continue
            base = clean.get(e["task_id"])
            out.append(
                {
                    "task": e["task_id"],
                    "fault": protocol.split("+", 1)[1],
                    "D_clean": base,
                    "D_fault": e["estimate"],
                    "added_turns": None if base is None else e["estimate"] - base,
                    "finished": bool(e["finished"]),
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
    for (model, prompt, family), members in sorted(groups.items()):

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
                "errors": sum(1 for e in members if e["error_kind"]),
                "safe_success": rate(lambda e: True, lambda e: e["safe_success"]),
                "collateral": rate(lambda e: True, lambda e: e["collateral"]),
                "mean_reward": mean(e["reward"] or 0.0 for e in members),
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
        out.append(
            {
                "task": task_id,
                "oracle_passed": None if oracle is None else bool(oracle["passed"]),
                "nop_failed": None if nop is None else not nop["passed"],
                "ok": bool(oracle and oracle["passed"] and nop and not nop["passed"]),
            }
        )
    return out


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
