"""Which executor runs episode bodies: a runtime setting of the runner and the engine (the
`--executor local|ray` and `--ray-address` options), never a stored job parameter, so a job
stored on one machine can be resumed by an engine that runs its episodes on a cluster."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importing the episode runner costs what the CLI and TUI need not pay
    from engine.protocol.execute import Executor

EXECUTORS = ("local", "ray")
# The options that name the choice, on the running verbs and on the engine process.
EXECUTOR_FLAG = "--executor"
RAY_ADDRESS_FLAG = "--ray-address"


@dataclass(frozen=True)
class ExecutorChoice:
    kind: str = "local"  # local | ray
    ray_address: str | None = None  # None with ray: a local Ray instance, or RAY_ADDRESS

    def __post_init__(self) -> None:
        if self.kind not in EXECUTORS:
            raise ValueError(f"executor: expected one of {', '.join(EXECUTORS)}, got {self.kind!r}")
        if self.ray_address and self.kind != "ray":
            raise ValueError(f"{RAY_ADDRESS_FLAG}: only with {EXECUTOR_FLAG} ray")

    def argv(self) -> list[str]:
        """The same choice as command-line options (for the engine process)."""
        out = [EXECUTOR_FLAG, self.kind]
        return out + ([RAY_ADDRESS_FLAG, self.ray_address] if self.ray_address else [])


LOCAL_CHOICE = ExecutorChoice()
_made: dict[ExecutorChoice, Executor] = {}
_lock = threading.Lock()


def make_executor(choice: ExecutorChoice) -> Executor:
    """The executor for `choice`, one per process (a Ray connection is made once)."""
    if choice.kind == "local":
        from engine.protocol.episode import LOCAL

        return LOCAL
    with _lock:
        if choice not in _made:
            from engine.jobs.ray_executor import RayExecutor

            _made[choice] = RayExecutor(choice.ray_address)
        return _made[choice]


def executor_problem(choice: ExecutorChoice) -> str | None:
    """Why episodes cannot start now, or None: Docker here for the local executor; for Ray, a
    cluster that cannot be reached or offers no `docker` resource (no node with Docker)."""
    if choice.kind == "local":
        from engine.jobs.containers import docker_problem

        return docker_problem()
    from engine.jobs.ray_executor import DOCKER_RESOURCE, RayUnavailable

    try:
        slots = make_executor(choice).docker_slots()  # type: ignore[attr-defined]
    except RayUnavailable as exc:
        return str(exc)
    if slots <= 0:
        return f"no node of the Ray cluster offers the '{DOCKER_RESOURCE}' resource (docs/ray.md)"
    return None
