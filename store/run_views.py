"""Every episode in one list, for the TUI's Runs screen: one row per episode, all tasks, modes
and models, read by ONE query over the episodes table (no per-row look-ups), so opening the
screen on thousands of episodes costs one scan.

Values the store has not measured stay None (a running episode's reward, a run with no stated
cap): the screen shows them as '–' and sorts them last in either direction.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from store.episode_views import outcome


@dataclass(frozen=True)
class RunRow:
    episode_id: int
    task_id: str
    mode: str
    agent: str  # the model name from the registry, or oracle | nop | replay
    outcome: str  # episode_views.outcome: pass | unsafe | fail | cap | error | broken | running
    reward: float | None
    turns: int
    cap: int | None
    budget: int | None
    fault: str  # fault family; 'clean' when none was injected
    collateral: bool | None  # None while running: the latch may still close
    cost_usd: float | None  # None when the model's price is unknown (no tokens were priced)
    duration_s: float | None  # None while running
    prompt_arm: str
    job_id: int | None


_UNGRADED = ("error", "broken", "running", "interrupted")
_QUERY = """
SELECT id, task_id, mode, agent, status, outcome, end_reason, collateral, reward, turns, cap,
       budget, fault_family, cost_usd, prompt_tokens + completion_tokens,
       (julianday(finished_at) - julianday(started_at)) * 86400.0, prompt_name, job_id
FROM episodes ORDER BY id DESC
"""


def run_rows(conn: sqlite3.Connection) -> list[RunRow]:
    """Every episode, newest first."""
    rows = []
    for r in conn.execute(_QUERY):
        (ep, task, mode, agent, status, run_outcome, end, collateral, reward, turns, cap,
         budget, fault, cost, tokens, duration, arm, job) = r  # fmt: skip
        running = status == "running"
        word = outcome(status, run_outcome, end, collateral)
        rows.append(
            RunRow(
                episode_id=ep,
                task_id=task,
                mode=mode,
                agent=agent,
                outcome=word,
                # an infrastructure error or a broken task graded no agent: no reward to show
                reward=None if word in _UNGRADED else reward,
                turns=turns,
                cap=cap,
                budget=budget,
                fault=fault,
                collateral=None if running else bool(collateral),
                # a model with no price records cost 0 for its tokens: that is not a measurement
                cost_usd=cost if cost or not tokens else None,
                duration_s=None if running or duration is None else max(duration, 0.0),
                prompt_arm=arm,
                job_id=job,
            )
        )
    return rows
