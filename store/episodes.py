"""Recording an episode while it runs, and reading it back.

The engine calls these in order: create_episode, add_segment_run, record_turn (once per model
reply: the turn, its calls, their full outputs and the oracle's events, in one transaction, so a
viewer never sees half a turn and a crash loses at most the turn in flight), finish_segment_run,
add_test_results, set_fault_record, finish_episode.

Row dicts use the column names of schema.py. Values for `*_json` columns may be given as dicts or
lists; booleans become 0/1. A key that is not a column is refused with the list of columns, so
a typo fails loudly instead of dropping data.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from store import vocab
from store.db import Store, StoreError, now

HEAD_CHARS = 2_000
TAIL_CHARS = 1_000
REQUIRED_EPISODE = ("run_key", "task_id", "task_hash", "mode", "agent")


def _conn(source: Store | sqlite3.Connection) -> sqlite3.Connection:
    return source.conn if isinstance(source, Store) else source


def _dicts(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _one(cursor: sqlite3.Cursor) -> dict[str, Any] | None:
    rows = _dicts(cursor)
    return rows[0] if rows else None


def _columns(source: Store | sqlite3.Connection, table: str, names: set[str]) -> tuple[str, ...]:
    if not isinstance(source, Store):
        return tuple(r[1] for r in source.execute(f"PRAGMA table_info({table})").fetchall())
    columns = source.columns(table)
    if not names <= set(columns):
        columns = source.columns(table, fresh=True)  # a column added since they were read
    return columns


def _prepare(source: Store | sqlite3.Connection, table: str, row: dict[str, Any]) -> dict[str, Any]:
    columns = _columns(source, table, set(row))
    unknown = sorted(set(row) - set(columns))
    if unknown:
        raise ValueError(
            f"{table}: unknown column(s) {', '.join(unknown)}; expected some of "
            f"{', '.join(columns)}"
        )
    out: dict[str, Any] = {}
    for key, value in row.items():
        if key.endswith("_json") and not isinstance(value, str | bytes) and value is not None:
            value = json.dumps(value, default=str)
        elif isinstance(value, bool):
            value = int(value)
        out[key] = value
    return out


def _insert(source: Store | sqlite3.Connection, table: str, row: dict[str, Any]) -> int:
    row = _prepare(source, table, row)
    names = ", ".join(row)
    marks = ", ".join("?" for _ in row)
    cursor = _conn(source).execute(
        f"INSERT INTO {table} ({names}) VALUES ({marks})", tuple(row.values())
    )
    return int(cursor.lastrowid or 0)


def _update(
    source: Store | sqlite3.Connection, table: str, row: dict[str, Any], where: str, args: tuple
):
    row = _prepare(source, table, row)
    if not row:
        return
    sets = ", ".join(f"{k} = ?" for k in row)
    cursor = _conn(source).execute(
        f"UPDATE {table} SET {sets} WHERE {where}", (*row.values(), *args)
    )
    if cursor.rowcount == 0:
        raise ValueError(f"{table}: no row where {where} with {args}")


def head_tail(data: bytes) -> tuple[str, str]:
    """The output columns kept inline: the whole text when it is short, else the first 2,000
    and the last 1,000 characters (invalid UTF-8 decoded as U+FFFD)."""
    text = data.decode("utf-8", errors="replace")
    if len(text) <= HEAD_CHARS + TAIL_CHARS:
        return text, ""
    return text[:HEAD_CHARS], text[-TAIL_CHARS:]


# --- writes -------------------------------------------------------------------------------------


def create_episode(store: Store, **fields: Any) -> int:
    """A new episode row (status 'running'); returns its id."""
    missing = [k for k in REQUIRED_EPISODE if fields.get(k) in (None, "")]
    if missing:
        raise ValueError(f"episodes: missing {', '.join(missing)}")
    fields.setdefault("started_at", now())
    with store.tx():
        return _insert(store, "episodes", fields)


def add_segment_run(
    store: Store, episode_id: int, idx: int, user_message: str, **fields: Any
) -> None:
    """The segment `idx` starts: what the agent was told (budget line included)."""
    with store.tx():
        _insert(
            store,
            "segment_runs",
            {"episode_id": episode_id, "idx": idx, "user_message": user_message, **fields},
        )


def finish_segment_run(store: Store, episode_id: int, idx: int, **fields: Any) -> None:
    with store.tx():
        _update(store, "segment_runs", fields, "episode_id = ? AND idx = ?", (episode_id, idx))


def record_turn(
    store: Store,
    episode_id: int,
    turn: dict[str, Any],
    calls: list[dict[str, Any]],
    outputs: dict[int, bytes] | None = None,
    events: list[dict[str, Any]] | None = None,
) -> int:
    """One model reply with its calls, in one transaction; returns the turn's row id.

    `turn` needs `idx` (1-based in the episode, every reply); the episode's `turns` grows by one
    unless `turn["counted"]` is false (the closing reply: docs/work-and-turns.md). Each call
    needs `idx` (1-based in the episode) and `command`, and gets `turn_idx` from the turn.
    `outputs` maps a call's idx to its full raw output: it is stored apart, and fills
    output_head/output_tail/output_bytes when the call does not give them. `events` are
    oracle_events rows (call_idx, path, kind, permitted, ...).
    """
    outputs = outputs or {}
    if "idx" not in turn:
        raise ValueError("turns: missing idx")
    turn = dict(turn)
    priced = turn.pop("priced", None)
    with store.tx() as conn:
        turn_row = {"created_at": now(), **turn, "episode_id": episode_id}
        turn_id = _insert(store, "turns", turn_row)
        for call in calls:
            row = {"created_at": now(), "turn_idx": turn["idx"], **call, "episode_id": episode_id}
            data = outputs.get(row.get("idx"))  # type: ignore[arg-type]
            if data is not None and "output_head" not in row:
                row["output_head"], row["output_tail"] = head_tail(data)
            if data is not None and "output_bytes" not in row:
                row["output_bytes"] = len(data)
            call_id = _insert(store, "calls", row)
            if data is not None:
                conn.execute(
                    "INSERT INTO call_outputs (call_id, data) VALUES (?, ?)", (call_id, data)
                )
        for event in events or []:
            _insert(store, "oracle_events", {**event, "episode_id": episode_id})
        sets = [
            ("turns = turns + ?", 1 if turn.get("counted", True) else 0),
            ("calls = (SELECT count(*) FROM calls WHERE episode_id = ?)", episode_id),
            ("prompt_tokens = prompt_tokens + ?", turn.get("prompt_tokens", 0) or 0),
            ("completion_tokens = completion_tokens + ?", turn.get("completion_tokens", 0) or 0),
            ("cost_usd = cost_usd + ?", turn.get("cost_usd", 0.0) or 0.0),
        ]
        # A file opened without migrating (an older schema, in tests) lacks the newer columns.
        columns = _columns(store, "episodes", set())
        if "cached_tokens" in columns:
            sets.append(("cached_tokens = cached_tokens + ?", turn.get("cached_tokens", 0) or 0))
        if "priced" in columns and priced is not None:
            sets.append(("priced = max(coalesce(priced, 0), ?)", int(priced)))
        conn.execute(
            f"UPDATE episodes SET {', '.join(s for s, _ in sets)} WHERE id = ?",
            (*(v for _, v in sets), episode_id),
        )
    return turn_id


def add_oracle_events(store: Store, episode_id: int, events: list[dict[str, Any]]) -> None:
    """Events outside a turn, e.g. the final check (call_idx None)."""
    with store.tx():
        for event in events:
            _insert(store, "oracle_events", {**event, "episode_id": episode_id})


def add_test_results(
    store: Store, episode_id: int, results: list[dict[str, Any]], segment_idx: int = 0
) -> None:
    """Per-test verifier results (nodeid, outcome, setup/call/teardown, in_inventory, ...)."""
    with store.tx():
        for result in results:
            row = {"segment_idx": segment_idx, **result, "episode_id": episode_id}
            _insert(store, "test_results", row)


def set_fault_record(store: Store, episode_id: int, **fields: Any) -> None:
    """Create or update the episode's fault record (family and target first, then more)."""
    with store.tx() as conn:
        exists = conn.execute(
            "SELECT 1 FROM fault_records WHERE episode_id = ?", (episode_id,)
        ).fetchone()
        if exists:
            _update(store, "fault_records", fields, "episode_id = ?", (episode_id,))
        else:
            _insert(store, "fault_records", {**fields, "episode_id": episode_id})


def finish_episode(store: Store, episode_id: int, **outcome: Any) -> None:
    """Write the outcome columns; status becomes 'done' unless given. A finished run exists once
    per run_key: finishing a second one raises StoreError naming the first."""
    outcome.setdefault("status", "done")
    outcome.setdefault("finished_at", now())
    with store.tx() as conn:
        # A file opened without migrating (an older schema, in tests) has no outcome column.
        if "outcome" in store.columns("episodes"):
            with_outcome(outcome)
        try:
            _update(store, "episodes", outcome, "id = ?", (episode_id,))
        except sqlite3.IntegrityError as exc:
            row = conn.execute(
                "SELECT e.id, e.run_key FROM episodes e JOIN episodes me ON me.run_key = e.run_key "
                "WHERE me.id = ? AND e.status = 'done' AND e.id != me.id",
                (episode_id,),
            ).fetchone()
            if row is None:
                raise
            raise StoreError(
                f"episode {episode_id}: run {row[1]} is already recorded as done "
                f"(episode {row[0]}); reuse it instead of finishing another"
            ) from exc


def with_outcome(fields: dict[str, Any]) -> dict[str, Any]:
    """A finished episode's columns with its outcome (store/vocab.py): the writer's own, else
    the one its passed and error_kind give."""
    if fields.get("status") == "done" and not fields.get("outcome"):
        fields["outcome"] = vocab.classify(
            fields.get("passed"), fields.get("error_kind"), fields.get("error_detail")
        )
    return fields


# --- reads --------------------------------------------------------------------------------------


def get_episode(source: Store | sqlite3.Connection, episode_id: int) -> dict[str, Any] | None:
    return _one(_conn(source).execute("SELECT * FROM episodes WHERE id = ?", (episode_id,)))


def supersede_episode(store: Store, episode_id: int) -> None:
    """Mark a finished episode superseded: kept (its turns too) but no longer its run's record,
    so the run is claimed afresh."""
    with store.tx() as conn:
        conn.execute(
            "UPDATE episodes SET status = 'superseded' WHERE id = ? AND status = 'done'",
            (episode_id,),
        )


def count_episodes(source: Store | sqlite3.Connection) -> int:
    """How many episodes the store holds, in any status."""
    return _conn(source).execute("SELECT count(*) FROM episodes").fetchone()[0]


def forgeable_ids(source: Store | sqlite3.Connection, episode_ids: list[int]) -> list[int]:
    """Of these episodes, those graded on tests that ran agent code where it could forge the
    grade (the `forgeable` column), in id order."""
    marks = ",".join("?" for _ in episode_ids) or "NULL"
    sql = f"SELECT id FROM episodes WHERE forgeable = 1 AND id IN ({marks}) ORDER BY id"
    return [row[0] for row in _conn(source).execute(sql, episode_ids)]


def latest_replay(source: Store | sqlite3.Connection, original: int) -> dict[str, Any] | None:
    """The newest finished replay of episode `original` (its `spec_json.replay_of`), with the
    original's verdict beside it (original_passed, original_outcome, task_id); None when no
    replay of it finished."""
    return _one(
        _conn(source).execute(
            "SELECT r.id, r.passed, r.error_kind, r.outcome, o.passed AS original_passed, "
            "o.outcome AS original_outcome, o.task_id "
            "FROM episodes r JOIN episodes o ON o.id = ? "
            "WHERE r.mode = 'replay' AND r.status = 'done' "
            "AND json_extract(r.spec_json, '$.replay_of') = ? ORDER BY r.id DESC LIMIT 1",
            (original, original),
        )
    )


def same_outputs(source: Store | sqlite3.Connection, episode_a: int, episode_b: int) -> int:
    """How many calls of two episodes, matched by their idx, saw the same observation."""
    return (
        _conn(source)
        .execute(
            "SELECT count(*) FROM calls a JOIN calls b ON b.episode_id = ? AND a.idx = b.idx "
            "WHERE a.episode_id = ? AND a.observation = b.observation",
            (episode_a, episode_b),
        )
        .fetchone()[0]
    )


def find_done(source: Store | sqlite3.Connection, run_key: str) -> dict[str, Any] | None:
    """The finished episode for this run key, if a previous run completed it."""
    return _one(
        _conn(source).execute(
            "SELECT * FROM episodes WHERE run_key = ? AND status = 'done'", (run_key,)
        )
    )


def list_segment_runs(source: Store | sqlite3.Connection, episode_id: int) -> list[dict]:
    return _dicts(
        _conn(source).execute(
            "SELECT * FROM segment_runs WHERE episode_id = ? ORDER BY idx", (episode_id,)
        )
    )


def list_turns(source: Store | sqlite3.Connection, episode_id: int) -> list[dict[str, Any]]:
    return _dicts(
        _conn(source).execute(
            "SELECT * FROM turns WHERE episode_id = ? ORDER BY idx", (episode_id,)
        )
    )


def list_calls(
    source: Store | sqlite3.Connection, episode_id: int, turn_idx: int | None = None
) -> list[dict[str, Any]]:
    conn = _conn(source)
    if turn_idx is None:
        cursor = conn.execute(
            "SELECT * FROM calls WHERE episode_id = ? ORDER BY idx", (episode_id,)
        )
    else:
        cursor = conn.execute(
            "SELECT * FROM calls WHERE episode_id = ? AND turn_idx = ? ORDER BY idx",
            (episode_id, turn_idx),
        )
    return _dicts(cursor)


def get_call_output(source: Store | sqlite3.Connection, call_id: int) -> bytes | None:
    """A call's full raw output, when it was stored."""
    row = (
        _conn(source)
        .execute("SELECT data FROM call_outputs WHERE call_id = ?", (call_id,))
        .fetchone()
    )
    return None if row is None else bytes(row[0])


def list_events(source: Store | sqlite3.Connection, episode_id: int) -> list[dict[str, Any]]:
    """Oracle events in the order they were seen (the final check's have call_idx None)."""
    return _dicts(
        _conn(source).execute(
            "SELECT * FROM oracle_events WHERE episode_id = ? ORDER BY id", (episode_id,)
        )
    )


def list_test_results(source: Store | sqlite3.Connection, episode_id: int) -> list[dict[str, Any]]:
    return _dicts(
        _conn(source).execute(
            "SELECT * FROM test_results WHERE episode_id = ? ORDER BY segment_idx, id",
            (episode_id,),
        )
    )


def get_fault_record(source: Store | sqlite3.Connection, episode_id: int) -> dict | None:
    return _one(
        _conn(source).execute("SELECT * FROM fault_records WHERE episode_id = ?", (episode_id,))
    )
