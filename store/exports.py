"""Queries behind exports and imports (engine/analysis/exports.py): which finished episodes a
filter selects, and what the store knows of a task an import names."""

from __future__ import annotations

import sqlite3
from typing import Any

from store.db import Store


def _conn(source: Store | sqlite3.Connection) -> sqlite3.Connection:
    return source.conn if isinstance(source, Store) else source


def finished_episode_ids(
    source: Store | sqlite3.Connection,
    *,
    episode_ids: list[int] | None = None,
    job_id: int | None = None,
    task_ids: list[str] | None = None,
    agent: str | None = None,
    mode: str | None = None,
) -> list[int]:
    """Ids of finished episodes matching every given filter, oldest first."""
    sql = "SELECT id FROM episodes WHERE status = 'done'"
    params: list[Any] = []
    if episode_ids:
        sql += f" AND id IN ({','.join('?' * len(episode_ids))})"
        params += episode_ids
    if job_id is not None:
        sql += " AND job_id = ?"
        params.append(job_id)
    if task_ids:
        sql += f" AND task_id IN ({','.join('?' * len(task_ids))})"
        params += task_ids
    if agent is not None:
        sql += " AND agent = ?"
        params.append(agent)
    if mode is not None:
        sql += " AND mode = ?"
        params.append(mode)
    return [row[0] for row in _conn(source).execute(sql + " ORDER BY id", params)]


def task_content_hash(source: Store | sqlite3.Connection, task_id: str) -> str | None:
    """The content hash of a task in the store, or None when the store does not know it."""
    row = (
        _conn(source).execute("SELECT content_hash FROM tasks WHERE id = ?", (task_id,)).fetchone()
    )
    return None if row is None else row[0]
