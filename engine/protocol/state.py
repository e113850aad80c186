"""What one episode's body holds while it runs, shared by its steps (setup.py, segments.py,
seal.py, finish.py): the task and spec, the sandbox and the oracle once they exist, what was
learned so far, and where records and progress go."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.agents.base import Agent
from engine.agents.loop import Conversation
from engine.oracle import faults
from engine.oracle.contract import Contract
from engine.oracle.latch import CheckResult, Oracle
from engine.protocol.execute import EpisodeEnv, Recorder
from engine.protocol.kinds import ProgressEvent
from engine.protocol.spec import EpisodeSpec
from engine.sandbox.base import Sandbox
from engine.tasks.model import Task


@dataclass
class EpisodeState:
    """What the runner learns while an episode runs."""

    episode_id: int
    planted: list[str] = field(default_factory=list)
    fault: faults.FaultPlan | None = None
    events_by_call: dict[int, list[dict]] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    conv: Conversation | None = None

    def time(self, phase: str, seconds: float) -> None:
        self.timings[phase] = round(self.timings.get(phase, 0.0) + seconds, 4)


# A probe the validity audit runs between the agent and the final check (delete a planted file,
# mutate an output, ...): it gets the sandbox and the oracle, as root.
AfterAgent = Callable[[Sandbox, Oracle, EpisodeState], None]


class Interrupted(Exception):
    """A cancel or pause reached the episode: it is marked interrupted, never finished."""


class EpisodeRun:
    """One episode's body as its steps share it."""

    def __init__(
        self,
        env: EpisodeEnv,
        task: Task,
        spec: EpisodeSpec,
        state: EpisodeState,
        contract: Contract | None,
        recorder: Recorder,
    ) -> None:
        self.env, self.task, self.spec, self.state = env, task, spec, state
        self.contract = contract
        self.rec = recorder
        self.eid = state.episode_id
        self.agent: Agent | None = None
        self.sandbox: Sandbox | None = None
        self.oracle: Oracle | None = None
        self.final: CheckResult | None = None
        # The graded outputs' final state (engine/verify/outputs.py); None until recorded.
        self.graded_outputs: dict[str, dict[str, Any]] | None = None
        self.solution_uploaded = False
        self.image_tag: str | None = None  # the task's own image: the tests without the agent

    def phase(self, name: str) -> Timer:
        """Time a phase of the episode (state.timings)."""
        return Timer(self.state, name)

    def event(self, phase: str, **kw: Any) -> None:
        self.env.progress(ProgressEvent(self.task.id, phase, self.eid, self.spec.label, **kw))

    def check_stop(self) -> None:
        reason = self.env.should_stop()
        if reason:
            raise Interrupted(reason)


class Timer:
    def __init__(self, state: EpisodeState, name: str) -> None:
        self.state, self.name = state, name

    def __enter__(self) -> Timer:
        self.started = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        self.state.time(self.name, time.monotonic() - self.started)
