"""The contract between the loop and an agent: the loop asks for a reply, the agent returns what
it wants run. A chat model behind an endpoint and the built-in oracle, nop and replay agents all
answer through the same interface, so the loop (budgets, records, hooks) is the same for each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from engine.agents.actions import ParsedCommand

if TYPE_CHECKING:
    from engine.agents.loop import Conversation


class ModelEndpointError(RuntimeError):
    """The endpoint could not give a reply after the retry policy ran out (rate limits, server
    errors, timeouts, refused connections, bad auth). An infrastructure error: the episode ends
    with error_kind "model_endpoint", never as a model failure."""

    def __init__(self, detail: str, attempts: int = 1, status: int | None = None) -> None:
        self.detail = detail
        self.attempts = attempts
        self.status = status
        super().__init__(detail)


class ContextLengthError(RuntimeError):
    """The conversation no longer fits the model's context (the endpoint said so). The episode
    ends with reason "context_length": the model's run is over, not the harness's fault."""


@dataclass(frozen=True)
class ReplyLimits:
    """What the loop allows the next reply: it lowers the agent's own per-reply settings."""

    # Tokens the reply may generate (None = the agent's own setting).
    max_tokens: int | None = None
    # Seconds the request may take before the segment's time limit (None = no limit).
    timeout_s: float | None = None


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0


@dataclass(frozen=True)
class Reply:
    """One agent reply, parsed."""

    # Appended to the conversation exactly as it will be sent back to the model next time.
    assistant_message: dict[str, Any]
    text: str
    reasoning: str
    commands: tuple[ParsedCommand, ...]
    format_error: str | None
    finish_reason: str | None
    usage: Usage = field(default_factory=Usage)
    cost_usd: float = 0.0
    latency_ms: float = 0.0
    # The request as sent (no headers; see ChatAgent) and the raw response JSON.
    request: dict[str, Any] = field(default_factory=dict)
    response: dict[str, Any] = field(default_factory=dict)
    # "tool": each result goes back as a tool message; "user": one user message per turn.
    results_as: Literal["tool", "user"] = "tool"
    # Per-command timeouts, when an agent needs longer than the episode's (the oracle).
    timeout_s: float | None = None
    # Whether cost_usd is a cost: the model has a price or the endpoint reported one. False:
    # no price (cost_usd is 0 and means nothing); None: not a priced agent (the oracle).
    priced: bool | None = None


class Agent(Protocol):
    """What the loop needs of an agent."""

    name: str
    # The model id sent to the endpoint ('' for built-in agents).
    model_id: str

    def system_message(self, prompt_text: str) -> str:
        """The system message this agent is given for `prompt_text` (text-format agents add how
        to write commands)."""
        ...

    def reply(self, conv: Conversation, limits: ReplyLimits) -> Reply:
        """The next reply. Raises ModelEndpointError or ContextLengthError."""
        ...
