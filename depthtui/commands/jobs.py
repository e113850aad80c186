"""`depthtui jobs list|show|cancel|pause|resume`: the job queue from the command line."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from depthtui.commands.common import DbOption, JsonOption, console, fail, open_store, print_json
from store.db import StoreError, default_path, open_reader

jobs_app = typer.Typer(help="Jobs: what is queued, running and finished; cancel, pause, resume.")

JobArg = Annotated[int, typer.Argument(help="The job's id (see `depthtui jobs list`).")]
STYLE = {
    "queued": "yellow",
    "running": "cyan",
    "paused": "yellow",
    "cancelled": "dim",
    "done": "green",
    "failed": "red",
}


def _reader(db: Path | None) -> sqlite3.Connection:
    try:
        return open_reader(Path(db or default_path()).expanduser())
    except StoreError as exc:
        fail(str(exc))


def _liveness(job: Any) -> dict[str, Any]:
    """Whether a running job's owner still lives, for display (a dead one awaits takeover)."""
    from engine.jobs.owner import owner_alive
    from store.queue import age_s

    if job.status != "running":
        return {}
    return {
        "owner_alive": owner_alive(job.owner, job.heartbeat_at),
        "heartbeat_age_s": age_s(job.heartbeat_at),
    }


def _progress(job: Any) -> str:
    text = f"{job.progress_done}/{job.progress_total}"
    return text + (f" ({job.progress_failed} failed)" if job.progress_failed else "")


@jobs_app.command("list")
def list_cmd(
    active: Annotated[
        bool, typer.Option("--active", help="Only queued, running and paused jobs.")
    ] = False,
    json_out: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Jobs, newest first."""
    from store.jobs import list_jobs

    conn = _reader(db)
    jobs = list_jobs(conn, active_only=active)
    conn.close()
    if json_out:
        print_json([{**dataclasses.asdict(j), **_liveness(j)} for j in jobs])
        return
    if not jobs:
        console.print("no jobs")
        return
    table = Table("id", "kind", "status", "progress", "cost", "created (UTC)", "message")
    for j in jobs:
        status = j.status
        live = _liveness(j)
        if live and not live["owner_alive"]:
            status += " (owner dead)"
        table.add_row(
            str(j.id),
            j.kind,
            f"[{STYLE.get(j.status, '')}]{status}[/]",
            _progress(j),
            f"${j.cost_usd:.4f}",
            j.created_at[5:16].replace("T", " "),
            j.message if len(j.message) <= 40 else j.message[:39] + "…",
        )
    console.print(table)


@jobs_app.command("show")
def show(job_id: JobArg, json_out: JsonOption = False, db: DbOption = None) -> None:
    """One job: parameters, the equivalent command, status, progress, cost, episodes, message."""
    from store.jobs import get_job
    from store.queue import episode_summary

    conn = _reader(db)
    job = get_job(conn, job_id)
    if job is None:
        conn.close()
        fail(f"there is no job {job_id}")
    summary = episode_summary(conn, job_id)
    conn.close()
    doc = {**dataclasses.asdict(job), **_liveness(job), "episodes": summary}
    if json_out:
        print_json(doc)
        return
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    status = f"[{STYLE.get(job.status, '')}]{job.status}[/]"
    if job.cancel_requested and job.status == "running":
        status += " (cancel requested)"
    if job.pause_requested and job.status == "running":
        status += " (pause requested)"
    live = _liveness(job)
    if live:
        beat = live["heartbeat_age_s"]
        status += f", owner {job.owner}, heartbeat {beat:.1f} s ago" if beat is not None else ""
        if not live["owner_alive"]:
            status += " [red](owner dead: the next engine to start takes it over)[/]"
    rows = [
        ("job", f"{job.id} ({job.kind})"),
        ("command", job.cli),
        ("status", status),
        ("progress", _progress(job) + " unit(s)"),
        ("cost", f"${job.cost_usd:.4f}"),
        ("created", job.created_at),
        ("started", job.started_at or "-"),
        ("finished", job.finished_at or "-"),
        (
            "episodes",
            f"{summary['total']} ({summary['done']} done, {summary['passed']} passed, "
            f"{summary['errors']} with errors, {summary['running']} running, "
            f"{summary['interrupted']} interrupted)",
        ),
    ]
    if summary["error_kinds"]:
        kinds = ", ".join(f"{k} {n}" for k, n in summary["error_kinds"].items())
        rows.append(("errors", kinds))
    rows.append(("message", job.message or "-"))
    for key, value in rows:
        grid.add_row(key, value)
    grid.add_row("params", "")
    console.print(grid)
    print_json(job.params)


def _act(action: str, job_id: int, db: Path | None) -> None:
    from store import jobs

    fn = {"cancel": jobs.request_cancel, "pause": jobs.request_pause, "resume": jobs.resume}[action]
    store = open_store(db)
    try:
        job = fn(store, job_id)
    except jobs.JobError as exc:
        fail(str(exc))
    except StoreError as exc:
        fail(str(exc))
    finally:
        store.close()
    pending = (job.cancel_requested and action == "cancel") or (
        job.pause_requested and action == "pause"
    )
    if job.status == "running" and pending:
        console.print(f"job {job_id}: {action} requested; its engine stops it within seconds")
    else:
        console.print(f"job {job_id} is now {job.status}")


@jobs_app.command("cancel")
def cancel(job_id: JobArg, db: DbOption = None) -> None:
    """Cancel a job (a running one stops its episodes in flight)."""
    _act("cancel", job_id, db)


@jobs_app.command("pause")
def pause(job_id: JobArg, db: DbOption = None) -> None:
    """Pause a job; `resume` goes on, reusing completed runs."""
    _act("pause", job_id, db)


@jobs_app.command("resume")
def resume_cmd(job_id: JobArg, db: DbOption = None) -> None:
    """Queue a paused job again."""
    _act("resume", job_id, db)


def register(app: typer.Typer) -> None:
    app.add_typer(jobs_app, name="jobs")
