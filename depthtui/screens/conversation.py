"""The whole conversation of an episode: the system prompt, the task message, and every message
exactly as it was sent to the model, each one folded to a line until opened.

The messages come from the stored requests (each turn keeps only the messages new since the one
before; engine.agents.records.expand_requests rebuilds them). An episode recorded without
requests (the built-in agents, imported runs) is shown from what the store does hold: the
prompt, each segment's message, and the model's words, marked as rebuilt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.markup import escape
from textual.screen import Screen
from textual.widgets import Collapsible, Footer, Header, Static

from depthtui.widgets.sanitize import safe_text
from depthtui.widgets.turn_view import FORMAT_NOTE
from store import views

SHOWN_CHARS = 20_000  # of one message; the rest is counted
PREVIEW_CHARS = 70


@dataclass(frozen=True)
class Message:
    role: str  # system | user | assistant | tool | tools (the tool definitions offered)
    what: str  # e.g. "task message, segment 1", "turn 3", "result of call 4"
    text: str


def _content(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # content parts
        return "\n".join(str(p.get("text", p)) if isinstance(p, dict) else str(p) for p in value)
    return "" if value is None else json.dumps(value)


def _message(raw: dict, turn: int | None, segment_of: dict[str, int]) -> Message:
    role = str(raw.get("role", "?"))
    text = _content(raw.get("content"))
    calls = raw.get("tool_calls") or []
    for call in calls:
        fn = call.get("function", {}) if isinstance(call, dict) else {}
        text += f"\n→ {fn.get('name', 'tool')}({fn.get('arguments', '')})"
    if role == "system":
        what = "system prompt"
    elif text.lstrip().startswith(FORMAT_NOTE.strip()) and role in ("user", "tool"):
        # The harness telling the model its reply was malformed: not the task's words.
        what = "format error (from the harness)"
    elif role == "user":
        seg = segment_of.get(text)
        what = "task message" + (f", segment {seg + 1}" if seg is not None else "")
    elif role == "tool":
        what = f"tool result {raw.get('tool_call_id', '')}".strip()
    else:
        what = f"turn {turn}" if turn else ""
    return Message(role, what, text.strip("\n"))


def messages_of(rows: views.ConversationRows) -> tuple[list[Message], bool]:
    """The conversation's messages and whether they are the exact ones sent (False: rebuilt)."""
    from engine.agents.records import expand_requests

    segment_of = {text: idx for idx, _, text in rows.segments}
    requests = [t.request for t in rows.turns]
    if rows.turns and all(isinstance(r.get("messages"), list) for r in requests):
        full = expand_requests(requests)
        sent = full[-1]["messages"]
        out: list[Message] = []
        # an assistant message's turn: the k-th assistant message is turn k's reply
        turn = 0
        for raw in sent:
            if isinstance(raw, dict) and raw.get("role") == "assistant":
                turn += 1
            out.append(_message(raw if isinstance(raw, dict) else {}, turn, segment_of))
        last = rows.turns[-1]
        reply = ((last.response.get("choices") or [{}])[0] or {}).get("message")
        if isinstance(reply, dict):
            message = _message(reply, last.idx, segment_of)
            if not last.counted:  # named as the replay names it
                message = Message(message.role, CLOSING, message.text)
            out.append(message)
        elif last.text:
            out.append(Message("assistant", _turn_name(last), last.text))
        tools = full[0].get("tools")
        if tools:
            out.insert(1, Message("tools", "tools offered", json.dumps(tools, indent=2)))
        return out, True
    out = []
    if rows.prompt_text:
        out.append(Message("system", f"system prompt ({rows.prompt_name})", rows.prompt_text))
    first_turn = {}
    for t in rows.turns:
        first_turn.setdefault(t.segment_idx, t.idx)
    segments = {idx: (name, text) for idx, name, text in rows.segments}
    for idx, (name, text) in sorted(segments.items()):
        if idx not in first_turn:
            out.append(Message("user", f"task message, segment {idx + 1} {name}".strip(), text))
    for t in rows.turns:
        if t.idx == first_turn.get(t.segment_idx) and t.segment_idx in segments:
            name, text = segments[t.segment_idx]
            what = "task message" + (f", segment {t.segment_idx + 1} {name}" if name else "")
            out.append(Message("user", what, text))
        out.append(Message("assistant", _turn_name(t), t.text))
    return out, False


CLOSING = "closing reply (not a turn)"  # as the replay's turn header says it


def _turn_name(t: views.TurnRecordRow) -> str:
    return f"turn {t.idx}" if t.counted else CLOSING


def _title(i: int, m: Message) -> str:
    """A message's folded line. Escaped: Collapsible reads its title as markup, which ate a
    "[format error]" prefix (and would style any bracketed words a model wrote)."""
    first = " ".join(m.text.split())[:PREVIEW_CHARS]
    return escape(f"{i:>3} {m.role} · {m.what} · {len(m.text):,} chars · {first}")


class ConversationScreen(Screen[None]):
    BINDINGS = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("e", "expand(True)", "Open all"),
        Binding("E", "expand(False)", "Fold all"),
        Binding("j", "scroll(1)", "Down", show=False),
        Binding("k", "scroll(-1)", "Up", show=False),
    ]

    def __init__(self, episode_id: int) -> None:
        super().__init__()
        self.episode_id = episode_id
        self.messages: list[Message] = []
        self.exact = False

    def compose(self) -> ComposeResult:
        rows = views.conversation(self.app.conn, self.episode_id)
        if rows is not None:
            self.messages, self.exact = messages_of(rows)
        yield Header()
        note = (
            "every message exactly as sent to the model (secrets removed)"
            if self.exact
            else "rebuilt from the prompt, the segment messages and the model's words: "
            "this episode's requests were not recorded"
        )
        yield Static(
            Text.assemble(
                (f"Episode {self.episode_id}: {len(self.messages)} messages  ", "bold"),
                (note, "dim"),
            ),
            id="conversation-head",
        )
        with VerticalScroll(id="conversation"):
            for i, m in enumerate(self.messages, 1):
                # the system prompt and the task message open; the rest fold to a line
                opened = m.role in ("system", "user") and i <= 3
                with Collapsible(
                    title=_title(i, m), collapsed=not opened, classes=f"msg msg-{m.role}"
                ):
                    body = safe_text(m.text, SHOWN_CHARS, "")
                    if len(m.text) > SHOWN_CHARS:
                        body.append(f"\n… {len(m.text) - SHOWN_CHARS:,} more characters", "dim")
                    yield Static(body)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#conversation").focus()

    def action_expand(self, opened: bool) -> None:
        for c in self.query(Collapsible):
            c.collapsed = not opened

    def action_scroll(self, lines: int) -> None:
        self.query_one("#conversation", VerticalScroll).scroll_relative(y=lines * 3, animate=False)
