"""What the measurement protocol keeps besides episodes: frozen contracts, depth estimates, and
the episode updates a runner makes while it owns an episode."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from store.db import Store, now


def _conn(source: Store | sqlite3.Connection) -> sqlite3.Connection:
    return source.conn if isinstance(source, Store) else source


def _dict(cursor: sqlite3.Cursor) -> dict[str, Any] | None:
    row = cursor.fetchone()
    if row is None:
        return None
    return dict(zip([d[0] for d in cursor.description], row, strict=True))


# --- contracts ---------------------------------------------------------------------------------


def put_contract(
    store: Store,
    task_id: str,
    *,
    task_hash: str,
    env_hash: str,
    tests_hash: str,
    valid: bool,
    reasons: list[str],
    permitted: dict[str, list[str]],
    tests: list[str],
    fault_targets: dict[str, str],
    flags: list[str],
    detail: dict[str, Any],
    at: str | None = None,
) -> None:
    """Freeze (or re-freeze) a task's contract; `at` is when (now unless given: a generated
    store keeps its own clock)."""
    with store.tx() as conn:
        conn.execute(
            """
            INSERT INTO contracts (task_id, task_hash, env_hash, tests_hash, valid, reasons_json,
                permitted_json, tests_json, fault_targets_json, flags_json, detail_json,
                created_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(task_id) DO UPDATE SET
                task_hash = excluded.task_hash, env_hash = excluded.env_hash,
                tests_hash = excluded.tests_hash, valid = excluded.valid,
                reasons_json = excluded.reasons_json, permitted_json = excluded.permitted_json,
                tests_json = excluded.tests_json, fault_targets_json = excluded.fault_targets_json,
                flags_json = excluded.flags_json, detail_json = excluded.detail_json,
                created_at = excluded.created_at
            """,
            (
                task_id,
                task_hash,
                env_hash,
                tests_hash,
                int(valid),
                json.dumps(reasons),
                json.dumps(permitted),
                json.dumps(tests),
                json.dumps(fault_targets),
                json.dumps(flags),
                json.dumps(detail, default=str),
                at or now(),
            ),
        )


def get_contract(source: Store | sqlite3.Connection, task_id: str) -> dict[str, Any] | None:
    """The stored contract with its JSON columns decoded (keys without the _json suffix)."""
    row = _dict(_conn(source).execute("SELECT * FROM contracts WHERE task_id = ?", (task_id,)))
    if row is None:
        return None
    for key in [k for k in row if k.endswith("_json")]:
        row[key[: -len("_json")]] = json.loads(row.pop(key) or "null")
    row["valid"] = bool(row["valid"])
    return row


# --- estimates ---------------------------------------------------------------------------------


def put_estimate(
    store: Store,
    task_id: str,
    task_hash: str,
    protocol: str,
    model: str,
    *,
    n_turns: int | None,
    estimate: int | None,
    finished: bool,
    detail: dict[str, Any],
    at: str | None = None,
) -> None:
    """Write a task's estimate under one estimator and model; `at` as in put_contract."""
    with store.tx() as conn:
        conn.execute(
            """
            INSERT INTO estimates (task_id, task_hash, protocol, model, n_turns, estimate,
                finished, detail_json, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(task_id, protocol, model) DO UPDATE SET
                task_hash = excluded.task_hash, n_turns = excluded.n_turns,
                estimate = excluded.estimate, finished = excluded.finished,
                detail_json = excluded.detail_json, updated_at = excluded.updated_at
            """,
            (
                task_id,
                task_hash,
                protocol,
                model,
                n_turns,
                estimate,
                int(finished),
                json.dumps(detail, default=str),
                at or now(),
            ),
        )


@dataclass(frozen=True)
class EstimateRow:
    """One estimates row of a task under one estimator ("" = the task's summary: N, D)."""

    model: str
    n_turns: int | None
    estimate: int | None
    detail: dict[str, Any] = field(default_factory=dict)


def replace_estimates(
    store: Store,
    task_id: str,
    task_hash: str,
    protocol: str,
    rows: list[EstimateRow],
    finished: bool,
) -> None:
    """Make `rows` the task's whole set of estimates under `protocol`, in one transaction: a
    model measured before but not now keeps no row, so D is always the minimum of the
    estimates stored beside it."""
    stamp = now()
    with store.tx() as conn:
        conn.execute(
            "DELETE FROM estimates WHERE task_id = ? AND protocol = ?", (task_id, protocol)
        )
        conn.executemany(
            """
            INSERT INTO estimates (task_id, task_hash, protocol, model, n_turns, estimate,
                finished, detail_json, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                (
                    task_id,
                    task_hash,
                    protocol,
                    r.model,
                    r.n_turns,
                    r.estimate,
                    int(finished),
                    json.dumps(r.detail, default=str),
                    stamp,
                )
                for r in rows
            ],
        )


def clear_estimates(store: Store, task_id: str, protocol: str) -> None:
    """Forget a task's estimates under one protocol (before writing a fresh set)."""
    with store.tx() as conn:
        conn.execute(
            "DELETE FROM estimates WHERE task_id = ? AND protocol = ?", (task_id, protocol)
        )


# --- a running episode -------------------------------------------------------------------------


def update_running_episode(store: Store, episode_id: int, owner: str, **fields: Any) -> None:
    """Set columns of an episode this owner is running (container id, spec, ...)."""
    if not fields:
        return
    for key in fields:
        if not key.replace("_", "").isalnum():
            raise ValueError(f"episodes: {key!r} is not a column name")
    values = {
        k: (json.dumps(v, default=str) if k.endswith("_json") and not isinstance(v, str) else v)
        for k, v in fields.items()
    }
    sets = ", ".join(f"{k} = ?" for k in values)
    with store.tx() as conn:
        conn.execute(
            f"UPDATE episodes SET {sets} WHERE id = ? AND owner = ? AND status = 'running'",
            (*values.values(), episode_id, owner),
        )


def interrupt_episode(store: Store, episode_id: int, owner: str, detail: str) -> None:
    """Mark one running episode interrupted: never counted as done, so it runs again."""
    with store.tx() as conn:
        conn.execute(
            "UPDATE episodes SET status = 'interrupted', finished_at = ?, "
            "end_reason = 'interrupted', error_detail = ? "
            "WHERE id = ? AND owner = ? AND status = 'running'",
            (now(), detail, episode_id, owner),
        )


def set_episode_note(store: Store, episode_id: int, detail: dict[str, Any]) -> None:
    """Keep what a probe measured inside an episode (validation), with the episode."""
    with store.tx() as conn:
        conn.execute(
            "UPDATE episodes SET detail_json = ? WHERE id = ?",
            (json.dumps(detail, default=str), episode_id),
        )


def get_episode_note(source: Store | sqlite3.Connection, episode_id: int) -> dict[str, Any]:
    row = (
        _conn(source)
        .execute("SELECT detail_json FROM episodes WHERE id = ?", (episode_id,))
        .fetchone()
    )
    return json.loads(row[0] or "{}") if row else {}
