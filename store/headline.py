"""The narrow reads behind the report's headline figures, so the TUI can show them at start-up
without fetching every column of every episode (build_report's full reads, store/reports.py).

Same filters as store.reports.done_episodes: finished episodes of the task's newest content."""

from __future__ import annotations

import sqlite3


def done_outcomes(conn: sqlite3.Connection, modes: tuple[str, ...]) -> list[dict]:
    """Finished episodes of these modes (newest task content only): task, cap and outcome each,
    which is all a task's pass rate is built from."""
    marks = ",".join("?" for _ in modes)
    rows = conn.execute(
        "SELECT e.task_id, e.cap, e.outcome "
        "FROM episodes e JOIN tasks t ON t.id = e.task_id AND t.content_hash = e.task_hash "
        f"WHERE e.status = 'done' AND e.mode IN ({marks}) ORDER BY e.id",
        modes,
    )
    return [{"task_id": task, "cap": cap, "outcome": outcome} for task, cap, outcome in rows]
