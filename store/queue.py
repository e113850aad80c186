"""The engine's side of the jobs table: claiming, heartbeats, control flags, takeover.

Every state change that two processes could race on is one UPDATE guarded by the state it expects
(status, owner), inside `Store.tx()` (BEGIN IMMEDIATE). SQLite lets one writer in at a time, so
of two engines running the same UPDATE ... WHERE status = 'queued' RETURNING, exactly one gets the
row back. Owners are strings ("host:pid"); deciding whether an owner is alive is the engine's job.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from store import vocab
from store.db import Store, now
from store.episodes import with_outcome

# Jobs in these states are finished: no engine touches them again.


@dataclass(frozen=True)
class ClaimedJob:
    id: int
    kind: str
    params: dict[str, Any]
    cli: str
    cost_usd: float


@dataclass(frozen=True)
class Controls:
    """What the front end asked of a running job, and whether this owner still holds it."""

    status: str
    owner: str | None
    cancel_requested: bool
    pause_requested: bool


@dataclass(frozen=True)
class Interrupted:
    episode_id: int
    container_id: str | None


def ago(seconds: float) -> str:
    """The store's timestamp for `seconds` before now (timestamps compare as text)."""
    moment = datetime.now(UTC) - timedelta(seconds=seconds)
    return moment.isoformat(timespec="milliseconds")


def age_s(stamp: str | None) -> float | None:
    """Seconds since a store timestamp; None when there is none."""
    if not stamp:
        return None
    return (datetime.now(UTC) - datetime.fromisoformat(stamp)).total_seconds()


def _claimed(row: sqlite3.Row) -> ClaimedJob:
    return ClaimedJob(
        id=row["id"],
        kind=row["kind"],
        params=json.loads(row["params_json"]),
        cli=row["cli"],
        cost_usd=row["cost_usd"],
    )


_CLAIM_SET = """
    UPDATE jobs SET status = 'running', owner = :owner, heartbeat_at = :now,
        started_at = COALESCE(started_at, :now), finished_at = NULL
"""


def claim_next_job(store: Store, owner: str) -> ClaimedJob | None:
    """Take the oldest queued job for `owner`, atomically; None when nothing is queued."""
    with store.tx() as conn:
        row = conn.execute(
            _CLAIM_SET
            + """WHERE id = (SELECT id FROM jobs WHERE status = 'queued' ORDER BY id LIMIT 1)
                 AND status = 'queued' RETURNING *""",
            {"owner": owner, "now": now()},
        ).fetchone()
    return _claimed(row) if row else None


def claim_job(store: Store, job_id: int, owner: str) -> ClaimedJob | None:
    """Take one given job if it is queued (a foreground run); None when it is not."""
    with store.tx() as conn:
        row = conn.execute(
            _CLAIM_SET + "WHERE id = :id AND status = 'queued' RETURNING *",
            {"owner": owner, "now": now(), "id": job_id},
        ).fetchone()
    return _claimed(row) if row else None


def job_state(store: Store, job_id: int) -> tuple[str, str | None] | None:
    """(status, owner) of a job; None when there is no such job."""
    row = store.query("SELECT status, owner FROM jobs WHERE id = ?", (job_id,))
    return (row[0]["status"], row[0]["owner"]) if row else None


def heartbeat_job(store: Store, job_id: int, owner: str, message: str | None = None) -> Controls:
    """Mark the job alive (only while `owner` holds it) and read the front end's requests."""
    with store.tx() as conn:
        if message is None:
            conn.execute(
                "UPDATE jobs SET heartbeat_at = ? "
                "WHERE id = ? AND owner = ? AND status = 'running'",
                (now(), job_id, owner),
            )
        else:
            conn.execute(
                "UPDATE jobs SET heartbeat_at = ?, message = ? "
                "WHERE id = ? AND owner = ? AND status = 'running'",
                (now(), message, job_id, owner),
            )
        row = conn.execute(
            "SELECT status, owner, cancel_requested, pause_requested FROM jobs WHERE id = ?",
            (job_id,),
        ).fetchone()
    if row is None:
        return Controls(status="deleted", owner=None, cancel_requested=True, pause_requested=False)
    return Controls(
        status=row["status"],
        owner=row["owner"],
        cancel_requested=bool(row["cancel_requested"]),
        pause_requested=bool(row["pause_requested"]),
    )


def set_progress(
    store: Store, job_id: int, owner: str, *, done: int, total: int, failed: int
) -> None:
    with store.tx() as conn:
        conn.execute(
            "UPDATE jobs SET progress_done = ?, progress_total = ?, progress_failed = ? "
            "WHERE id = ? AND owner = ?",
            (done, total, failed, job_id, owner),
        )


def add_job_cost(store: Store, job_id: int, usd: float) -> None:
    with store.tx() as conn:
        conn.execute("UPDATE jobs SET cost_usd = cost_usd + ? WHERE id = ?", (usd, job_id))


def finish_job(store: Store, job_id: int, owner: str, status: str, message: str) -> bool:
    """End `owner`'s run of a job: a final status, or 'paused'/'queued' to be picked up again.
    False when `owner` no longer holds the job (another engine took it over)."""
    final = status in vocab.FINAL_JOB_STATUSES
    with store.tx() as conn:
        row = conn.execute(
            """UPDATE jobs SET status = ?, message = ?, owner = NULL, heartbeat_at = ?,
                   finished_at = CASE WHEN ? THEN ? ELSE NULL END,
                   pause_requested = 0,
                   cancel_requested = CASE WHEN ? THEN cancel_requested ELSE 0 END
               WHERE id = ? AND owner = ? AND status = 'running' RETURNING id""",
            (status, message, now(), final, now(), final, job_id, owner),
        ).fetchone()
    return row is not None


def note_queued(store: Store, message: str) -> int:
    """Say something on every queued job (why the engine is not starting them); how many."""
    with store.tx() as conn:
        cur = conn.execute("UPDATE jobs SET message = ? WHERE status = 'queued'", (message,))
    return cur.rowcount


def set_job_message(store: Store, job_id: int, message: str) -> None:
    with store.tx() as conn:
        conn.execute("UPDATE jobs SET message = ? WHERE id = ?", (message, job_id))


def queued_count(store: Store) -> int:
    return store.query("SELECT count(*) AS n FROM jobs WHERE status = 'queued'")[0]["n"]


def running_jobs(store: Store) -> list[sqlite3.Row]:
    return store.query(
        "SELECT id, owner, heartbeat_at FROM jobs WHERE status = 'running' ORDER BY id"
    )


def requeue_orphan(store: Store, job_id: int, dead_owner: str | None, message: str) -> bool:
    """Put a job whose owner died back in the queue; False if someone else already did."""
    with store.tx() as conn:
        row = conn.execute(
            """UPDATE jobs SET status = 'queued', owner = NULL, message = ?
               WHERE id = ? AND status = 'running' AND owner IS ? RETURNING id""",
            (message, job_id, dead_owner),
        ).fetchone()
    return row is not None


# --- episodes ---------------------------------------------------------------------------------


def interrupt_episodes(
    store: Store, owner: str, job_id: int | None = None, detail: str = ""
) -> list[Interrupted]:
    """Mark `owner`'s running episodes (of one job, or all) interrupted: never counted as done,
    so the protocol runs them again. Returns them with their containers, for removal."""
    sql = """UPDATE episodes SET status = 'interrupted', finished_at = ?,
                 end_reason = 'interrupted', error_detail = COALESCE(error_detail, ?)
             WHERE status = 'running' AND owner = ?"""
    params: list[Any] = [now(), detail or None, owner]
    if job_id is not None:
        sql += " AND job_id = ?"
        params.append(job_id)
    with store.tx() as conn:
        rows = conn.execute(sql + " RETURNING id, container_id", params).fetchall()
    return [Interrupted(r["id"], r["container_id"]) for r in rows]


def running_episode_owners(store: Store) -> list[str]:
    rows = store.query(
        "SELECT DISTINCT owner FROM episodes WHERE status = 'running' AND owner IS NOT NULL"
    )
    return [r["owner"] for r in rows]


def running_containers(store: Store, owner: str, job_id: int | None = None) -> list[str]:
    sql = "SELECT container_id FROM episodes WHERE status = 'running' AND owner = ?"
    params: list[Any] = [owner]
    if job_id is not None:
        sql += " AND job_id = ?"
        params.append(job_id)
    rows = store.query(sql + " AND container_id IS NOT NULL", tuple(params))
    return [r["container_id"] for r in rows]


@dataclass(frozen=True)
class EpisodeClaim:
    """The outcome of claim_episode: 'claimed' (run it: `episode_id` is the new running row),
    'done' (reuse `episode_id`), or 'busy' (a live owner is running it now)."""

    state: str
    episode_id: int
    owner: str | None = None


def claim_episode(
    store: Store,
    run_key: str,
    owner: str,
    fields: dict[str, Any],
    *,
    owner_alive: Callable[[str], bool] | None = None,
) -> EpisodeClaim:
    """Insert a running episode for `run_key` unless one is done or being run by a live owner.
    One transaction, so two engines never both run the same run. `fields` are the other episode
    columns (task_id, task_hash, mode, agent, ...); `owner_alive(owner) -> bool` says whether a
    running row's owner still lives (default: every other owner counts as alive)."""
    with store.tx() as conn:
        row = conn.execute(
            "SELECT id FROM episodes WHERE run_key = ? AND status = 'done' LIMIT 1", (run_key,)
        ).fetchone()
        if row:
            return EpisodeClaim("done", row["id"])
        for r in conn.execute(
            "SELECT id, owner FROM episodes WHERE run_key = ? AND status = 'running'", (run_key,)
        ).fetchall():
            if r["owner"] != owner and (owner_alive is None or owner_alive(r["owner"])):
                return EpisodeClaim("busy", r["id"], r["owner"])
        values = {
            "started_at": now(),
            **fields,
            "run_key": run_key,
            "owner": owner,
            "status": "running",
        }
        cols = ", ".join(_columns(values))
        marks = ", ".join(f":{c}" for c in values)
        new = conn.execute(
            f"INSERT INTO episodes ({cols}) VALUES ({marks}) RETURNING id", values
        ).fetchone()
    return EpisodeClaim("claimed", new["id"], owner)


def _columns(values: dict[str, Any]) -> list[str]:
    # Column names are put into the SQL text; allow only plain identifiers.
    bad = [c for c in values if not c.replace("_", "").isalnum() or not c.isascii()]
    if bad:
        raise ValueError(f"episode fields: not column names: {bad}")
    return list(values)


def episode_summary(conn: sqlite3.Connection | Store, job_id: int) -> dict[str, Any]:
    """Counts of a job's episodes for `jobs show`: by status, by outcome (store/vocab.py),
    errors by kind, cost."""
    sql = """SELECT count(*) AS total,
                    sum(status = 'done') AS done,
                    sum(status = 'running') AS running,
                    sum(status = 'interrupted') AS interrupted,
                    sum(status = 'done' AND outcome = 'pass') AS passed,
                    sum(status = 'done' AND outcome IN ('infra_error', 'task_broken')) AS errors,
                    sum(status = 'done' AND outcome = 'agent_error') AS agent_errors,
                    sum(status = 'done' AND outcome = 'infra_error') AS infra_errors,
                    sum(status = 'done' AND outcome = 'task_broken') AS task_broken,
                    coalesce(sum(cost_usd), 0) AS cost_usd
             FROM episodes WHERE job_id = ?"""
    run = conn.query if isinstance(conn, Store) else _query(conn)
    row = run(sql, (job_id,))[0]
    summary = {k: (row[k] or 0) for k in row.keys()}  # noqa: SIM118 (sqlite3.Row)
    kinds = run(
        """SELECT error_kind, count(*) AS n FROM episodes
           WHERE job_id = ? AND status = 'done' AND error_kind IS NOT NULL
           GROUP BY error_kind ORDER BY n DESC""",
        (job_id,),
    )
    summary["error_kinds"] = {r["error_kind"]: r["n"] for r in kinds}
    return summary


def _query(conn: sqlite3.Connection) -> Callable[..., list[sqlite3.Row]]:
    def run(sql: str, params: tuple = ()) -> list[sqlite3.Row]:
        return conn.execute(sql, params).fetchall()

    return run


# --- engines ----------------------------------------------------------------------------------


def register_engine(
    store: Store, owner: str, host: str, pid: int, workers: int, log_path: str
) -> None:
    stamp = now()
    with store.tx() as conn:
        conn.execute(
            """INSERT OR REPLACE INTO engines
                   (owner, host, pid, workers, status, job_id, started_at, heartbeat_at,
                    stopped_at, log_path, message)
               VALUES (?, ?, ?, ?, 'running', NULL, ?, ?, NULL, ?, '')""",
            (owner, host, pid, workers, stamp, stamp, log_path),
        )


def heartbeat_engine(
    store: Store, owner: str, job_id: int | None, message: str | None = None
) -> str | None:
    """Mark the engine alive; returns its status (the front end may have set 'stopping')."""
    with store.tx() as conn:
        row = conn.execute(
            """UPDATE engines SET heartbeat_at = ?, job_id = ?, message = COALESCE(?, message)
               WHERE owner = ? RETURNING status""",
            (now(), job_id, message, owner),
        ).fetchone()
    return row["status"] if row else None


def set_engine_status(store: Store, owner: str, status: str, message: str | None = None) -> None:
    stopped = status in ("stopped", "dead")
    with store.tx() as conn:
        conn.execute(
            """UPDATE engines SET status = ?, message = COALESCE(?, message),
                   stopped_at = CASE WHEN ? THEN ? ELSE stopped_at END,
                   job_id = CASE WHEN ? THEN NULL ELSE job_id END
               WHERE owner = ?""",
            (status, message, stopped, now(), stopped, owner),
        )


def list_engines(conn: sqlite3.Connection | Store, *, live_only: bool = False) -> list[dict]:
    sql = "SELECT * FROM engines"
    if live_only:
        sql += " WHERE status IN ('running', 'stopping')"
    run = conn.query if isinstance(conn, Store) else _query(conn)
    return [dict(r) for r in run(sql + " ORDER BY started_at DESC", ())]


def owner_heartbeat(store: Store, owner: str) -> str | None:
    """The latest heartbeat any engine or job row shows for `owner`."""
    row = store.query(
        """SELECT max(hb) AS hb FROM (
               SELECT heartbeat_at AS hb FROM engines WHERE owner = ?
               UNION ALL SELECT heartbeat_at FROM jobs WHERE owner = ?)""",
        (owner, owner),
    )
    return row[0]["hb"] if row else None


def complete_episode(store: Store, episode_id: int, owner: str, fields: dict[str, Any]) -> bool:
    """Mark a running episode done with its outcome columns, only while it is still `owner`'s
    and still running: an episode interrupted meanwhile (takeover, cancel) stays interrupted and
    is run again. False when that happened."""
    values = {**fields, "status": "done", "finished_at": fields.get("finished_at") or now()}
    with_outcome(values)
    sets = ", ".join(f"{c} = :{c}" for c in _columns(values))
    with store.tx() as conn:
        row = conn.execute(
            f"UPDATE episodes SET {sets} WHERE id = :_id AND owner = :_owner "
            "AND status = 'running' RETURNING id",
            {**values, "_id": episode_id, "_owner": owner},
        ).fetchone()
    return row is not None


def set_episode_container(store: Store, episode_id: int, owner: str, container_id: str) -> None:
    """Record the container an episode runs in, so a takeover can remove it."""
    with store.tx() as conn:
        conn.execute(
            "UPDATE episodes SET container_id = ? WHERE id = ? AND owner = ?",
            (container_id, episode_id, owner),
        )


def job_counts(conn: sqlite3.Connection | Store) -> dict[str, int]:
    """How many jobs are in each status."""
    run = conn.query if isinstance(conn, Store) else _query(conn)
    rows = run("SELECT status, count(*) AS n FROM jobs GROUP BY status", ())
    return {r["status"]: r["n"] for r in rows}


def episode_timings(store: Store, job_id: int) -> list[dict[str, Any]]:
    """The finished episodes of a job with their phase timings (for `depthtui bench engine`)."""
    rows = store.query(
        """SELECT id, task_id, agent, error_kind, error_detail, timings_json, started_at,
                  finished_at
           FROM episodes WHERE job_id = ? AND status = 'done' ORDER BY id""",
        (job_id,),
    )
    return [dict(r) for r in rows]
