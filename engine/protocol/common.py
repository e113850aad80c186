"""What every job kind shares: turning arguments into tasks, loading a unit's task, building the
run context, running an episode with bounded retries after infrastructure errors, and the
parameters a job is made of."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from engine.agents.loop import EpisodeLimits
from engine.agents.registry import Registry, load_registry
from engine.protocol.episode import EpisodeResult, RunContext, run_episode
from engine.protocol.kinds import UnitContext, UnitResult
from engine.protocol.spec import EpisodeSpec
from engine.sandbox import build_errors
from engine.tasks.importing import import_paths
from engine.tasks.loader import load_task
from engine.tasks.model import Task, TaskError
from store import tasks as task_store
from store import vocab
from store.db import Store

# Tries of one run after infrastructure errors (the first try included).
DEFAULT_TRIES = 3
SEGMENT_TIME_LIMIT_S = 1800.0  # DEPTH: 30 minutes per segment


class ParamError(ValueError):
    """A job parameter that makes no sense; the message names it."""


@dataclass(frozen=True)
class Resolved:
    task_ids: list[str]
    errors: list[str]


def resolve_tasks(store: Store, args: Sequence[str]) -> Resolved:
    """Task ids for command-line arguments: a path (task or dataset folder) is loaded into the
    store first; anything else is a task id (or a folder name that names one task), or a
    dataset name (every task of it)."""
    ids: list[str] = []
    errors: list[str] = []
    paths = [a for a in args if Path(a).exists()]
    if paths:
        imported = import_paths(store, [Path(p) for p in paths])
        ids += [t.id for t in imported.tasks]
        errors += [str(e) for e in imported.errors]
    for arg in args:
        if arg in paths:
            continue
        found = task_store.find_task_ids(store, arg)
        if len(found) == 1:
            ids.append(found[0])
            continue
        in_dataset = [t["id"] for t in task_store.list_tasks(store, dataset=arg)]
        if in_dataset:
            ids += in_dataset
        elif found:
            errors.append(f"{arg}: names several tasks ({', '.join(found[:5])}); use the full id")
        else:
            errors.append(
                f"{arg}: no such path, task id or dataset in the store "
                "(import it with `depthtui tasks import PATH`)"
            )
    unique = list(dict.fromkeys(ids))
    return Resolved(unique, errors)


def load_unit_task(store: Store, task_id: str) -> Task:
    """The task as its folder holds it now; the store row is refreshed when the folder changed
    (the content hash, and so every run key, follows the folder)."""
    row = task_store.get_task(store, task_id)
    if row is None:
        raise TaskError(task_id, "the task is not in the store any more")
    task = load_task(Path(row["source_path"]))
    if task.id != task_id:
        raise TaskError(row["source_path"], f"the folder now loads as {task.id}, not {task_id}")
    if task.content_hash != row["content_hash"]:
        task_store.upsert_task(store, task)
    return task


def check_params(params: dict[str, Any]) -> None:
    """Fail before a job is stored when it names a model or prompt that does not exist (the
    errors name the registry file and the known names)."""
    from engine.agents.prompts import load_prompt

    registry = registry_for(params)
    for model in params.get("models") or []:
        registry.get(model)
    for prompt in [params.get("prompt"), *(params.get("prompts") or [])]:
        if prompt:
            load_prompt(prompt)


# Attempts per run that each kind makes at most (free and episodes: their --attempts).
FIXED_ATTEMPTS = {"ladder": 2, "audit": 2}


def repeat_warnings(kind: str, params: dict[str, Any]) -> list[str]:
    """Launch notes for models whose sampling is deterministic while the job repeats attempts:
    such attempts sample the same reply (the report counts how many came out identical)."""
    from engine.agents.registry import deterministic

    attempts = FIXED_ATTEMPTS.get(kind) or int(params.get("attempts") or 1)
    if attempts < 2:
        return []
    registry = registry_for(params)
    return [
        f"{name}: sampling is deterministic (temperature 0), so its up to {attempts} attempts "
        "per run will likely repeat one another; the report counts identical transcripts"
        for name in params.get("models") or []
        if deterministic(registry.get(name))
    ]


def run_context(unit: UnitContext, registry: Registry) -> RunContext:
    from engine.cache import build_log_dir

    return RunContext(
        store=unit.store,
        registry=registry,
        owner=unit.owner,
        job_id=unit.job_id,
        log_dir=build_log_dir(),
        # Inside an episode only an abort (cancel, pause, shutdown) ends it: the stop file and
        # the cost limits stop new runs (the units check between runs), never a run in flight.
        should_stop=unit.should_abort,
        progress=unit.progress,
        add_cost=unit.add_cost,
        executor=getattr(unit, "executor", None),
    )


def registry_for(params: dict[str, Any]) -> Registry:
    return load_registry(params.get("models_file"))


def episode_limits(params: dict[str, Any], **overrides: Any) -> EpisodeLimits:
    """The limits a job's parameters ask for (every one optional)."""
    values: dict[str, Any] = {}
    for key in (
        "safety_turns",
        "max_tool_calls",
        "max_completion_tokens",
        "max_total_tokens",
        "segment_time_limit_s",
        "command_timeout_s",
    ):
        if params.get(key) is not None:
            values[key] = params[key]
    values.update(overrides)
    return EpisodeLimits(**values)


def run_with_retries(
    ctx: RunContext,
    task: Task,
    spec: EpisodeSpec,
    tries: int = DEFAULT_TRIES,
    retry_errors: bool = False,
    **kwargs: Any,
) -> EpisodeResult:
    """Run `spec`, trying again (as a new run: `retry` + 1) after an infrastructure error, at
    most `tries` times; an agent error or a broken task is never retried (docs/outcomes.md).
    Errored tries stay recorded as such. A rerun reuses every recorded try; with
    `retry_errors`, a run whose recorded tries all errored gets one more fresh try, however
    many were recorded (an earlier `--retry-errors` that errored again recorded more than
    `tries`: counting only to `tries` + 1 reused that one and never ran again)."""
    result: EpisodeResult | None = None
    earlier: list[EpisodeResult] = []
    fresh = 0  # tries run (not reused) by this call
    r = 0
    while r < tries or (retry_errors and not fresh):
        if result is not None:
            earlier.append(result)
        result = run_episode(ctx, task, replace(spec, retry=r), **kwargs)
        fresh += not result.reused
        if result.status != "done" or result.outcome not in vocab.RETRIED:
            break
        if build_errors.NOT_RETRIED in (result.error_detail or "") and not (
            result.reused and retry_errors
        ):
            break  # a build that fails the same way every time (docs/builds.md)
        r += 1
    assert result is not None
    return replace(result, earlier=tuple(earlier))


@dataclass
class Tally:
    """What a unit ran: episodes run and reused, and their cost."""

    run: int = 0
    reused: int = 0
    cost: float = 0.0

    def add(self, result: EpisodeResult) -> EpisodeResult:
        """Count every try of the run (`result.earlier` too), not only the last one."""
        for one in (*result.earlier, result):
            self.run += not one.reused
            self.reused += one.reused
            self.cost += one.cost_usd
        return result

    def unit(self, name: str, ok: bool, summary: dict[str, Any], error: str = "") -> UnitResult:
        return UnitResult(name, ok, self.run, self.reused, self.cost, summary, error)


def task_units(store: Store, params: dict[str, Any]) -> list[str]:
    tasks = params.get("tasks")
    if not tasks:
        raise ParamError("tasks: the job names no task")
    return list(tasks)


OnEpisode = Callable[[EpisodeResult], None]
