"""The report's rates over finished runs: pass@1 per model, each task's pass rate, pass rate by
cap, safety and recovery per (model, prompt arm, fault family) with task-cluster bootstrap
intervals, repeated attempts, and `check`'s verdicts.

By each run's outcome (docs/outcomes.md): an agent error is the model failing and counts; an
infrastructure error or a broken task is left out of every rate and counted apart.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from statistics import mean
from typing import Any

from engine.analysis.report_rows import (
    CapRate,
    CheckRow,
    ModelRow,
    RepeatRow,
    SafetyRow,
    SpendRow,
)
from engine.analysis.stats import cluster_rate
from store import vocab


def models(episodes: list[dict]) -> tuple[ModelRow, ...]:
    """pass@1 per model: over uncapped runs, the mean over tasks of each task's pass fraction.
    By each run's outcome (docs/outcomes.md): an agent error is a failure and counts; an
    infrastructure error or a broken task is left out and counted apart."""
    per_model: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    errors: dict[str, int] = defaultdict(int)
    counts: dict[str, Counter] = defaultdict(Counter)
    cost: dict[str, float] = defaultdict(float)
    priced: dict[str, list] = defaultdict(list)
    for e in episodes:
        if e["cap"] is not None:
            continue
        cost[e["agent"]] += e["cost_usd"] or 0.0
        priced[e["agent"]].append(e.get("priced"))
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
                cost_usd=_cost(cost.get(name, 0.0), priced[name]),
            )
        )
    return tuple(out)


def spend(episodes: list[dict]) -> tuple[SpendRow, ...]:
    """Tokens (prompt, completion, cached) and cost per model over the given finished runs."""
    sums: dict[str, Counter] = defaultdict(Counter)
    cost: dict[str, float] = defaultdict(float)
    priced: dict[str, list] = defaultdict(list)
    for e in episodes:
        m = e["agent"]
        sums[m]["runs"] += 1
        for key in ("prompt_tokens", "completion_tokens", "cached_tokens"):
            sums[m][key] += e.get(key) or 0
        cost[m] += e["cost_usd"] or 0.0
        priced[m].append(e.get("priced"))
    return tuple(
        SpendRow(
            model=m,
            runs=sums[m]["runs"],
            prompt_tokens=sums[m]["prompt_tokens"],
            completion_tokens=sums[m]["completion_tokens"],
            cached_tokens=sums[m]["cached_tokens"],
            cost_usd=_cost(cost[m], priced[m]),
        )
        for m in sorted(sums)
    )


def _cost(total: float, priced: list) -> float | None:
    """The summed cost, or None ("no price") when the runs that say (`episodes.priced`) all
    say the model had no price. Runs that do not say (no reply, or from before the store
    recorded it) decide nothing; when none says, the cost is shown as stored."""
    known = [p for p in priced if p is not None]
    if known and not any(known):
        return None
    return round(total, 6)


def pass_rates(tasks: list[dict], episodes: list[dict]) -> dict[str, float]:
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


def pass_by_cap(episodes: list[dict]) -> tuple[CapRate, ...]:
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


def safety(episodes: list[dict]) -> tuple[SafetyRow, ...]:
    """Safe success, collateral, recovery failure after an observed fault and fault_cleared,
    per (model, prompt arm, fault family), each with a task-cluster bootstrap 95% CI."""
    groups: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for e in episodes:
        groups[(e["agent"], e["prompt_name"], e["fault_family"])].append(e)
        if e["fault_family"] != vocab.NO_FAULT:
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
                    lambda e: e["fault_family"] != vocab.NO_FAULT, lambda e: e["fault_cleared"]
                ),
            )
        )
    return tuple(out)


def repeats(runs: list[dict]) -> tuple[RepeatRow, ...]:
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


def checks(episodes: list[dict]) -> tuple[CheckRow, ...]:
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
