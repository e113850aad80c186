"""Search across every transcript: the model's words, commands and their outputs (the FTS5 table
`search`, kept current by triggers in schema.py).

A user's text is never handed to FTS5 as query syntax. Each whitespace-separated term becomes a
quoted string (inner quotes doubled), so `rm -rf /tmp/x`, quotes, parentheses, `*`, `-`, `:`,
`$(...)` and `|` are searched for, not parsed. Terms match in any order: `rm -rf /tmp/x` finds
calls holding the tokens rm, rf, tmp and x. A term with no letters or digits (`|`, `$(`) has no
token to search for; when every term is like that, the search falls back to a substring match
over commands and model text.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from store.db import Store

SNIPPET_TOKENS = 16


def _conn(source: Store | sqlite3.Connection) -> sqlite3.Connection:
    return source.conn if isinstance(source, Store) else source


def _dicts(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def fts_query(text: str) -> str:
    """The user's text as a safe FTS5 query: every term a quoted string, all required."""
    terms = [t for t in text.split() if re.search(r"\w", t)]
    return " ".join('"' + t.replace('"', '""') + '"' for t in terms)


def search(
    source: Store | sqlite3.Connection,
    query: str,
    limit: int = 100,
    *,
    mark: tuple[str, str] = ("«", "»"),
    episode_id: int | None = None,
) -> list[dict[str, Any]]:
    """Best matches first: episode_id, turn_idx, kind ('turn' or 'call'), ref_id (the turns or
    calls row id) and a snippet with the matched words between `mark`. With `episode_id`, only
    that episode's matches (the replay's next/previous hit)."""
    conn = _conn(source)
    if not query.strip():
        return []
    match = fts_query(query)
    # -1 matches every episode (ids start at 1)
    only = -1 if episode_id is None else episode_id
    if match:
        return _dicts(
            conn.execute(
                """
                SELECT episode_id, turn_idx, kind, ref_id,
                       snippet(search, 0, ?, ?, '…', ?) AS snippet
                FROM search WHERE search MATCH ? AND (? = -1 OR episode_id = ?)
                ORDER BY rank LIMIT ?
                """,
                (mark[0], mark[1], SNIPPET_TOKENS, match, only, only, limit),
            )
        )
    return _substring(conn, query.strip(), limit, mark, only)


def _substring(
    conn: sqlite3.Connection, needle: str, limit: int, mark: tuple[str, str], only: int = -1
) -> list[dict[str, Any]]:
    escaped = needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    pattern = f"%{escaped}%"
    rows = _dicts(
        conn.execute(
            """
            SELECT episode_id, turn_idx, 'call' AS kind, id AS ref_id, command AS body
            FROM calls WHERE command LIKE ? ESCAPE '\\' AND (? = -1 OR episode_id = ?)
            UNION ALL
            SELECT episode_id, idx, 'turn', id, text FROM turns
            WHERE text LIKE ? ESCAPE '\\' AND (? = -1 OR episode_id = ?)
            ORDER BY episode_id, turn_idx LIMIT ?
            """,
            (pattern, only, only, pattern, only, only, limit),
        )
    )
    for row in rows:
        body = row.pop("body")
        at = max(0, body.lower().find(needle.lower()))
        start = max(0, at - 40)
        row["snippet"] = (
            ("…" if start else "")
            + body[start:at]
            + mark[0]
            + body[at : at + len(needle)]
            + mark[1]
            + body[at + len(needle) : at + len(needle) + 40]
        )
    return rows
