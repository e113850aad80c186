"""`depthtui models check`: one real request to a model's endpoint, and in plain words what is
wrong when it fails (a refused key, an unknown model id, no command in the configured format).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from engine.agents.base import ContextLengthError, ModelEndpointError, ReplyLimits
from engine.agents.chat import ChatAgent, RetryPolicy
from engine.agents.registry import ModelConfig, RegistryError

CHECK_PROMPT = "This is a connectivity check. Run the command `echo ok` once, then stop."


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    detail: str
    latency_ms: float = 0.0
    text: str = ""
    tool_call: bool = False


def check_model(
    config: ModelConfig, environ: Mapping[str, str] | None = None, timeout_s: float = 60.0
) -> CheckResult:
    """Send one small request; say in plain words what is wrong when it fails."""
    try:
        agent = ChatAgent(config, RetryPolicy(max_attempts=1), environ=environ)
    except RegistryError as exc:
        return CheckResult(False, str(exc))
    messages = [
        {"role": "system", "content": agent.system_message("You are a terminal agent.")},
        {"role": "user", "content": CHECK_PROMPT},
    ]
    body = agent.request_body(messages, ReplyLimits(max_tokens=256))
    try:
        reply, latency_ms = agent.send(body, timeout_s)
    except ContextLengthError as exc:
        return CheckResult(False, f"model '{config.name}': the endpoint refused the request: {exc}")
    except ModelEndpointError as exc:
        return CheckResult(False, f"model '{config.name}': {exc.detail}")
    finally:
        agent.close()
    called = any(c.command for c in reply.commands)
    fmt = config.action_format
    note = (
        "it issued a command"
        if called
        else f"it answered but issued no command in the '{fmt}' format"
        + (" (is the server's tool-call parser enabled?)" if fmt == "tools" else "")
    )
    return CheckResult(True, note, latency_ms, reply.text, called)
