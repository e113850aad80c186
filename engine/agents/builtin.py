"""The built-in agents: oracle, nop and replay. They answer through the same interface as a chat
model, so their episodes go through the same loop, budgets, hooks and records.

They know where a segment begins from the conversation: the segment's user message is the last
message when its first reply is asked for.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.agents.actions import TOOL_NAME, ParsedCommand
from engine.agents.base import Reply, ReplyLimits

if TYPE_CHECKING:
    from engine.agents.loop import Conversation
    from engine.tasks.model import Task

SOLUTION_DIR = "/solution"
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _segment_opening(conv: Conversation) -> bool:
    return bool(conv.messages) and conv.messages[-1].get("role") == "user"


def _reply(
    conv: Conversation, text: str, commands: Sequence[str], timeout_s: float | None
) -> Reply:
    """A reply that issues `commands` as tool calls (none = finished)."""
    parsed = tuple(
        ParsedCommand(cmd, None, f"call_{conv.calls + i}", cmd) for i, cmd in enumerate(commands, 1)
    )
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if parsed:
        message["tool_calls"] = [
            {
                "id": p.tool_call_id,
                "type": "function",
                "function": {"name": TOOL_NAME, "arguments": _args(p.command or "")},
            }
            for p in parsed
        ]
    return Reply(
        assistant_message=message,
        text=text,
        reasoning="",
        commands=parsed,
        format_error=None,
        finish_reason="tool_calls" if parsed else "stop",
        timeout_s=timeout_s,
    )


def _args(command: str) -> str:
    import json

    return json.dumps({"command": command})


class NopAgent:
    """Does nothing: finishes at once. `check` uses it to confirm that doing nothing fails."""

    name = "nop"
    model_id = ""

    def system_message(self, prompt_text: str) -> str:
        return prompt_text

    def reply(self, conv: Conversation, limits: ReplyLimits) -> Reply:
        return _reply(conv, "", (), None)


class OracleAgent:
    """Runs each segment's reference solution as one call, then finishes.

    The runner uploads the segment's solution folder to /solution (as root) before the segment;
    the oracle runs it in the agent's shell, so it acts as the agent user, in the working
    directory, like any agent command.
    """

    name = "oracle"
    model_id = ""

    def __init__(
        self,
        solution_env: Sequence[Mapping[str, str]] = (),
        timeout_s: Sequence[float | None] | float | None = 600.0,
    ) -> None:
        # Per segment: solve.sh's environment, and how long it may run (a reference solution
        # may install packages or build, so it is not held to the 30 s command limit).
        self.solution_env = list(solution_env)
        self.timeout_s = timeout_s
        for env in self.solution_env:
            bad = [k for k in env if not ENV_NAME.match(k)]
            if bad:
                raise ValueError(f"solution env: not a variable name: {bad[0]!r}")

    @classmethod
    def for_task(cls, task: Task, default_timeout_s: float = 600.0) -> OracleAgent:
        return cls(
            solution_env=[s.solution_env for s in task.segments],
            timeout_s=[
                s.agent_timeout_sec or task.limits.agent_timeout_sec or default_timeout_s
                for s in task.segments
            ],
        )

    def command(self, segment_idx: int) -> str:
        env = self.solution_env[segment_idx] if segment_idx < len(self.solution_env) else {}
        assigns = ["DEBIAN_FRONTEND=noninteractive"]
        assigns += [f"{k}={shlex.quote(v)}" for k, v in env.items()]
        return " ".join([*assigns, "bash", f"{SOLUTION_DIR}/solve.sh"])

    def system_message(self, prompt_text: str) -> str:
        return prompt_text

    def reply(self, conv: Conversation, limits: ReplyLimits) -> Reply:
        if not _segment_opening(conv):
            return _reply(conv, "The reference solution has run.", (), None)
        timeout = self.timeout_s
        if isinstance(timeout, Sequence):
            timeout = timeout[conv.segment_idx] if conv.segment_idx < len(timeout) else None
        return _reply(
            conv, "Running the reference solution.", [self.command(conv.segment_idx)], timeout
        )


@dataclass(frozen=True)
class ReplayTurn:
    """The commands one turn of an earlier episode ran, in order."""

    segment_idx: int
    commands: tuple[str, ...]
    turn_idx: int = 0  # the turn's index in the episode replayed, for the replay's words


class ReplayAgent:
    """Re-issues a stored episode's commands turn by turn, so its outputs can be compared in a
    fresh environment. Turns that ran nothing (format errors, the final answer) are skipped; when
    a segment's stored turns are used up the agent finishes that segment. One instance per
    episode: it remembers how far it has got."""

    name = "replay"
    model_id = ""

    def __init__(self, turns: Sequence[ReplayTurn]) -> None:
        self.turns = [t for t in turns if t.commands]
        self._next = 0

    def system_message(self, prompt_text: str) -> str:
        return prompt_text

    def reply(self, conv: Conversation, limits: ReplyLimits) -> Reply:
        while (
            self._next < len(self.turns) and self.turns[self._next].segment_idx < conv.segment_idx
        ):
            self._next += 1
        if self._next < len(self.turns) and self.turns[self._next].segment_idx == conv.segment_idx:
            turn = self.turns[self._next]
            self._next += 1
            return _reply(conv, f"Replaying turn {turn.turn_idx}.", turn.commands, None)
        return _reply(conv, "Replay finished.", (), None)


def replay_turns(
    turn_rows: Sequence[Mapping[str, Any]], call_rows: Sequence[Mapping[str, Any]]
) -> list[ReplayTurn]:
    """The turns to replay, from an episode's stored `turns` and `calls` rows (as the store's
    list_turns/list_calls return them). Only calls that ran are replayed: a refused or malformed
    call changed nothing in the environment it was issued in."""
    commands: dict[int, list[str]] = {}
    for call in sorted(call_rows, key=lambda c: c["idx"]):
        if not call["not_run"]:
            commands.setdefault(call["turn_idx"], []).append(call["command"])
    return [
        ReplayTurn(t["segment_idx"], tuple(commands.get(t["idx"], ())), t["idx"])
        for t in sorted(turn_rows, key=lambda t: t["idx"])
    ]
