"""Judge models' findings (engine/judges/): task reviews (`depthtui review`) and episode
analyses (`depthtui analyze`), one row per (what was judged, judge, prompt hash). A row whose
judge gave no reply (status infra_error or too_long) is replaced by the next try; a done row is
reused."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from store.db import Store, now

DONE = "done"
_JSON = ("findings_json", "dropped_json")


def _conn(source: Store | sqlite3.Connection) -> sqlite3.Connection:
    return source.conn if isinstance(source, Store) else source


def _rows(cur: sqlite3.Cursor) -> list[dict[str, Any]]:
    names = [d[0] for d in cur.description]
    out = []
    for r in cur.fetchall():
        row = dict(zip(names, r, strict=True))
        for key in _JSON:
            row[key[: -len("_json")]] = json.loads(row.pop(key) or "[]")
        out.append(row)
    return out


def get_review(
    source: Store | sqlite3.Connection, task_id: str, task_hash: str, judge: str, prompt_hash: str
) -> dict[str, Any] | None:
    rows = _rows(
        _conn(source).execute(
            "SELECT * FROM reviews WHERE task_id = ? AND task_hash = ? AND judge = ? "
            "AND prompt_hash = ?",
            (task_id, task_hash, judge, prompt_hash),
        )
    )
    return rows[0] if rows else None


def put_review(store: Store, **row: Any) -> None:
    _put(store, "reviews", ("task_id", "task_hash", "judge", "prompt_hash"), row)


def reviews(source: Store | sqlite3.Connection, task_id: str) -> list[dict[str, Any]]:
    """Every review of a task, newest first (none in a store from before reviews)."""
    try:
        cur = _conn(source).execute(
            "SELECT * FROM reviews WHERE task_id = ? ORDER BY id DESC", (task_id,)
        )
    except sqlite3.OperationalError:
        return []
    return _rows(cur)


def get_analysis(
    source: Store | sqlite3.Connection, episode_id: int, judge: str, prompt_hash: str
) -> dict[str, Any] | None:
    rows = _rows(
        _conn(source).execute(
            "SELECT * FROM analyses WHERE episode_id = ? AND judge = ? AND prompt_hash = ?",
            (episode_id, judge, prompt_hash),
        )
    )
    return rows[0] if rows else None


def put_analysis(store: Store, **row: Any) -> None:
    _put(store, "analyses", ("episode_id", "judge", "prompt_hash"), row)


def analyses(source: Store | sqlite3.Connection, episode_id: int) -> list[dict[str, Any]]:
    return _rows(
        _conn(source).execute(
            "SELECT * FROM analyses WHERE episode_id = ? ORDER BY id DESC", (episode_id,)
        )
    )


def _put(store: Store, table: str, key: tuple[str, ...], row: dict[str, Any]) -> None:
    row = dict(row)
    for name in _JSON:
        short = name[: -len("_json")]
        if short in row:
            row[name] = json.dumps(row.pop(short))
    row.setdefault("created_at", now())
    names = list(row)
    updates = ", ".join(f"{n} = excluded.{n}" for n in names if n not in key)
    with store.tx() as conn:
        conn.execute(
            f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))}) "
            f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {updates}",
            [row[n] for n in names],
        )
