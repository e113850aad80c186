"""Every episode of the store as one row (the TUI's Runs screen): what a table of runs sorts and
filters on, read in one query."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime

from store.episode_views import outcome


@dataclass(frozen=True)
class RunRow:
    id: int
    task_id: str
    mode: str
    agent: str
    prompt: str
    cap: int | None
    budget: int | None
    fault: str
    outcome: str  # episode_views.outcome's word: pass | unsafe | fail | cap | error | ...
    reward: float | None
    turns: int
    collateral: int
    cost_usd: float
    duration_s: float | None  # None while running (or without a finish time)
    job_id: int | None


def _duration(started: str | None, finished: str | None) -> float | None:
    if not started or not finished:
        return None
    try:
        return (datetime.fromisoformat(finished) - datetime.fromisoformat(started)).total_seconds()
    except ValueError:  # a stamp not written by now(): no duration rather than a wrong one
        return None


def all_runs(conn: sqlite3.Connection) -> list[RunRow]:
    """Every episode, oldest first."""
    rows = conn.execute(
        "SELECT id, task_id, mode, agent, prompt_name, cap, budget, fault_family, status, "
        "outcome, end_reason, collateral, reward, turns, cost_usd, started_at, finished_at, "
        "job_id FROM episodes ORDER BY id"
    )
    return [
        RunRow(
            id=r[0],
            task_id=r[1],
            mode=r[2],
            agent=r[3],
            prompt=r[4],
            cap=r[5],
            budget=r[6],
            fault=r[7],
            outcome=outcome(r[8], r[9], r[10], r[11]),
            reward=r[12],
            turns=r[13],
            collateral=r[11],
            cost_usd=r[14],
            duration_s=_duration(r[15], r[16]),
            job_id=r[17],
        )
        for r in rows
    ]
