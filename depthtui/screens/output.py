"""The full output of one call, in a virtualized view (it can be megabytes on one line)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from depthtui.widgets.output_view import OutputView
from depthtui.widgets.sanitize import safe_text


class OutputScreen(ModalScreen[None]):
    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("o", "dismiss", "Close", show=False),
    ]

    def __init__(self, title: str, raw: str) -> None:
        super().__init__()
        self.title_text = title
        self.raw = raw

    def compose(self) -> ComposeResult:
        yield Static(
            Text.assemble(
                safe_text(self.title_text, 200, "bold"), ("   j/k g/G scroll, esc close", "dim")
            ),
            id="output-title",
        )
        yield OutputView(self.raw, id="output-view")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(OutputView).focus()
