"""What a job is made of, as seen by whoever runs jobs (the foreground CLI or the engine).

A job of some kind (check, validate, free, ladder, audit, episodes) is split into units, one per
task; units run in parallel on a worker pool, the episodes of one unit one after another (the
ladder must see a result before it decides the next run). A unit is resumable: completed episodes
are looked up by run key, so running a unit again after a crash only runs what is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from store.db import Store


@dataclass(frozen=True)
class ProgressEvent:
    """A step of an episode, for progress bars and the live TUI. Not stored: the store rows are
    the record; events only make the foreground display lively."""

    unit: str  # task id
    phase: str  # image | start | plant | baseline | agent | verify | done | reused | error | ...
    episode_id: int | None = None
    label: str = ""  # e.g. "oracle", "model-a cap 5 #1"
    turn: int | None = None
    cap: int | None = None
    detail: str = ""


@dataclass(frozen=True)
class UnitResult:
    unit: str
    ok: bool  # False when the unit could not finish (infrastructure), not when a model failed
    episodes_run: int = 0
    episodes_reused: int = 0
    cost_usd: float = 0.0
    summary: dict[str, Any] = field(default_factory=dict)
    error: str = ""


class UnitContext(Protocol):
    """What a unit may ask of whoever runs it."""

    store: Store
    job_id: int | None
    params: dict[str, Any]
    owner: str

    def should_stop(self) -> str | None:
        """A reason to start no new episode (cancelled, paused, stop file, cost limit), or None."""
        ...

    def should_abort(self) -> str | None:
        """A reason to end the episodes in flight too (cancelled, paused, shutdown), or None."""
        ...

    def progress(self, event: ProgressEvent) -> None: ...

    def add_cost(self, usd: float) -> None:
        """Count money spent, for --max-cost/--reserve and the job's cost column."""
        ...


@dataclass(frozen=True)
class JobKind:
    name: str
    # The units of a job from its parameters (resolves task paths/ids; may import tasks).
    units: Callable[[Store, dict[str, Any]], list[str]]
    run_unit: Callable[[UnitContext, str], UnitResult]
    # (The equivalent command line of a job is its parameters' own: engine/jobs/params.py.)
