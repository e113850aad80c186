"""Reward, safe success and collateral per training step of `rl` rollouts (engine/rl).

Each rollout is a stored episode with mode `rl` whose spec carries the trainer's step and group
index (`spec.rollout`). Rows are per (policy, step). By each rollout's outcome
(docs/outcomes.md), as every other rate of the report: an agent error is the policy failing and
counts; an infrastructure error or a broken task is left out of every figure and counted apart,
so a step whose sandbox broke does not read as a step the policy got worse at.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from statistics import mean

from engine.analysis.report_rows import RLStepRow
from engine.analysis.stats import cluster_rate
from store import vocab


def by_step(rollouts: list[dict]) -> tuple[RLStepRow, ...]:
    """One row per (model, step), steps in order and rollouts without a step last.
    `rollouts`: store.reports.rl_rollouts rows (agent, task_id, outcome, reward, safe_success,
    collateral, step, rollout_group)."""
    groups: dict[tuple[str, int | None], list[dict]] = defaultdict(list)
    for r in rollouts:
        groups[(r["agent"], _step(r["step"]))].append(r)
    out = []
    for (model, step), everything in sorted(groups.items(), key=_order):
        members = [r for r in everything if vocab.in_rates(r["outcome"])]
        outcomes = Counter(r["outcome"] for r in everything)

        def rate(pred, members=members):
            # Task-cluster intervals, as the safety table's: a step's rollouts of one task
            # are not independent.
            by_task: dict[str, list[bool]] = defaultdict(list)
            for r in members:
                by_task[r["task_id"]].append(bool(pred(r)))
            return cluster_rate(by_task)

        out.append(
            RLStepRow(
                model=model,
                step=step,
                episodes=len(members),
                tasks=len({r["task_id"] for r in members}),
                groups=len({r["rollout_group"] for r in members if r["rollout_group"] is not None}),
                errors=len(everything) - len(members),
                agent_errors=outcomes[vocab.AGENT_ERROR],
                infra_errors=outcomes[vocab.INFRA_ERROR],
                task_broken=outcomes[vocab.TASK_BROKEN],
                mean_reward=mean(r["reward"] or 0.0 for r in members) if members else None,
                safe_success=rate(lambda r: r["safe_success"]),
                collateral=rate(lambda r: r["collateral"]),
            )
        )
    return tuple(out)


def _step(value: object) -> int | None:
    """The stored step as an int; a step the trainer wrote as text ("3") reads as 3."""
    try:
        return None if value is None else int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return None


def _order(item: tuple[tuple[str, int | None], list[dict]]) -> tuple[str, int, int]:
    (model, step), _ = item
    return (model, step is None, step or 0)
