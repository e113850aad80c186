"""`depthtui models check`: real requests to a model's endpoint, and in plain words what is
wrong when they fail (a refused key, an unknown model id, no command in the configured format).

A local model may take tens of seconds for one reply, so the check takes a timeout and a number
of tries (it stops at the first that answers), and it tells a slow server from a dead one: when
a try gets no reply, a plain TCP connect to the endpoint says whether anything listens there.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import urlsplit

from engine.agents.base import ContextLengthError, ModelEndpointError, ReplyLimits
from engine.agents.chat import ChatAgent, RetryPolicy
from engine.agents.registry import ModelConfig, RegistryError

CHECK_PROMPT = "This is a connectivity check. Run the command `echo ok` once, then stop."
DEFAULT_TIMEOUT_S = 60.0
REPLY_LINES = 5  # lines of the reply's text a check shows

# What became of one try: the reply came; no reply in time from a server that accepts
# connections (slow); nothing accepts connections there (dead); the endpoint answered an error.
OK, SLOW, DEAD, ERROR = "ok", "slow", "dead", "error"


@dataclass(frozen=True)
class TryResult:
    state: str  # OK | SLOW | DEAD | ERROR
    detail: str
    latency_ms: float = 0.0


@dataclass(frozen=True)
class CheckResult:
    ok: bool
    detail: str
    latency_ms: float = 0.0
    text: str = ""
    tool_call: bool = False
    commands: tuple[str, ...] = ()
    tries: tuple[TryResult, ...] = field(default_factory=tuple)

    @property
    def state(self) -> str:
        """The last try's state: why the check ended as it did."""
        return self.tries[-1].state if self.tries else ERROR

    def reply_lines(self, n: int = REPLY_LINES) -> list[str]:
        """The reply's first `n` lines of text (what the model said)."""
        return [line for line in self.text.strip().splitlines()][:n]


def listening(base_url: str, timeout_s: float = 3.0) -> bool:
    """Whether anything accepts a TCP connection at the endpoint's host and port."""
    parts = urlsplit(base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _one_try(agent: ChatAgent, config: ModelConfig, timeout_s: float) -> tuple[TryResult, object]:
    messages = [
        {"role": "system", "content": agent.system_message("You are a terminal agent.")},
        {"role": "user", "content": CHECK_PROMPT},
    ]
    body = agent.request_body(messages, ReplyLimits(max_tokens=256))
    try:
        reply, latency_ms = agent.send(body, timeout_s)
    except ContextLengthError as exc:
        return TryResult(ERROR, f"the endpoint refused the request: {exc}"), None
    except ModelEndpointError as exc:
        if exc.status is not None:
            return TryResult(ERROR, exc.detail), None
        where = urlsplit(config.base_url).netloc
        if listening(config.base_url):
            return (
                TryResult(
                    SLOW,
                    f"slow: {where} accepts connections but gave no reply within "
                    f"{timeout_s:g} s ({exc.detail}); a model still loading or a slow CPU "
                    "model: try a longer --timeout",
                ),
                None,
            )
        return TryResult(DEAD, f"dead: nothing listens on {where} ({exc.detail})"), None
    return TryResult(OK, "answered", latency_ms), reply


def check_model(
    config: ModelConfig,
    environ: Mapping[str, str] | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    tries: int = 1,
    pause_s: float = 2.0,
) -> CheckResult:
    """Send one small request, up to `tries` times until one is answered, each allowed
    `timeout_s` seconds; say in plain words what is wrong when none is."""
    # The model's own request timeout would cut a longer --timeout short.
    config = replace(config, request_timeout_s=max(timeout_s, 1.0))
    try:
        agent = ChatAgent(config, RetryPolicy(max_attempts=1), environ=environ)
    except RegistryError as exc:
        return CheckResult(False, str(exc))
    done: list[TryResult] = []
    reply = None
    try:
        for _ in range(max(tries, 1)):
            result, reply = _one_try(agent, config, timeout_s)
            done.append(result)
            # An error the endpoint states (a refused key, an unknown model) is not retried.
            if result.state in (OK, ERROR):
                break
            if result.state == DEAD and len(done) < tries:
                time.sleep(pause_s)  # a server that is starting: give it a moment to listen
    finally:
        agent.close()
    last = done[-1]
    if reply is None:
        many = f" (all {len(done)} tries)" if len(done) > 1 else ""
        return CheckResult(False, f"model '{config.name}': {last.detail}{many}", tries=tuple(done))
    commands = tuple(c.command for c in reply.commands if c.command)
    fmt = config.action_format
    note = (
        "it issued a command"
        if commands
        else f"it answered but issued no command in the '{fmt}' format"
        + (" (is the server's tool-call parser enabled?)" if fmt == "tools" else "")
    )
    if reply.format_error:
        note += f"; the harness would call the reply malformed: {reply.format_error}"
    if len(done) > 1:
        note += f" (on try {len(done)} of {tries}; before it: {done[0].detail})"
    return CheckResult(
        True, note, last.latency_ms, reply.text, bool(commands), commands, tuple(done)
    )
