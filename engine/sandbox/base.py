"""What the rest of the engine may ask of a sandbox: the contract between the agent loop, the
oracle, the verifier and the Docker implementation.

The agent only ever reaches the sandbox through `run` (its bash tool). Everything else is a harness
operation done as root, outside the agent's shell, which the agent can neither see nor influence.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol


class SandboxError(RuntimeError):
    """An infrastructure failure (engine unreachable, container gone, build failed). Callers turn
    it into an outcome's error_kind/error_detail; it is never the model's fault."""

    def __init__(self, kind: str, detail: str) -> None:
        self.kind = kind
        self.detail = detail
        super().__init__(f"{kind}: {detail}")


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


class Sandbox(Protocol):
    """One running environment for one episode."""

    @property
    def container_id(self) -> str: ...

    @property
    def home(self) -> str: ...

    def run(self, command: str, timeout: float | None = None) -> CallResult:
        """Run one agent command in the persistent shell (cwd and variables carry over)."""
        ...

    def exec_root(
        self, argv: list[str], stdin: bytes | None = None, timeout: float = 60.0
    ) -> ExecResult:
        """Run a harness command as root, not in the agent's shell."""
        ...

    def put_path(self, host_path: Path, dest: str, owner: str = "root") -> None:
        """Copy a host file or folder to `dest` inside the container (created as needed)."""
        ...

    def put_bytes(self, dest: str, data: bytes, mode: int = 0o644, owner: str = "root") -> None: ...

    def get_bytes(self, path: str) -> bytes:
        """Read one file from the container (raises SandboxError if it is missing)."""
        ...

    def rootfs(self) -> Path | None:
        """The container's merged filesystem on this host when the engine is local and we may read
        it as root; None otherwise (callers then fall back to the daemon's tar stream)."""
        ...

    def kill_agent_processes(self) -> None:
        """Kill every process of the agent user (end of episode; before the final check)."""
        ...

    def snapshot(self) -> str:
        """Commit the container's filesystem to an image and return its id (for the verifier)."""
        ...

    def close(self) -> None:
        """Stop and remove the container; idempotent."""
        ...
