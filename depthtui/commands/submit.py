"""How a running verb hands over its job: resolve the tasks, check the typed parameters once,
store the job with the command line that stores it again, then run it here with progress bars
or, with --detach, leave it to the background engine and print its id.
"""

from __future__ import annotations

from pathlib import Path

import typer

from depthtui.commands.common import console, err_console, fail, open_store
from depthtui.commands.executor_opts import current as current_executor
from engine.jobs.params import JobParams
from store.db import Store


def submit(
    params: JobParams, tasks: list[str], db: Path | None, detach: bool
) -> tuple[Store, int, str]:
    """Resolve tasks, store the job, run it (or detach); returns (store, job id, status)."""
    from engine.protocol.common import resolve_tasks

    store = open_store(db)
    resolved = resolve_tasks(store, tasks)
    for error in resolved.errors:
        err_console.print(f"[bold red]✗[/] {error}", highlight=False)
    if not resolved.task_ids:
        fail("no task to run")
    return launch(store, params.with_tasks(resolved.task_ids), detach)


def launch(store: Store, params: JobParams, detach: bool) -> tuple[Store, int, str]:
    """Check the parameters, store the job, then run it here or hand it to the engine."""
    from engine.agents.registry import RegistryError
    from engine.jobs.params import InvalidParams
    from engine.protocol.common import repeat_warnings
    from store.jobs import submit_job

    try:
        params.check()
        warnings = repeat_warnings(params.KIND, params.to_json())
    except InvalidParams as exc:
        fail("\n".join(exc.problems))
    except RegistryError as exc:
        fail(str(exc))
    for warning in warnings:
        err_console.print(f"[yellow]warning:[/] {warning}", highlight=False)
    # the stored command is the one that stores this job again, from any directory
    cli = params.cli(store.path) + (" --detach" if detach else "")
    job_id = submit_job(store, params.KIND, params.to_json(), cli)
    if detach:
        from engine.jobs.launch import EngineError, ensure_engine

        try:
            pid = ensure_engine(store.path, workers=params.workers, executor=current_executor())
        except EngineError as exc:
            fail(f"job {job_id} is queued, but no engine could be started: {exc}")
        console.print(
            f"job {job_id} queued; engine pid {pid}. Follow it with `depthtui jobs show "
            f"{job_id}` or in the TUI.",
            highlight=False,
        )
        return store, job_id, "queued"
    from depthtui.progress import JobNotRunnable, run_foreground

    try:
        status = run_foreground(store, job_id, params.workers, executor=current_executor())
    except JobNotRunnable as exc:
        fail(str(exc))
    return store, job_id, status


def finish(status: str) -> None:
    if status in ("done",):
        return
    raise typer.Exit(0 if status == "queued" else 1)
