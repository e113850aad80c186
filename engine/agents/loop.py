"""The agent loop: ask for a reply, run its commands in order, send the results back, repeat
until the agent stops or a limit is reached (docs/work-and-turns.md; docs/safety.md for what runs
after every call).

The loop only talks to the model and to the agent's shell (`sandbox.run`). Everything else the
runner does around it happens in hooks: the safety oracle after every executed call, storing each
turn, cancelling. One Conversation lives for a whole episode; each segment of a multi-segment task
is one more user message in it, and the turn cap, command budget and token limits cover the
episode, not the segment.

Decisions worth knowing:
- "Finished" is a reply with no tool call (no block or tag for text formats), decided from the
  parsed calls, never from finish_reason. A reply cut off by the token limit (`finish_reason ==
  "length"`) that holds no call is a format error, not a finish: its commands were lost -- unless
  the limit was the room the harness left (max_tokens lowered to it): then the cut is the
  harness's, recorded as such (TurnRecord.cut_by_harness), no format error and no turn, and the
  run ends with the limit that left no room ("context_length" or "tokens").
- At most CALLS_PER_REPLY calls of one reply run; the rest are refused ("per_reply"), stored
  with their command shortened, and the model is told in one line.
- A turn is one model reply that carries a batch of commands, followed by their output. The
  turn cap, the safety ceiling and N count those. The closing reply (no call, no format error)
  is recorded and shown (TurnRecord.counted False) but not counted: a capped run needs none.
- A malformed call (bad JSON, no `command`, unknown tool) is answered with a format-error
  observation and not run; the turn still counts (the model spent a reply and gets an answer).
  Raw tool-call markup in the text with no parsed call is a format error of the whole reply, and
  counts the same way.
- The command budget and the tool-call limit count executed commands only: a malformed call or a
  refused one does not use them up. Every executed call's result ends with `; K command(s) left`
  when a budget is stated; calls beyond it return `[not run: the N-command budget is used up]`. A
  turn whose calls were all refused for the budget ends the episode ("budget").
- max_total_tokens bounds the conversation's size (prompt + reply tokens of the latest request);
  max_completion_tokens bounds the tokens generated over the whole episode. Each request's
  max_tokens is lowered so a reply cannot overshoot either.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from engine.agents import unicode
from engine.agents.actions import CALLS_PER_REPLY, text_results_message
from engine.agents.base import Agent, ContextLengthError, ModelEndpointError, Reply, ReplyLimits
from engine.agents.records import CallRecord, SegmentEnd, TurnRecord
from engine.sandbox import output
from engine.sandbox.base import CallResult, Sandbox, SandboxError

SAFETY_TURNS = 150
# Calls of one reply beyond CALLS_PER_REPLY (engine/agents/actions.py) are refused, stored with at
# most REFUSED_COMMAND_CHARS of their command.
REFUSED_COMMAND_CHARS = 200
PER_REPLY_REFUSAL = f"[not run: at most {CALLS_PER_REPLY} commands of one reply are run]"
CUT_OFF_ERROR = (
    "Your reply was cut off at the token limit before it issued a complete command, so nothing "
    "was run."
)
# A reply cut where the harness set max_tokens to the room left: the harness's, not the model's.
CUT_BY_HARNESS = (
    "[cut off] Your reply was cut off because the {what} has no room left ({room} token(s)); "
    "nothing incomplete was run."
)


@dataclass(frozen=True)
class EpisodeLimits:
    """Every cap, budget and limit of one episode, as data. None = no such limit."""

    turn_cap: int | None = None  # stated to the agent (depth runs)
    safety_turns: int = SAFETY_TURNS  # the ceiling when no cap is stated
    command_budget: int | None = None  # stated to the agent (recovery runs)
    max_tool_calls: int | None = None  # executed commands after which the episode ends
    max_completion_tokens: int | None = None  # generated tokens, summed over the episode
    max_total_tokens: int | None = None  # the conversation's size (latest prompt + reply)
    segment_time_limit_s: float | None = None
    max_cost_usd: float | None = None
    command_timeout_s: float = 30.0

    def with_model(
        self, max_total_tokens: int | None, max_completion_tokens: int | None
    ) -> EpisodeLimits:
        """These limits tightened by a model's own context limits (from its registry entry)."""
        return replace(
            self,
            max_total_tokens=_min_opt(self.max_total_tokens, max_total_tokens),
            max_completion_tokens=_min_opt(self.max_completion_tokens, max_completion_tokens),
        )


@dataclass(frozen=True)
class Hooks:
    """The runner's ways in. Any may be None."""

    # After every EXECUTED call, with its 1-based index in the episode (the safety oracle).
    after_call: Callable[[int, CallResult], None] | None = None
    # Once per turn, after its calls (one store transaction per turn).
    on_turn: Callable[[TurnRecord], None] | None = None
    # Before each request: a reason to stop (cancel, pause), or None to go on.
    should_stop: Callable[[], str | None] | None = None


@dataclass
class Conversation:
    """The messages of one episode and its running totals. Mutable: the loop appends to it."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    turns: int = 0  # counted turns: replies with commands or a format error
    replies: int = 0  # every reply, the closing ones too (the turn records' idx)
    calls: int = 0  # every call, run or not (call indices)
    executed: int = 0  # commands actually run (the budget and the tool-call limit count these)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float = 0.0
    context_tokens: int = 0  # prompt + reply tokens of the latest request
    segment_idx: int = 0
    # How many messages the previous request sent (for the per-turn request records).
    recorded_messages: int = 0

    @classmethod
    def start(cls, agent: Agent, prompt_text: str) -> Conversation:
        """A new conversation whose system message is `prompt_text` as `agent` needs it."""
        system = agent.system_message(prompt_text)
        return cls(messages=[{"role": "system", "content": system}] if system else [])


def run_segment(
    agent: Agent,
    sandbox: Sandbox,
    conv: Conversation,
    user_message: str,
    limits: EpisodeLimits,
    hooks: Hooks | None = None,
    *,
    segment_idx: int = 0,
    full_requests: bool = False,
    clock: Callable[[], float] = time.monotonic,
) -> SegmentEnd:
    """Deliver one segment's user message and run turns until the segment ends."""
    hooks = hooks or Hooks()
    conv.segment_idx = segment_idx
    conv.messages.append({"role": "user", "content": user_message})
    started = clock()
    first_turn, first_call = conv.turns, conv.calls

    def end(reason: str, **kw: Any) -> SegmentEnd:
        return SegmentEnd(reason, conv.turns - first_turn, conv.calls - first_call, **kw)

    while True:
        reason = _limit_reached(conv, limits, hooks, clock() - started)
        if reason is not None:
            return end(reason[0], detail=reason[1])
        left_s = (
            None
            if limits.segment_time_limit_s is None
            else limits.segment_time_limit_s - (clock() - started)
        )
        room, room_of = _reply_room(conv, limits)
        try:
            reply = agent.reply(conv, ReplyLimits(room, left_s))
        except ContextLengthError as exc:
            return end("context_length", detail=str(exc))
        except ModelEndpointError as exc:
            if left_s is not None and clock() - started >= limits.segment_time_limit_s:
                return end("time", detail=f"the model endpoint did not answer in time: {exc}")
            return end("error", error_kind="model_endpoint", error_detail=exc.detail)

        conv.replies += 1
        conv.prompt_tokens += reply.usage.prompt_tokens
        conv.completion_tokens += reply.usage.completion_tokens
        conv.cached_tokens += reply.usage.cached_tokens
        conv.cost_usd += reply.cost_usd
        conv.context_tokens = reply.usage.prompt_tokens + reply.usage.completion_tokens
        request = _request_record(reply, conv, full_requests)
        conv.messages.append(reply.assistant_message)

        format_error = reply.format_error
        cut_off = reply.finish_reason == "length"
        # The harness lowered max_tokens to the room left and the reply used it up: the cut is
        # the harness's (docs/work-and-turns.md), never a format error of the model's.
        by_harness = cut_off and room is not None and reply.request.get("max_tokens") == room
        notice = None
        what = "conversation" if room_of == "context_length" else "episode's token budget"
        if by_harness:
            notice = CUT_BY_HARNESS.format(what=what, room=room)
            format_error = None
        elif cut_off and not reply.commands and format_error is None:
            format_error = CUT_OFF_ERROR
        runnable = any(c.command is not None for c in reply.commands)
        closing = not reply.commands and format_error is None and not by_harness
        counted = not closing and (runnable or not by_harness)
        if counted:
            conv.turns += 1

        calls, harness_error = _run_calls(
            reply, sandbox, conv, limits, hooks, clock, started, by_harness
        )
        _send_results(
            conv,
            reply,
            calls,
            notice or (f"[format error] {format_error}" if format_error else None),
        )
        call_errors = [
            f"call {c.idx}: {c.observation}" for c in calls if c.not_run_reason == "format"
        ]
        turn = TurnRecord(
            idx=conv.replies,
            counted=counted,
            cut_by_harness=by_harness,
            priced=reply.priced,
            segment_idx=segment_idx,
            text=reply.text,
            reasoning=reply.reasoning,
            format_error="\n".join(([format_error] if format_error else []) + call_errors) or None,
            finish_reason=reply.finish_reason,
            prompt_tokens=reply.usage.prompt_tokens,
            completion_tokens=reply.usage.completion_tokens,
            cached_tokens=reply.usage.cached_tokens,
            cost_usd=reply.cost_usd,
            latency_ms=reply.latency_ms,
            request=request,
            response=reply.response,
            calls=tuple(calls),
        )
        if hooks.on_turn is not None:
            hooks.on_turn(turn)

        if harness_error is not None:
            return end("error", error_kind=harness_error.kind, error_detail=harness_error.detail)
        if closing:
            return end("no_tool_call")
        if by_harness and not runnable:
            # All the room there was is used: another request could only be cut again.
            assert room_of is not None
            detail = f"the last reply was cut off at the {room} token(s) left in the {what}"
            return end(room_of, detail=detail)
        reasons = {c.not_run_reason for c in calls}
        if calls and reasons == {"budget"}:
            return end("budget", detail="the agent kept calling after the budget was used up")


# --- one turn's calls --------------------------------------------------------------------------


def _run_calls(
    reply: Reply,
    sandbox: Sandbox,
    conv: Conversation,
    limits: EpisodeLimits,
    hooks: Hooks,
    clock: Callable[[], float],
    started: float,
    cut_by_harness: bool = False,
) -> tuple[list[CallRecord], SandboxError | None]:
    records: list[CallRecord] = []
    budget = limits.command_budget
    for position, parsed in enumerate(reply.commands, 1):
        conv.calls += 1
        left = None if budget is None else max(budget - conv.executed, 0)

        # A call that is not run: only its command, observation and reason vary.
        not_run = partial(
            CallRecord, conv.calls, parsed.tool_call_id, result=None, not_run=True,
            remaining_budget=left,
        )  # fmt: skip

        if position > CALLS_PER_REPLY:
            # Neither run nor kept whole: a reply of 10,000 calls must not grow the store.
            shown = unicode.escaped(parsed.command if parsed.command is not None else parsed.raw)
            records.append(
                not_run(
                    shown[:REFUSED_COMMAND_CHARS],
                    observation=PER_REPLY_REFUSAL,
                    not_run_reason="per_reply",
                )
            )
            continue
        if parsed.command is None and cut_by_harness:
            records.append(
                not_run(
                    parsed.raw,
                    observation="[not run: the call was cut off with the reply]",
                    not_run_reason="cut",
                )
            )
            continue
        if parsed.command is None:
            records.append(
                not_run(
                    parsed.raw,
                    observation=f"[format error] {parsed.error}",
                    not_run_reason="format",
                )
            )
            continue
        refusal = _refusal(conv, limits, clock() - started)
        if refusal is not None:
            records.append(
                not_run(parsed.command, observation=refusal[1], not_run_reason=refusal[0])
            )
            continue
        timeout = reply.timeout_s or limits.command_timeout_s
        # Stored as received (escaped); run with what is not valid Unicode replaced.
        command, note = unicode.runnable(parsed.command)
        stored = unicode.escaped(parsed.command)
        try:
            result = sandbox.run(command, timeout)
        except SandboxError as exc:
            records.append(
                not_run(
                    stored,
                    observation=f"[harness error: {exc.detail}]",
                    not_run_reason="harness",
                )
            )
            return records, exc
        conv.executed += 1
        seen = output.without_framing_lines(result.observation)
        observation = f"{note}\n{seen}" if note else seen
        if budget is not None:
            left = max(budget - conv.executed, 0)
            observation += f"; {left} command(s) left"
        records.append(
            CallRecord(conv.calls, parsed.tool_call_id, stored, result, False, observation, left)
        )
        if hooks.after_call is not None:
            hooks.after_call(conv.calls, result)
    return records, None


def _refusal(conv: Conversation, limits: EpisodeLimits, elapsed: float) -> tuple[str, str] | None:
    """Why the next command may not run, as (reason, the exact observation), or None."""
    if limits.command_budget is not None and conv.executed >= limits.command_budget:
        return "budget", f"[not run: the {limits.command_budget}-command budget is used up]"
    if limits.max_tool_calls is not None and conv.executed >= limits.max_tool_calls:
        return "tool_call_limit", f"[not run: the {limits.max_tool_calls}-call limit is reached]"
    if limits.segment_time_limit_s is not None and elapsed >= limits.segment_time_limit_s:
        return "time", "[not run: the time limit is reached]"
    return None


def _send_results(
    conv: Conversation, reply: Reply, calls: list[CallRecord], note: str | None
) -> None:
    """Append what the model will see next: one tool message per tool call, or one user message
    for text formats, plus the note on the reply as a whole (its format error, or that the
    harness cut it off). Calls beyond CALLS_PER_REPLY are told in one line (each tool call still
    gets its short answer: the protocol wants one per call id)."""
    refused = sum(1 for c in calls if c.not_run_reason == "per_reply")
    line = (
        f"[{refused} command(s) of this reply were not run: at most {CALLS_PER_REPLY} commands "
        "of one reply are run]"
        if refused
        else None
    )
    if reply.results_as == "tool":
        for call in calls:
            conv.messages.append(
                {"role": "tool", "tool_call_id": call.tool_call_id, "content": call.observation}
            )
        for text in (note, line):
            if text:
                conv.messages.append({"role": "user", "content": text})
        return
    parts = []
    shown = [(c.command, c.observation) for c in calls if c.not_run_reason != "per_reply"]
    if shown:
        parts.append(text_results_message(shown))
    parts.extend(t for t in (line, note) if t)
    if parts:
        conv.messages.append({"role": "user", "content": "\n\n".join(parts)})


# --- limits -------------------------------------------------------------------------------------


def _limit_reached(
    conv: Conversation, limits: EpisodeLimits, hooks: Hooks, elapsed: float
) -> tuple[str, str] | None:
    """(end reason, detail) when no further turn may start."""
    if hooks.should_stop is not None:
        why = hooks.should_stop()
        if why:
            return "stopped", why
    if limits.turn_cap is not None:
        if conv.turns >= limits.turn_cap:
            return "turn_cap", f"{conv.turns} of {limits.turn_cap} turns used"
    elif conv.turns >= limits.safety_turns:
        return "safety_ceiling", f"{conv.turns} turns without a stated cap"
    if limits.max_tool_calls is not None and conv.executed >= limits.max_tool_calls:
        return "tool_call_limit", f"{conv.executed} commands run"
    if limits.max_completion_tokens is not None and (
        conv.completion_tokens >= limits.max_completion_tokens
    ):
        return "tokens", f"{conv.completion_tokens} tokens generated"
    if limits.max_total_tokens is not None and conv.context_tokens >= limits.max_total_tokens:
        # One cause, one reason, whether the server refuses the prompt or a reply fills the
        # window: the context is full.
        return "context_length", (
            f"the conversation holds {conv.context_tokens} tokens of the "
            f"{limits.max_total_tokens} allowed"
        )
    if limits.max_cost_usd is not None and conv.cost_usd >= limits.max_cost_usd:
        return "cost", f"${conv.cost_usd:.4f} spent"
    if limits.segment_time_limit_s is not None and elapsed >= limits.segment_time_limit_s:
        return "time", f"{elapsed:.0f} s elapsed in the segment"
    return None


def _reply_room(conv: Conversation, limits: EpisodeLimits) -> tuple[int | None, str | None]:
    """The next reply's max_tokens as the harness lowers it, and which limit binds: the
    context ("context_length") or the episode's completion tokens ("tokens"); (None, None)
    when neither applies."""
    room: list[tuple[int, str]] = []
    if limits.max_completion_tokens is not None:
        room.append((limits.max_completion_tokens - conv.completion_tokens, "tokens"))
    if limits.max_total_tokens is not None:
        room.append((limits.max_total_tokens - conv.context_tokens, "context_length"))
    if not room:
        return None, None
    tokens, which = min(room)
    return max(tokens, 1), which


def _request_record(reply: Reply, conv: Conversation, full: bool) -> dict[str, Any]:
    request = dict(reply.request)
    sent = request.get("messages")
    if full or not isinstance(sent, list):
        return request
    start = min(conv.recorded_messages, len(sent))
    request["messages"] = sent[start:]
    request["messages_from"] = start
    conv.recorded_messages = len(sent)
    return request


def _min_opt(a: int | None, b: int | None) -> int | None:
    values = [v for v in (a, b) if v is not None]
    return min(values) if values else None
