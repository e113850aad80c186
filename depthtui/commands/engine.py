"""`depthtui engine start|stop|status`: the background process that runs queued jobs."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from depthtui.commands.common import DbOption, JsonOption, console, err_console, fail, print_json
from depthtui.commands.executor_opts import ExecutorOpt, RayAddressOpt, executor_choice
from store.db import StoreError, default_path, open_reader

engine_app = typer.Typer(help="The background engine that runs queued jobs.")

WorkersOption = Annotated[
    int, typer.Option("--workers", min=1, help="Units (tasks) run at once by the engine.")
]


def _path(db: Path | None) -> Path:
    return Path(db or default_path()).expanduser().resolve()


@engine_app.command("start")
def start(
    workers: WorkersOption = 1,
    foreground: Annotated[
        bool,
        typer.Option(
            "--foreground", help="Run in this terminal (log to stderr) instead of detaching."
        ),
    ] = False,
    executor: ExecutorOpt = "local",
    ray_address: RayAddressOpt = None,
    idle_s: Annotated[
        float | None,
        typer.Option(
            "--idle-s",
            min=0,
            help="Stop after this many seconds with no job (default $DEPTHTUI_ENGINE_IDLE_S, "
            "else 600; 0: never).",
        ),
    ] = None,
    db: DbOption = None,
) -> None:
    """Start an engine for the store, detached, logging beside the store."""
    from engine.jobs.containers import docker_problem
    from engine.jobs.engine import Engine, engine_log_path
    from engine.jobs.launch import EngineError, live_engines, start_engine
    from store.db import Store

    choice = executor_choice(executor, ray_address)
    path = _path(db)
    try:
        with Store(path) as store:  # a corrupt or unreadable file stops us here, untouched
            live = live_engines(store)
    except StoreError as exc:
        fail(str(exc))
    if live and not foreground:
        pids = ", ".join(str(e["pid"]) for e in live)
        console.print(f"an engine is already running for {path} (pid {pids})")
        return
    problem = docker_problem() if choice.kind == "local" else None  # Ray nodes have Docker
    if problem:
        err_console.print(
            f"[bold yellow]warning:[/] {problem}; the engine will wait for it and queued jobs "
            "stay queued",
            highlight=False,
        )
    if foreground:
        import logging

        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
        try:
            engine = Engine(path, workers, executor=choice, idle_s=idle_s)
        except ValueError as exc:  # $DEPTHTUI_ENGINE_IDLE_S is not a number
            fail(str(exc))
        signal.signal(signal.SIGTERM, engine.request_stop)
        signal.signal(signal.SIGINT, engine.request_stop)
        try:
            engine.serve()
        except StoreError as exc:
            fail(str(exc))
        return
    try:
        pid = start_engine(path, workers, executor=choice, idle_s=idle_s)
    except (EngineError, StoreError, ValueError) as exc:
        fail(str(exc))
    console.print(
        f"engine started: pid {pid}, {workers} worker(s), {choice.kind} executor, "
        f"log {engine_log_path(path)}"
    )


@engine_app.command("stop")
def stop(
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=0, help="Seconds to wait before killing an engine."),
    ] = 60.0,
    db: DbOption = None,
) -> None:
    """Stop the store's engines: jobs in hand go back to the queue."""
    from engine.jobs.launch import stop_engines

    try:
        ended = stop_engines(_path(db), timeout)
    except StoreError as exc:
        fail(str(exc))
    if not ended:
        console.print("no engine is running")
    for owner, how in ended:
        console.print(f"{owner}: {how}", highlight=False)


@engine_app.command("status")
def status(json_out: JsonOption = False, db: DbOption = None) -> None:
    """Engines of the store (pid, heartbeat, job in hand) and jobs by status."""
    from engine.jobs.engine import engine_log_path
    from engine.jobs.owner import owner_alive
    from store.queue import age_s, job_counts, list_engines

    path = _path(db)
    try:
        conn = open_reader(path)
        engines = list_engines(conn)
        counts = job_counts(conn)
        conn.close()
    except StoreError as exc:
        fail(str(exc))
    for e in engines:
        e["alive"] = e["status"] in ("running", "stopping") and owner_alive(
            e["owner"], e["heartbeat_at"]
        )
        e["heartbeat_age_s"] = age_s(e["heartbeat_at"])
    live = [e for e in engines if e["alive"]]
    doc = {
        "store": str(path),
        "log": str(engine_log_path(path)),
        "engines": engines,
        "jobs": counts,
    }
    if json_out:
        print_json(doc)
        return
    if not live:
        console.print(f"no engine is running for {path}")
    table = Table(
        "pid", "host", "status", "heartbeat", "job", "workers", "started", title="engines"
    )
    for e in engines[:10]:
        state = e["status"] if e["alive"] or e["status"] in ("stopped", "dead") else "dead"
        table.add_row(
            str(e["pid"]),
            e["host"],
            state,
            f"{e['heartbeat_age_s']:.1f} s ago",
            str(e["job_id"] or "-"),
            str(e["workers"]),
            e["started_at"][:19],
        )
    if engines:
        console.print(table)
    shown = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none"
    console.print(f"jobs: {shown}")
    console.print(f"log: {engine_log_path(path)}", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(engine_app, name="engine")
