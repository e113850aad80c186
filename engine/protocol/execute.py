"""The seam between deciding an episode and running it.

`run_episode` (engine/protocol/episode.py) claims a run in the store on the driver, then hands
an `EpisodeWork` to an `Executor`, which runs the episode's body (image, sandbox, oracle, agent,
verifier) somewhere and reports every record through a `Recorder`. The local executor runs the
body in the calling thread with a `StoreRecorder`; the Ray executor (engine/jobs/ray_executor.py)
runs it on a cluster node whose recorder forwards each record to the driver, which applies it
to a `StoreRecorder`. So the driver alone writes the store, one transaction per record (a turn
is one record), whichever executor ran the episode (docs/ray.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from engine.agents.registry import ModelConfig
from engine.oracle.contract import Contract
from engine.protocol.kinds import ProgressEvent
from engine.protocol.spec import EpisodeSpec
from engine.tasks.model import Task
from store import episodes as ep
from store import protocol as sp
from store.db import Store


class Recorder(Protocol):
    """Where a running episode's records go. Each call is one record (one store transaction
    where the store is written)."""

    def update_running(self, **fields: Any) -> None: ...

    def set_fault_record(self, **fields: Any) -> None: ...

    def add_segment_run(self, idx: int, message: str, **fields: Any) -> None: ...

    def finish_segment_run(self, idx: int, **fields: Any) -> None: ...

    def add_test_results(self, results: list[dict], segment_idx: int = 0) -> None: ...

    def record_turn(
        self, turn: dict, calls: list[dict], outputs: dict[int, bytes], events: list[dict]
    ) -> None: ...

    def add_oracle_events(self, events: list[dict]) -> None: ...

    def interrupt(self, detail: str) -> None: ...


RECORDS = (
    "update_running",
    "set_fault_record",
    "add_segment_run",
    "finish_segment_run",
    "add_test_results",
    "record_turn",
    "add_oracle_events",
    "interrupt",
)


@dataclass(frozen=True)
class StoreRecorder:
    """Writes one episode's records to the store, as the owner that claimed it."""

    store: Store
    episode_id: int
    owner: str

    def update_running(self, **fields: Any) -> None:
        sp.update_running_episode(self.store, self.episode_id, self.owner, **fields)

    def set_fault_record(self, **fields: Any) -> None:
        ep.set_fault_record(self.store, self.episode_id, **fields)

    def add_segment_run(self, idx: int, message: str, **fields: Any) -> None:
        ep.add_segment_run(self.store, self.episode_id, idx, message, **fields)

    def finish_segment_run(self, idx: int, **fields: Any) -> None:
        ep.finish_segment_run(self.store, self.episode_id, idx, **fields)

    def add_test_results(self, results: list[dict], segment_idx: int = 0) -> None:
        ep.add_test_results(self.store, self.episode_id, results, segment_idx=segment_idx)

    def record_turn(
        self, turn: dict, calls: list[dict], outputs: dict[int, bytes], events: list[dict]
    ) -> None:
        ep.record_turn(self.store, self.episode_id, turn, calls, outputs, events)

    def add_oracle_events(self, events: list[dict]) -> None:
        ep.add_oracle_events(self.store, self.episode_id, events)

    def interrupt(self, detail: str) -> None:
        sp.interrupt_episode(self.store, self.episode_id, self.owner, detail)


def apply_record(recorder: Recorder, name: str, args: tuple, kwargs: dict[str, Any]) -> None:
    """Replay one forwarded record (`name` is one of RECORDS) on `recorder`."""
    if name not in RECORDS:
        raise ValueError(f"not a recorder method: {name!r}")
    getattr(recorder, name)(*args, **kwargs)


@dataclass(frozen=True)
class EpisodeWork:
    """Everything an episode's body needs, decided on the driver: picklable, no store."""

    task: Task
    spec: EpisodeSpec  # its limits already carry the cap, the budget and the model's limits
    model: ModelConfig
    prompt_text: str
    episode_id: int
    job_id: int | None
    log_dir: Path
    contract: Contract | None = None  # the task's validated contract, None before validate
    replay_turns: Sequence[Any] | None = None
    after_agent: Callable[..., None] | None = None


@dataclass(frozen=True)
class EpisodeBody:
    """What an executor returns: the outcome columns (None: interrupted) and the phase timings.
    `lost` says why the executor lost the episode mid-run (a cluster node died): the driver
    marks it interrupted and runs it again; it is never the model's failure."""

    outcome: dict[str, Any] | None
    timings: dict[str, float] = field(default_factory=dict)
    lost: str | None = None


class Executor(Protocol):
    """Runs episode bodies. `should_stop` is polled between turns; `progress` gets events."""

    name: str

    def run(
        self,
        work: EpisodeWork,
        recorder: Recorder,
        should_stop: Callable[[], str | None],
        progress: Callable[[ProgressEvent], None],
    ) -> EpisodeBody: ...


@dataclass(frozen=True)
class EpisodeEnv:
    """What an episode's body asks of where it runs (not the store: that is the recorder's)."""

    job_id: int | None
    log_dir: Path
    should_stop: Callable[[], str | None]
    progress: Callable[[ProgressEvent], None]
