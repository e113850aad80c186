"""The normalized task: what every loader produces and every other part of the engine reads.

Plain frozen data. Paths are host paths into the task folder; nothing here is copied into an
image until the sandbox decides what the agent may see (privileged files never are).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

TaskFormat = Literal["harbor", "endless", "endless-native", "depthtui"]
VerifierKind = Literal["pytest", "harbor"]
RewardStrategy = Literal["mean", "final"]

# Endless Terminals and the recovery bench: the agent is uid 1000 owning /home/user.
DEFAULT_USER = "user"
DEFAULT_UID = 1000
DEFAULT_HOME = "/home/user"


class TaskError(ValueError):
    """A task folder that cannot be loaded. The message names the file, the field and what was
    expected, so a user can fix the folder without reading our code."""

    # The task folder the error is about (set by load_tasks; `path` may be a file inside it).
    folder: Path | None = None

    def __init__(self, path: Path | str, message: str, field: str | None = None) -> None:
        self.path = Path(path)
        self.field = field
        self.reason = message
        where = f"{self.path}" + (f": field '{field}'" if field else "")
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Healthcheck:
    command: str
    interval_sec: float = 5.0
    timeout_sec: float = 30.0
    retries: int = 3


@dataclass(frozen=True)
class Segment:
    """One instruction the agent is given, with what grades it."""

    name: str
    instruction: str
    # Files uploaded to /tests for the verifier, by their name there (never visible to the agent).
    # A step's own tests/ files override the task's shared tests/ files of the same name.
    tests: dict[str, Path]
    # The reference solution: solve.sh's text, and the folder it lives in (uploaded to /solution).
    solution_script: str | None
    solution_dir: Path | None
    # Files copied into the working directory before the segment starts, and its setup.sh.
    workdir_dir: Path | None = None
    setup_script: Path | None = None
    agent_timeout_sec: float | None = None
    verifier_timeout_sec: float = 600.0
    # Harbor's gate: a float gates the 'reward' key; a table gates each key.
    min_reward: float | dict[str, float] | None = None
    healthcheck: Healthcheck | None = None
    verifier_env: dict[str, str] = field(default_factory=dict)
    solution_env: dict[str, str] = field(default_factory=dict)

    @property
    def work(self) -> int | None:
        """W of this segment; None when the task ships no reference solution."""
        return None if self.solution_script is None else count_work(self.solution_script)


@dataclass(frozen=True)
class Environment:
    """How to get the agent's image: build `context_dir` with its Dockerfile, or use `image`.

    `dockerfile_text` is a Dockerfile the loader generated (from an Apptainer container.def); when
    set it is used instead of `dockerfile`.
    """

    context_dir: Path | None
    dockerfile: Path | None
    image: str | None = None
    dockerfile_text: str | None = None
    build_timeout_sec: float = 600.0
    env: dict[str, str] = field(default_factory=dict)
    # Files in the build context that must never enter the image (task.json's truth, tests).
    private_files: tuple[str, ...] = ()
    allow_internet: bool = False
    # Harbor's [environment.healthcheck]: must pass after the container starts, before any
    # segment (a step's own healthcheck, on its Segment, runs in addition).
    healthcheck: Healthcheck | None = None


@dataclass(frozen=True)
class Limits:
    cpus: float = 1.0
    memory_mb: int = 2048
    pids: int = 256
    storage_mb: int | None = None
    command_timeout_sec: float = 30.0
    # Per-task agent time limit (single-segment tasks); None = no limit beyond the protocol's.
    agent_timeout_sec: float | None = None
    verifier_timeout_sec: float = 600.0


@dataclass(frozen=True)
class Task:
    id: str
    dataset: str
    format: TaskFormat
    source_path: Path
    content_hash: str
    segments: tuple[Segment, ...]
    environment: Environment
    limits: Limits
    verifier_kind: VerifierKind
    agent_user: str = DEFAULT_USER
    agent_uid: int = DEFAULT_UID
    workdir: str = DEFAULT_HOME
    home: str = DEFAULT_HOME
    name: str = ""
    description: str = ""
    reward_strategy: RewardStrategy = "mean"
    metadata: dict = field(default_factory=dict)
    # Things a user should know but that do not stop the task from loading.
    warnings: tuple[str, ...] = ()
    # What one offline container cannot give the task ("needs a GUI (...)"; engine/tasks/needs.py):
    # it loads, but cannot be measured here.
    needs: tuple[str, ...] = ()

    @property
    def multi_segment(self) -> bool:
        return len(self.segments) > 1

    @property
    def work(self) -> int | None:
        """W summed over segments; None when any segment lacks a reference solution."""
        parts = [s.work for s in self.segments]
        return None if any(w is None for w in parts) else sum(parts)

    @property
    def instruction(self) -> str:
        return self.segments[0].instruction


def count_work(script: str) -> int:
    """Work W of one reference solution: lines that are neither blank nor a shell comment
    (a shebang counts as a comment). The DEPTH paper's rule, kept literal so figures compare."""
    return sum(1 for line in script.splitlines() if line.strip() and not line.strip().startswith("#"))
