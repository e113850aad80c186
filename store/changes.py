"""What changed in a store, table by table, leaving out heartbeats.

`PRAGMA data_version` moves on every commit of another connection, and an idle engine commits a
heartbeat every couple of seconds: a viewer that reloaded on it reloaded for nothing, all the
time. `signature(conn)` is a cheap fingerprint per table of what a viewer shows (row counts, the
newest ids and stamps, the columns that move as work goes on) with the heartbeat columns left
out; two signatures that differ name the tables that really changed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping

Signature = dict[str, object]

# Columns that only say "still alive": a change to them alone is no change to show.
HEARTBEAT_COLUMNS = frozenset({"heartbeat_at"})
# Tables small enough to fingerprint row by row (every column but the heartbeat's).
WHOLE_TABLES = ("jobs", "engines")
# Bigger tables: aggregates over the columns that move while work goes on.
AGGREGATES = {
    "episodes": "count(*), max(id), sum(status = 'running'), sum(status = 'done'), "
    "max(finished_at), total(turns), total(calls), total(cost_usd), count(error_kind), "
    "count(reward)",
    "labels": "count(*), max(id), max(updated_at)",
    "tasks": "count(*), max(imported_at)",
    "datasets": "count(*), max(imported_at)",
    "task_errors": "count(*), max(imported_at)",
    "estimates": "count(*), max(updated_at), total(estimate), sum(finished)",
    "contracts": "count(*), max(created_at)",
    "segment_runs": "count(*), count(passed), count(error_kind)",
    # the biggest tables: their newest row only (an index lookup, not a scan); a turn or call
    # changed in place moves its episode's columns above
    "turns": "max(id)",
    "calls": "max(id)",
    "oracle_events": "max(id)",
    "test_results": "max(id)",
    "call_outputs": "max(rowid)",
}


def _tables(conn: sqlite3.Connection) -> list[str]:
    """The store's own tables: no SQLite internals, no full-text index (it follows its rows)."""
    rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'").fetchall()
    virtual = [r[0] for r in rows if (r[1] or "").upper().startswith("CREATE VIRTUAL")]
    names = []
    for name, _ in rows:
        if name.startswith("sqlite_") or name in virtual:
            continue
        if any(name.startswith(v + "_") for v in virtual):  # a virtual table's shadow tables
            continue
        names.append(name)
    return sorted(names)


def _whole(conn: sqlite3.Connection, table: str) -> object:
    columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    kept = ", ".join(c for c in columns if c not in HEARTBEAT_COLUMNS)
    return hash(tuple(tuple(r) for r in conn.execute(f"SELECT {kept} FROM {table} ORDER BY 1")))


def signature(conn: sqlite3.Connection) -> Signature:
    """Per table, a value that changes when its rows change other than by a heartbeat."""
    result: Signature = {}
    for table in _tables(conn):
        if table in WHOLE_TABLES:
            result[table] = _whole(conn, table)
            continue
        aggregate = AGGREGATES.get(table, "count(*), max(rowid)")
        try:
            result[table] = tuple(conn.execute(f"SELECT {aggregate} FROM {table}").fetchone())
        except sqlite3.OperationalError:  # a WITHOUT ROWID table, or a column renamed
            result[table] = tuple(conn.execute(f"SELECT count(*) FROM {table}").fetchone())
    return result


def changed_tables(before: Mapping[str, object], after: Mapping[str, object]) -> frozenset[str]:
    """The tables whose signatures differ (a table new or gone counts as changed)."""
    return frozenset(t for t in set(before) | set(after) if before.get(t) != after.get(t))
