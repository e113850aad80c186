"""Fixtures for the agent tests: a small fake Sandbox (a unit-test boundary; the integration
tests use real containers) and helpers to build model configs for the scripted server."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from engine.agents.registry import ModelConfig, Price, Sampling
from engine.sandbox.base import CallResult, ExecResult, SandboxError


@dataclass
class FakeSandbox:
    """Answers every command with `ran: <command>` and exit code 0, and remembers what it ran.
    `outputs` maps a command to (output, exit code); `fail_on` raises SandboxError for it."""

    outputs: dict[str, tuple[str, int]] = field(default_factory=dict)
    fail_on: str | None = None
    ran: list[tuple[str, float | None]] = field(default_factory=list)

    @property
    def container_id(self) -> str:
        return "fake"

    @property
    def home(self) -> str:
        return "/home/user"

    def run(self, command: str, timeout: float | None = None) -> CallResult:
        if command == self.fail_on:
            raise SandboxError("infrastructure", "the container went away")
        self.ran.append((command, timeout))
        output, code = self.outputs.get(command, (f"ran: {command}\n", 0))
        return CallResult(
            command=command,
            output=output.encode(),
            output_bytes=len(output.encode()),
            exit_code=code,
            timed_out=False,
            duration_s=0.001,
            observation=f"{output}[exit code {code}]",
        )

    def exec_root(self, argv, stdin=None, timeout=60.0) -> ExecResult:
        return ExecResult(0, b"")

    def put_path(self, host_path: Path, dest: str, owner: str = "root") -> None:
        pass

    def put_bytes(self, dest, data, mode=0o644, owner="root") -> None:
        pass

    def get_bytes(self, path: str) -> bytes:
        raise SandboxError("missing", path)

    def rootfs(self) -> Path | None:
        return None

    def kill_agent_processes(self) -> None:
        pass

    def snapshot(self) -> str:
        return "fake-image"

    def close(self) -> None:
        pass


def scripted_config(
    server,
    *,
    name: str = "scripted",
    api_key_env: str = "",
    action_format: str = "tools",
    price: Price | None = None,
    sampling: Sampling | None = None,
    request_timeout_s: float = 30.0,
    **kw,
) -> ModelConfig:
    return ModelConfig(
        name=name,
        base_url=server.base_url,
        api_key_env=api_key_env,
        model=server.model,
        action_format=action_format,  # type: ignore[arg-type]
        price=price,
        sampling=sampling or Sampling(),
        request_timeout_s=request_timeout_s,
        **kw,
    )
