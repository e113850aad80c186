"""The running verbs: check, validate, free, ladder, audit, episodes.

Each resolves its tasks (paths are imported first), stores a job whose parameters are exactly
what was asked, then runs it here with progress bars — or, with --detach, leaves it to the
background engine and prints its id. A rerun of a finished command reuses every completed
episode and says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from depthtui.commands.common import DbOption, JsonOption, console, err_console, fail, open_store
from store.db import Store

TasksArg = Annotated[
    list[str],
    typer.Argument(
        help="Task folders, dataset folders, task ids or dataset names.", show_default=False
    ),
]
WorkersOpt = Annotated[int, typer.Option("--workers", "-w", min=1, help="Tasks run in parallel.")]
MaxCostOpt = Annotated[
    float | None,
    typer.Option("--max-cost", min=0, help="Start no new run once this many USD are spent."),
]
ReserveOpt = Annotated[
    float,
    typer.Option(
        "--reserve",
        min=0,
        help="With --max-cost: stop starting runs when less than this many USD remain, leaving "
        "room for runs in flight.",
    ),
]
StopFileOpt = Annotated[
    Path | None,
    typer.Option("--stop-file", help="Start no new run once this file exists."),
]
DetachOpt = Annotated[
    bool,
    typer.Option("--detach", help="Hand the job to the background engine and print its id."),
]
ModelsFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--models", help="The model registry (models.toml) to use.", envvar="DEPTHTUI_MODELS"
    ),
]
RetryErrorsOpt = Annotated[
    bool,
    typer.Option(
        "--retry-errors",
        help="Try again runs whose recorded tries all ended in infrastructure errors.",
    ),
]
AcceptRiskOpt = Annotated[
    bool,
    typer.Option(
        "--accept-risk",
        help="Grade tasks whose tests import or run agent-written code (the agent could forge "
        "its grade); refused otherwise.",
    ),
]


def common_params(
    workers: int,
    max_cost: float | None,
    reserve: float,
    stop_file: Path | None,
    models_file: Path | None,
    retry_errors: bool,
) -> dict[str, Any]:
    return {
        "workers": workers,
        "max_cost": max_cost,
        "reserve": reserve or None,
        "stop_file": str(stop_file.resolve()) if stop_file else None,
        "models_file": str(models_file.resolve()) if models_file else None,
        "retry_errors": retry_errors,
    }


def submit(
    kind: str,
    tasks: list[str],
    params: dict[str, Any],
    db: Path | None,
    detach: bool,
) -> tuple[Store, int, str]:
    """Resolve tasks, store the job, run it (or detach); returns (store, job id, status)."""
    from engine.protocol.common import resolve_tasks
    from engine.protocol.registry import get_kind
    from store.jobs import submit_job

    store = open_store(db)
    resolved = resolve_tasks(store, tasks)
    for error in resolved.errors:
        err_console.print(f"[bold red]✗[/] {error}", highlight=False)
    if not resolved.task_ids:
        fail("no task to run")
    params = {**params, "tasks": resolved.task_ids}
    job_kind = get_kind(kind)
    cli = job_kind.describe(params)
    job_id = submit_job(store, kind, params, cli)
    if detach:
        from engine.jobs.launch import EngineError, ensure_engine

        try:
            pid = ensure_engine(store.path, workers=params.get("workers") or 1)
        except EngineError as exc:
            fail(f"job {job_id} is queued, but no engine could be started: {exc}")
        console.print(
            f"job {job_id} queued ({len(resolved.task_ids)} task(s)); engine pid {pid}. "
            f"Follow it with `depthtui jobs show {job_id}` or in the TUI.",
            highlight=False,
        )
        return store, job_id, "queued"
    from depthtui.progress import JobNotRunnable, run_foreground

    try:
        status = run_foreground(store, job_id, params.get("workers") or 1)
    except JobNotRunnable as exc:
        fail(str(exc))
    return store, job_id, status


def finish(status: str) -> None:
    if status in ("done",):
        return
    raise typer.Exit(0 if status == "queued" else 1)


# --- check ---------------------------------------------------------------------------------------


def check(
    tasks: TasksArg,
    workers: WorkersOpt = 1,
    max_cost: MaxCostOpt = None,
    reserve: ReserveOpt = 0.0,
    stop_file: StopFileOpt = None,
    detach: DetachOpt = False,
    models_file: ModelsFileOpt = None,
    retry_errors: RetryErrorsOpt = False,
    accept_risk: AcceptRiskOpt = False,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Check tasks: the reference solution passes every segment, and doing nothing fails."""
    params = common_params(workers, max_cost, reserve, stop_file, models_file, retry_errors)
    params["accept_risk"] = accept_risk
    store, job_id, status = submit("check", tasks, params, db, detach)
    if status != "queued":
        from depthtui.commands.show import print_check_results

        print_check_results(store, job_id, json_out)
    finish(status)


def register(app: typer.Typer) -> None:
    app.command("check", help=check.__doc__)(check)
