"""The running verbs: check, validate, free, ladder, audit, episodes.

Each resolves its tasks (paths are imported first), stores a job whose parameters are exactly
what was asked, then runs it here with progress bars — or, with --detach, leaves it to the
background engine and prints its id (depthtui/commands/submit.py). A rerun of a finished
command reuses every completed episode and says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from depthtui.commands.common import DbOption, JsonOption, open_store
from depthtui.commands.executor_opts import with_executor
from depthtui.commands.submit import finish, launch, submit
from engine.jobs.params import (
    AuditParams,
    CheckParams,
    EpisodesParams,
    FreeParams,
    LadderParams,
    ReplayParams,
    ValidateParams,
)
from store import vocab

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
        help="validate and episodes: admit tasks whose tests import or run agent-written code "
        "to the recovery bench (excluded otherwise). Every verb grades such tasks as their own "
        "harness does and marks each verdict forgeable by agent code (see `report "
        "--exclude-forgeable`).",
    ),
]


def common_params(
    workers: int,
    max_cost: float | None,
    reserve: float,
    stop_file: Path | None,
    models_file: Path | None,
    retry_errors: bool,
    accept_risk: bool,
) -> dict[str, Any]:
    """The options every task-running verb shares, as JobParams fields."""
    return {
        "workers": workers,
        "max_cost": max_cost,
        "reserve": reserve or None,
        "stop_file": str(stop_file.resolve()) if stop_file else None,
        "models_file": str(models_file.resolve()) if models_file else None,
        "retry_errors": retry_errors,
        "accept_risk": accept_risk,
    }


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
    """Check tasks: the reference solution passes every segment, and doing nothing fails.
    Exits 1 when any task does not check out."""
    common = common_params(
        workers, max_cost, reserve, stop_file, models_file, retry_errors, accept_risk
    )
    store, job_id, status = submit(CheckParams(**common), tasks, db, detach)
    if status != "queued":
        from depthtui.commands.show import print_check_results

        rows = print_check_results(store, job_id, json_out)
        finish(status)
        if not all(r["ok"] for r in rows):
            raise typer.Exit(1)  # a task that does not check out fails the command
    finish(status)


# --- validate ------------------------------------------------------------------------------------

PlantedOpt = Annotated[
    str,
    typer.Option(
        "--planted",
        help="Planted personal files: full (beside every input and in ~/side_project) or "
        "sibling (only in the input folders' parents and ~/side_project).",
    ),
]


def validate(
    tasks: TasksArg,
    planted: PlantedOpt = "full",
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
    """Audit task validity and freeze each task's contract: no-op fails; the reference passes
    twice with the same changes and tests; a planted deletion is caught; the tests reject
    mutated outputs; and which fault families (bite, repair, forgery) are usable. Exits 1 when
    any task is not valid."""
    common = common_params(
        workers, max_cost, reserve, stop_file, models_file, retry_errors, accept_risk
    )
    params = ValidateParams(**common, planted=planted)
    store, job_id, status = submit(params, tasks, db, detach)
    if status != "queued":
        from depthtui.commands.show import print_validate_results

        rows = print_validate_results(store, job_id, json_out)
        finish(status)
        if not all(r["valid"] for r in rows):
            raise typer.Exit(1)  # an invalid (or unvalidated) task fails the command, as check
    finish(status)


# --- free, ladder, audit --------------------------------------------------------------------------

ModelsOpt = Annotated[
    list[str],
    typer.Option(
        "--model",
        "-m",
        help="A model from the registry (repeatable; for ladder/audit the first is the "
        "measurement model that makes the uncapped runs).",
        show_default=False,
    ),
]
PromptOpt = Annotated[
    str, typer.Option("--prompt", help="System prompt by name (see prompts/) or a .txt path.")
]


def free(
    tasks: TasksArg,
    model: ModelsOpt,
    attempts: Annotated[int, typer.Option("--attempts", min=1, help="Runs per model.")] = 2,
    prompt: PromptOpt = "general",
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
    """Run tasks with no stated turn cap (150-turn safety ceiling): turn counts N and pass rates.
    The ladder reuses these runs."""
    common = common_params(
        workers, max_cost, reserve, stop_file, models_file, retry_errors, accept_risk
    )
    params = FreeParams(**common, models=tuple(model), attempts=attempts, prompt=prompt)
    store, job_id, status = submit(params, tasks, db, detach)
    if status != "queued":
        from depthtui.commands.show import print_report_for_job

        print_report_for_job(store, job_id, json_out)
    finish(status)


CapsOpt = Annotated[
    list[int] | None,
    typer.Option("--cap", help="Turn caps to try (repeatable); default 1 2 3 5 10 20 40 80."),
]
FaultOpt = Annotated[
    str | None,
    typer.Option(
        "--fault",
        help="Measure under this fault family (recovery depth): perm_denied, moved_input or "
        "blocking_fifo. Needs a validated task.",
    ),
]
SearchOpt = Annotated[
    str,
    typer.Option(
        "--search",
        help="How caps below N are searched: 'protocol' (DEPTH's: increasing order, two runs "
        "per cap) or 'bisect' (fewer runs; stored and reported as its own estimator). See "
        "docs/protocol.md.",
    ),
]


def _measure(
    params: LadderParams | AuditParams,
    tasks: list[str],
    db: Path | None,
    detach: bool,
    json_out: bool,
) -> None:
    store, job_id, status = submit(params, tasks, db, detach)
    if status != "queued":
        from depthtui.commands.show import print_report_for_job

        print_report_for_job(store, job_id, json_out)
    finish(status)


def _caps(cap: list[int] | None) -> tuple[int, ...] | None:
    return tuple(sorted(set(cap))) if cap else None


def ladder(
    tasks: TasksArg,
    model: ModelsOpt,
    cap: CapsOpt = None,
    prompt: PromptOpt = "general",
    fault: FaultOpt = None,
    search: SearchOpt = "protocol",
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
    """Measure depth D with stated turn caps (DEPTH's protocol, docs/protocol.md): two uncapped
    runs of the first model give N; caps below N are tried in increasing order; later models try
    only caps below the best estimate. D = the smallest estimate; >80 when passed only without a
    cap. A rerun replaces the task's estimates (no model left over from another list)."""
    common = common_params(
        workers, max_cost, reserve, stop_file, models_file, retry_errors, accept_risk
    )
    params = LadderParams(
        **common, models=tuple(model), caps=_caps(cap), prompt=prompt, fault=fault, search=search
    )
    _measure(params, tasks, db, detach, json_out)


def audit(
    tasks: TasksArg,
    model: ModelsOpt,
    cap: CapsOpt = None,
    prompt: PromptOpt = "general",
    fault: FaultOpt = None,
    search: SearchOpt = "protocol",
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
    """The depth protocol on existing single-instruction datasets, reported per dataset folder
    (30-minute limit per task)."""
    common = common_params(
        workers, max_cost, reserve, stop_file, models_file, retry_errors, accept_risk
    )
    params = AuditParams(
        **common, models=tuple(model), caps=_caps(cap), prompt=prompt, fault=fault, search=search
    )
    _measure(params, tasks, db, detach, json_out)


# --- episodes -------------------------------------------------------------------------------------


def episodes(
    tasks: TasksArg,
    model: ModelsOpt,
    faults: Annotated[
        list[str] | None,
        typer.Option(
            "--faults",
            help="clean, train (perm_denied + moved_input), heldout (blocking_fifo), mix (all), "
            "or one family; repeatable. Default: clean.",
        ),
    ] = None,
    attempts: Annotated[int, typer.Option("--attempts", min=1, help="Runs per arm.")] = 1,
    budget: Annotated[
        int | None,
        typer.Option("--budget", min=1, help="A command budget stated to the agent."),
    ] = None,
    prompt: Annotated[
        list[str] | None,
        typer.Option("--prompt", help="Prompt arms to compare (repeatable). Default: general."),
    ] = None,
    planted: PlantedOpt = "full",
    max_tool_calls: Annotated[
        int, typer.Option("--max-tool-calls", min=1, help="Commands after which it ends.")
    ] = 16,
    max_completion_tokens: Annotated[
        int, typer.Option("--max-completion-tokens", min=1, help="Generated tokens, in all.")
    ] = 6144,
    max_total_tokens: Annotated[
        int, typer.Option("--max-total-tokens", min=1, help="The conversation's size limit.")
    ] = 8192,
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
    """Fault episodes (the recovery bench): safe success, collateral damage, recovery after an
    observed fault, fault_cleared, per model, prompt arm and fault family. Tasks are validated
    first when they have no contract."""
    common = common_params(
        workers, max_cost, reserve, stop_file, models_file, retry_errors, accept_risk
    )
    params = EpisodesParams(
        **common,
        models=tuple(model),
        faults=tuple(faults or (vocab.NO_FAULT,)),
        attempts=attempts,
        budget=budget,
        prompts=tuple(prompt or ("general",)),
        planted=planted,
        max_tool_calls=max_tool_calls,
        max_completion_tokens=max_completion_tokens,
        max_total_tokens=max_total_tokens,
    )
    store, job_id, status = submit(params, tasks, db, detach)
    if status != "queued":
        from depthtui.commands.show import print_report_for_job

        print_report_for_job(store, job_id, json_out)
    finish(status)


# --- replay ---------------------------------------------------------------------------------------


def replay(
    episode: Annotated[
        list[int], typer.Argument(help="Episode ids to replay.", show_default=False)
    ],
    workers: WorkersOpt = 1,
    detach: DetachOpt = False,
    accept_risk: AcceptRiskOpt = False,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Re-execute stored episodes' commands turn by turn in a fresh environment and grade them
    again, to reproduce a verdict (a replay that disagrees shows up in the triage queue of
    suspected verifier false positives)."""
    store = open_store(db)
    params = ReplayParams(episodes=tuple(episode), workers=workers, accept_risk=accept_risk)
    store, job_id, status = launch(store, params, detach)
    if status != "queued":
        from depthtui.commands.show import print_replay_results

        print_replay_results(store, job_id, json_out)
    finish(status)


def register(app: typer.Typer) -> None:
    for verb in (check, validate, free, ladder, audit, episodes, replay):
        app.command(verb.__name__, help=" ".join(verb.__doc__.split()))(with_executor(verb))
