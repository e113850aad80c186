"""What the rest of the engine may ask of a sandbox: the contract between the agent loop, the
oracle, the verifier and the Docker implementation.

The agent only ever reaches the sandbox through `run` (its bash tool). Everything else is a harness
operation done as root, outside the agent's shell, which the agent can neither see nor influence.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class SandboxError(RuntimeError):
    """An infrastructure failure (engine unreachable, container gone, build failed). Callers turn
    it into an outcome's error_kind/error_detail; it is never the model's fault, except as the
    subclass below (whose kind store/vocab.py lists among the agent's)."""

    def __init__(self, kind: str, detail: str) -> None:
        self.kind = kind
        self.detail = detail
        super().__init__(f"{kind}: {detail}")


class ShellForgery(SandboxError):
    """A command of the agent forged the shell's end mark (engine/sandbox/framing.py): what the
    shell reported since cannot be trusted, so the episode ends as the agent's failure."""

    KIND = "shell_forgery"

    def __init__(self, detail: str) -> None:
        super().__init__(self.KIND, detail)


@dataclass(frozen=True)
class CallResult:
    """One command run in the agent's persistent shell."""

    command: str
    # What the command printed (stdout and stderr merged), bounded: when it printed more than the
    # store keeps, this is head + tail and `output_bytes` says how much there really was.
    output: bytes
    output_bytes: int
    exit_code: int | None
    timed_out: bool
    duration_s: float
    # True when the shell had to be replaced (timeout, `exit`, killed); `note` says what was lost.
    shell_restarted: bool = False
    note: str = ""
    # The exact text the model is shown: capped output, then `[exit code N]` or `[timed out]`,
    # then the note. The agent loop appends the budget line; nothing else rewrites it.
    observation: str = ""


@dataclass(frozen=True)
class ExecResult:
    """A harness command run as root outside the agent's shell."""

    exit_code: int
    # stdout and stderr merged, in the order they arrived.
    output: bytes
    # The same, apart: parse `stdout` as data without the warnings a command prints on stderr.
    stdout: bytes = b""
    stderr: bytes = b""


class Freezing(Protocol):
    """The container's cgroup freezer as the episode's end uses it (engine/sandbox/freezer.py)."""

    def held(self, best_effort: bool = False) -> AbstractContextManager[bool]:
        """Frozen for the block (nested holds count); with `best_effort`, a container that would
        not freeze runs on and the block is told False."""
        ...

    def thawed(self) -> AbstractContextManager[None]:
        """Running for the block however deep it is held frozen, frozen again after."""
        ...


class Sandbox(Protocol):
    """One running environment for one episode."""

    # The agent's uid and gid as the container has them (the image's account may differ from
    # what the task says).
    agent_uid: int
    agent_gid: int
    # Whether this host can see and signal the container's processes (and so freeze it).
    host_kill: bool
    freezer: Freezing

    @property
    def container_id(self) -> str: ...

    @property
    def home(self) -> str: ...

    def run(self, command: str, timeout: float | None = None) -> CallResult:
        """Run one agent command in the persistent shell (cwd and variables carry over).
        Raises ShellForgery when the shell shows that an earlier command forged its end mark."""
        ...

    def probe_shell(self) -> None:
        """After a segment's last call: one frame through the shell that runs nothing (not the
        agent's), so that a forged end mark on that call is caught too (raises ShellForgery)."""
        ...

    def exec_root(
        self, argv: list[str], stdin: bytes | None = None, timeout: float = 60.0
    ) -> ExecResult:
        """Run a harness command as root, not in the agent's shell."""
        ...

    def exec_as(
        self,
        user: str,
        argv: list[str],
        stdin: bytes | None = None,
        timeout: float = 60.0,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
    ) -> ExecResult:
        """Run a harness command as `user` (a uid or name) in its own exec, not the agent's
        shell (a segment's setup.sh and healthcheck)."""
        ...

    def put_path(
        self, host_path: Path, dest: str, owner: str = "root", readable: bool = False
    ) -> None:
        """Copy a host file or folder to `dest` inside the container (created as needed);
        `readable` makes it readable by everyone whatever the host modes were."""
        ...

    def put_bytes(self, dest: str, data: bytes, mode: int = 0o644, owner: str = "root") -> None: ...

    def get_bytes(self, path: str) -> bytes:
        """Read one file from the container (raises SandboxError if it is missing)."""
        ...

    def rootfs(self) -> Path | None:
        """The container's merged filesystem on this host when the engine is local and we may read
        it as root; None otherwise (callers then fall back to the daemon's tar stream)."""
        ...

    def upper(self) -> Path | None:
        """The container's overlay upper folder on this host (what the container changed); None
        where it cannot be read here (a remote engine, another storage driver)."""
        return None

    def kill_agent_processes(self) -> list[tuple[int, str]]:
        """Kill every process of the agent user (end of episode; before the final check); the
        (pid, name) of each one killed."""
        ...

    def over_limits(self) -> tuple[str, str] | None:
        """(error kind, reason) when the container is over its storage or object limit (it is
        then never committed); None within them."""
        ...

    def snapshot(self) -> str:
        """Commit the container's filesystem to an image and return its id (for the verifier)."""
        ...

    def remove_snapshot(self, image_id: str) -> bool:
        """Remove one snapshot image of this sandbox; False when it was already gone."""
        ...

    def close(self, remove_snapshots: bool = False) -> None:
        """Stop and remove the container (and, if asked, its snapshot images); idempotent."""
        ...
