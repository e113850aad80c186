"""The job queue as the front end sees it: submit a job, list and read jobs, ask for cancel,
pause and resume.

The engine (engine/jobs/) claims queued jobs and moves them through running, paused, cancelled,
done or failed; the front end only inserts rows and sets request flags, so both sides can run in
different processes with the store as the only channel between them.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from store.db import Store, now
from store.vocab import JOB_KINDS

ACTIVE = ("queued", "running", "paused")


class JobError(ValueError):
    """A job request that cannot be honoured (unknown kind, unknown job, finished job)."""


@dataclass(frozen=True)
class Job:
    id: int
    kind: str
    params: dict[str, Any]
    cli: str
    status: str
    created_at: str
    started_at: str | None
    finished_at: str | None
    heartbeat_at: str | None
    owner: str | None
    progress_done: int
    progress_total: int
    progress_failed: int
    cost_usd: float
    message: str
    cancel_requested: bool
    pause_requested: bool

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    @property
    def fraction(self) -> float | None:
        return self.progress_done / self.progress_total if self.progress_total else None


_COLS = (
    "id, kind, params_json, cli, status, created_at, started_at, finished_at, heartbeat_at, owner, "
    "progress_done, progress_total, progress_failed, cost_usd, message, cancel_requested, "
    "pause_requested"
)


def _conn(source: Store | sqlite3.Connection) -> sqlite3.Connection:
    return source.conn if isinstance(source, Store) else source


def _job(r: sqlite3.Row | tuple) -> Job:
    values = list(r)
    try:
        values[2] = json.loads(values[2])
    except ValueError:
        values[2] = {}
    values[15] = bool(values[15])
    values[16] = bool(values[16])
    return Job(*values)


def submit_job(store: Store, kind: str, params: dict[str, Any], cli: str) -> int:
    """Queue a job for the engine and return its id. `cli` is the equivalent command line."""
    if kind not in JOB_KINDS:
        raise JobError(f"job kind '{kind}' is not one of {', '.join(JOB_KINDS)}")
    if not isinstance(params, dict):
        raise JobError(f"job params must be a JSON object, got {type(params).__name__}")
    try:
        params_json = json.dumps(params, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise JobError(f"job params are not JSON-serialisable: {exc}") from exc
    with store.tx() as conn:
        cur = conn.execute(
            "INSERT INTO jobs (kind, params_json, cli, status, created_at) "
            "VALUES (?, ?, ?, 'queued', ?)",
            (kind, params_json, cli, now()),
        )
        return int(cur.lastrowid)


def get_job(source: Store | sqlite3.Connection, job_id: int) -> Job | None:
    r = _conn(source).execute(f"SELECT {_COLS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
    return None if r is None else _job(r)


def list_jobs(
    source: Store | sqlite3.Connection,
    *,
    active_only: bool = False,
    changed_since: int | None = None,
    watch: tuple[int, ...] = (),
) -> list[Job]:
    """Jobs, newest first.

    `changed_since=N` returns only rows that can differ from what a viewer already shows: jobs
    with id > N, active jobs, and the ids in `watch` (those the viewer last saw active).
    """
    clauses, params = [], []
    if active_only:
        clauses.append(f"status IN ({','.join('?' * len(ACTIVE))})")
        params.extend(ACTIVE)
    if changed_since is not None:
        parts = ["id > ?", f"status IN ({','.join('?' * len(ACTIVE))})"]
        params.append(changed_since)
        params.extend(ACTIVE)
        if watch:
            parts.append(f"id IN ({','.join('?' * len(watch))})")
            params.extend(watch)
        clauses.append("(" + " OR ".join(parts) + ")")
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    return [
        _job(r)
        for r in _conn(source).execute(f"SELECT {_COLS} FROM jobs {where} ORDER BY id DESC", params)
    ]


def _require(conn: sqlite3.Connection, job_id: int) -> Job:
    r = conn.execute(f"SELECT {_COLS} FROM jobs WHERE id = ?", (job_id,)).fetchone()
    if r is None:
        raise JobError(f"there is no job {job_id}")
    return _job(r)


def request_cancel(store: Store, job_id: int) -> Job:
    """Cancel a job: a queued or paused job stops at once; a running one when the engine sees the
    flag (it stops starting episodes and ends the ones in flight)."""
    with store.tx() as conn:
        job = _require(conn, job_id)
        if not job.active:
            raise JobError(f"job {job_id} is already {job.status}")
        if job.status in ("queued", "paused"):
            conn.execute(
                "UPDATE jobs SET status = 'cancelled', cancel_requested = 1, finished_at = ?, "
                "message = 'cancelled by user' WHERE id = ?",
                (now(), job_id),
            )
        else:
            conn.execute("UPDATE jobs SET cancel_requested = 1 WHERE id = ?", (job_id,))
        return _require(conn, job_id)


def request_pause(store: Store, job_id: int) -> Job:
    """Pause a job: a queued one is held back at once; a running one stops starting episodes and
    the engine marks it paused when the ones in flight are done."""
    with store.tx() as conn:
        job = _require(conn, job_id)
        if job.status == "queued":
            conn.execute(
                "UPDATE jobs SET status = 'paused', pause_requested = 1, "
                "message = 'paused by user' WHERE id = ?",
                (job_id,),
            )
        elif job.status == "running":
            conn.execute("UPDATE jobs SET pause_requested = 1 WHERE id = ?", (job_id,))
        elif job.status != "paused":
            raise JobError(f"job {job_id} is {job.status}; only queued or running jobs pause")
        return _require(conn, job_id)


def resume(store: Store, job_id: int) -> Job:
    """Resume a paused job: it is queued again and the engine picks it up, reusing completed runs.
    A running job with a pause still pending simply has the request withdrawn."""
    with store.tx() as conn:
        job = _require(conn, job_id)
        if job.status == "paused":
            conn.execute(
                "UPDATE jobs SET status = 'queued', pause_requested = 0, message = 'resumed' "
                "WHERE id = ?",
                (job_id,),
            )
        elif job.status == "running" and job.pause_requested:
            conn.execute("UPDATE jobs SET pause_requested = 0 WHERE id = ?", (job_id,))
        else:
            raise JobError(f"job {job_id} is {job.status}, not paused")
        return _require(conn, job_id)
