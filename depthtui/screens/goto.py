"""Go to an episode by its id (ids appear in triage exports, `depthtui replay 42`, job messages)."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from store import views


class GotoEpisodeScreen(ModalScreen[int | None]):
    """Returns the id of an episode that exists, or None (esc)."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="goto-box"):
            yield Static(Text("Go to episode", style="bold"))
            yield Input(placeholder="episode id, e.g. 42", id="goto-id")
            yield Static(Text("enter: open   esc: cancel", style="dim"), id="goto-note")

    def on_mount(self) -> None:
        self.query_one("#goto-id", Input).focus()

    @on(Input.Submitted, "#goto-id")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip().lstrip("#")
        note = self.query_one("#goto-note", Static)
        if not text.isdigit():
            note.update(Text(f"expected an episode id (a whole number), got '{text}'", "red"))
            return
        if views.episode(self.app.conn, int(text)) is None:
            note.update(Text(f"episode {text} is not in this store", style="red"))
            return
        self.dismiss(int(text))
