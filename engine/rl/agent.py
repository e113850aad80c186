"""The external agent: an episode's "model" is a policy outside depthtui (a trainer, an OpenEnv
client) that hands over one command at a time.

The episode itself runs the one path every front end runs (engine/protocol/episode.py: setup,
segments, seal, finish) in a background thread; only the agent differs. Its `reply` tells the
driver it is waiting ("ready"), then blocks until the driver sends a command (one turn with one
call, parsed exactly as a chat model's native tool call is) or None (the closing reply: the
agent says it is done with this segment). What the model is shown comes back through the
recorder (`TeeRecorder`): every turn's observations and every segment's opening message, as
stored. So budgets, refusals, the oracle and its latch, faults, the verifier and the store
rows are the episode's own.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.agents.actions import TOOL_NAME, parse_tool_calls
from engine.agents.base import Reply, ReplyLimits
from engine.protocol.episode import execute_episode
from engine.protocol.execute import EpisodeBody, EpisodeWork, Recorder

if TYPE_CHECKING:
    from engine.agents.loop import Conversation
    from engine.protocol.kinds import ProgressEvent


@dataclass(frozen=True)
class Event:
    """What the episode thread tells its driver. kind: "segment" (a segment's user message),
    "turn" (the observations of a turn's calls), "ready" (the agent waits for a command),
    "done" (the episode is over; `text` says how it ended)."""

    kind: str
    text: str = ""


class ExternalAgent:
    """An agent whose replies come from `commands` (a str: one call; None: the closing reply).
    Once `close()` is called every further reply is a closing one, so the episode runs on to
    its grade without waiting."""

    name = "external"

    def __init__(self, model_id: str, events: queue.Queue[Event]) -> None:
        self.model_id = model_id
        self.episode_id: int | None = None  # the store's, once the episode is claimed
        self.events = events
        self.commands: queue.Queue[Any] = queue.Queue()
        self._closed = threading.Event()

    def system_message(self, prompt_text: str) -> str:
        return prompt_text

    def send(self, command: Any) -> None:
        self.commands.put(command)

    def close(self) -> None:
        """The driver is gone or asked for the grade: close every segment from now on."""
        self._closed.set()
        self.commands.put(None)

    def reply(self, conv: Conversation, limits: ReplyLimits) -> Reply:
        if self._closed.is_set():
            return self._reply(conv, None)
        self.events.put(Event("ready"))
        command = self.commands.get()
        if self._closed.is_set():
            command = None
        return self._reply(conv, command)

    def _reply(self, conv: Conversation, command: Any) -> Reply:
        if command is None:
            message: dict[str, Any] = {"role": "assistant", "content": "done"}
            return Reply(message, "done", "", (), None, "stop")
        call = {
            "id": f"call_{conv.calls + 1}",
            "type": "function",
            "function": {"name": TOOL_NAME, "arguments": json.dumps({"command": command})},
        }
        # Parsed as a chat model's native call is: an empty command is a format error there too.
        parsed = parse_tool_calls([call], "")
        message = {"role": "assistant", "content": "", "tool_calls": [call]}
        return Reply(message, "", "", parsed.commands, parsed.format_error, "tool_calls")


class TeeRecorder:
    """The episode's own recorder, plus what the driver must hand back to the model: each
    segment's opening message and each turn's observations, as they are recorded."""

    def __init__(self, inner: Recorder, events: queue.Queue[Event]) -> None:
        self.inner = inner
        self.events = events

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def add_segment_run(self, idx: int, message: str, **fields: Any) -> None:
        self.inner.add_segment_run(idx, message, **fields)
        self.events.put(Event("segment", message))

    def record_turn(
        self, turn: dict, calls: list[dict], outputs: dict[int, bytes], events: list[dict]
    ) -> None:
        self.inner.record_turn(turn, calls, outputs, events)
        shown = [c["observation"] for c in calls]
        if turn.get("format_error") and not calls:
            shown.append(f"[format error] {turn['format_error']}")
        self.events.put(Event("turn", "\n".join(shown)))


class ExternalExecutor:
    """Runs the episode body in the calling thread (as the local executor does) with the
    external agent and the tee recorder."""

    name = "rl"

    def __init__(self, agent: ExternalAgent) -> None:
        self.agent = agent

    def run(
        self,
        work: EpisodeWork,
        recorder: Recorder,
        should_stop: Callable[[], str | None],
        progress: Callable[[ProgressEvent], None],
    ) -> EpisodeBody:
        self.agent.episode_id = work.episode_id
        tee = TeeRecorder(recorder, self.agent.events)
        return execute_episode(work, tee, should_stop, progress, agent=self.agent)
