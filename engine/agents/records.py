"""What the loop reports: one TurnRecord per model reply (with its CallRecords), and how a segment
ended. The fields are exactly what the store's `turns` and `calls` rows need, so the runner can
write one transaction per turn without reaching back into the loop."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.sandbox.base import CallResult

# Why a segment (or the episode) ended. Only "no_tool_call" means the agent said it was done.
END_REASONS = (
    "no_tool_call",  # a reply without a tool call (or block/tag): the agent finished
    "turn_cap",  # the stated turn cap is used up (the cap covers the whole task)
    "safety_ceiling",  # no cap stated and the safety ceiling (150 turns) is reached
    "tool_call_limit",  # max_tool_calls commands have run
    "budget",  # the command budget is used up and the agent kept calling
    "tokens",  # the episode's completion-token limit is reached
    # The context is full: the endpoint refused the prompt, or the conversation reached the
    # model's max_total_tokens (a reply filled the room left); the detail gives the server's words.
    "context_length",
    "time",  # the segment's time limit is reached
    "cost",  # the episode's cost limit is reached
    "stopped",  # should_stop() asked to stop (cancel, pause); the detail says why
    "error",  # an infrastructure error (error_kind says which); never a model failure
)


@dataclass(frozen=True)
class CallRecord:
    """One command of a turn: run, refused, or malformed."""

    idx: int  # 1-based within the episode, in execution order
    tool_call_id: str
    command: str  # the command, or the raw malformed call as the model wrote it
    result: CallResult | None  # None when not run
    not_run: bool
    observation: str  # exactly the text returned to the model (budget suffix included)
    remaining_budget: int | None  # commands left after this call; None without a budget
    # Why it was not run: "budget" | "tool_call_limit" | "time" | "format" | "harness" |
    # "per_reply" (beyond CALLS_PER_REPLY) | "cut" (a call the harness's token cut left
    # incomplete); "" if run.
    not_run_reason: str = ""

    def row(self) -> dict[str, Any]:
        """The store's `calls` columns for this call (turn_idx is added by the store)."""
        r = self.result
        return {
            "idx": self.idx,
            "tool_call_id": self.tool_call_id,
            "command": self.command,
            "exit_code": r.exit_code if r else None,
            "timed_out": bool(r and r.timed_out),
            "not_run": self.not_run,
            "shell_restarted": bool(r and r.shell_restarted),
            "note": (r.note if r else "") or self.not_run_reason,
            # All the command printed, though the store keeps only a head and a tail of it.
            "output_bytes": r.output_bytes if r else 0,
            "observation": self.observation,
            "remaining_budget": self.remaining_budget,
            "duration_ms": r.duration_s * 1000 if r else 0.0,
        }


@dataclass(frozen=True)
class TurnRecord:
    """One model reply and what came of it."""

    idx: int  # 1-based within the episode, over every reply (the closing ones too)
    # A turn as N and the caps count it: a reply with commands or a format error. False for the
    # closing reply, which is stored and shown but not counted (docs/work-and-turns.md).
    counted: bool
    segment_idx: int
    text: str
    reasoning: str
    format_error: str | None
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    cost_usd: float
    latency_ms: float
    # The request body as sent, secrets removed. Unless the loop was asked for full requests,
    # `messages` holds only the messages new since the previous turn's request and
    # `messages_from` says where they start (see `expand_requests`), so a long episode does not
    # store its conversation once per turn.
    request: dict[str, Any]
    response: dict[str, Any]  # the raw response JSON
    calls: tuple[CallRecord, ...] = ()
    # Cut at the token limit the harness lowered max_tokens to (the room left): the harness's,
    # not a format error of the model's (docs/work-and-turns.md).
    cut_by_harness: bool = False
    # Whether cost_usd is a cost (a price or the endpoint's figure); None: not a priced agent.
    priced: bool | None = None

    def row(self) -> dict[str, Any]:
        """The store's `turns` columns for this turn (and `priced`, which the store folds into
        the episode's row)."""
        return {
            "idx": self.idx,
            "counted": int(self.counted),
            "segment_idx": self.segment_idx,
            "text": self.text,
            "reasoning": self.reasoning,
            "format_error": self.format_error,
            "finish_reason": self.finish_reason,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
            "cost_usd": self.cost_usd,
            "latency_ms": self.latency_ms,
            "request_json": self.request,
            "response_json": self.response,
            "cut_by_harness": int(self.cut_by_harness),
            "priced": self.priced,
        }

    def call_rows(self) -> list[dict[str, Any]]:
        return [c.row() for c in self.calls]

    def outputs(self) -> dict[int, bytes]:
        """Each executed call's raw output by call idx (the store keeps it apart)."""
        return {c.idx: c.result.output for c in self.calls if c.result is not None}


@dataclass(frozen=True)
class SegmentEnd:
    reason: str  # one of END_REASONS
    turns: int  # counted turns taken in this segment (the closing reply is not one)
    calls: int  # calls (run or not) in this segment
    error_kind: str | None = None
    error_detail: str | None = None
    detail: str = ""

    @property
    def finished(self) -> bool:
        """The agent said it was done (as opposed to being stopped by a limit or an error)."""
        return self.reason == "no_tool_call"


def expand_requests(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rebuild each turn's full request body from the per-turn records of one episode, in turn
    order (records made with full requests pass through unchanged)."""
    messages: list[Any] = []
    out = []
    for req in requests:
        req = dict(req)
        start = req.pop("messages_from", None)
        if start is None:
            messages = list(req.get("messages", []))
        else:
            messages = messages[:start] + list(req.get("messages", []))
            req["messages"] = list(messages)
        out.append(req)
    return out
