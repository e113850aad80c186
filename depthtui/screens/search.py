"""Search across every transcript (model words, commands and outputs) with store/search.py.

The user's words are matched literally (store.search quotes every term; input with no word in it,
such as `|` or `2>&1`, is matched as a substring of commands and model words); hits come best
first, a hit opens its turn, and n/N in the replay walk that episode's other hits.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header, Input, Static

from depthtui.screens.base import DataScreen
from depthtui.widgets.messages import OpenEpisode, Searched
from depthtui.widgets.sanitize import one_line, safe_text
from store import search, views

LIMIT = 500
HIT_START, HIT_END = "\ue000", "\ue001"  # private-use characters: never in real text


@dataclass(frozen=True)
class Hit:
    episode_id: int
    turn_idx: int
    kind: str  # turn | call
    snippet: str  # HIT_START / HIT_END around the matched words
    task_id: str
    agent: str


def find(conn, text: str, limit: int = LIMIT) -> list[Hit]:
    """store.search's hits, best first, with the task and agent of each episode."""
    found = search.search(conn, text, limit, mark=(HIT_START, HIT_END))
    names = views.episode_names(conn, [h["episode_id"] for h in found])
    return [
        Hit(
            h["episode_id"],
            h["turn_idx"],
            h["kind"],
            h["snippet"],
            *names.get(h["episode_id"], ("?", "?")),
        )
        for h in found
    ]


def snippet_text(snippet: str) -> Text:
    """The snippet with its hit markers turned into highlights (and nothing else live)."""
    out = Text(no_wrap=True, overflow="ellipsis")
    plain = safe_text(snippet.replace("\n", " ")).plain
    highlighted = False
    for part in plain.replace(HIT_END, HIT_START).split(HIT_START):
        if part:
            out.append(part, style="bold black on yellow" if highlighted else "")
        highlighted = not highlighted
    return out


class SearchScreen(DataScreen):
    BINDINGS = [
        Binding("slash", "focus_input", "Search", show=False),
        Binding("enter", "open", "Open", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.hits: list[Hit] = []
        self.query_text = ""

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(
            placeholder="search model words, commands and outputs (words match literally)",
            id="search-input",
        )
        yield Static(id="search-count")
        yield DataTable(id="hits", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#hits", DataTable)
        for col in ("episode", "turn", "in", "task", "agent", "match"):
            table.add_column(col, key=col)
        self.query_one("#search-input", Input).focus()

    def on_screen_resume(self) -> None:
        # back from a hit: the keys go to the hits again, not into the query
        table = self.query_one("#hits", DataTable)
        (table if table.row_count else self.query_one("#search-input", Input)).focus()

    def load(self) -> None:
        if self.query_text:
            self._search(self.query_text)
        else:
            self.mark_loaded()

    @on(Input.Submitted, "#search-input")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_text = event.value.strip()
        self.post_message(Searched(self.query_text))
        self._search(self.query_text)

    @work(thread=True, exclusive=True, group="search")
    def _search(self, text: str) -> None:
        with self.app.worker_reader() as conn:
            hits = find(conn, text)
        self.deliver(self._show, text, hits)

    def _show(self, text: str, hits: list[Hit]) -> None:
        if text != self.query_text:
            return
        self.hits = hits
        table = self.query_one("#hits", DataTable)
        table.clear()
        for i, h in enumerate(hits):
            table.add_row(
                str(h.episode_id), str(h.turn_idx), h.kind, one_line(h.task_id, 32),
                one_line(h.agent, 16), snippet_text(h.snippet), key=str(i),
            )  # fmt: skip
        more = " (the first ones)" if len(hits) >= LIMIT else ""
        count = Text.assemble(
            (f"{len(hits):,}", "bold"), f" hits{more} for ", safe_text(text, 200, "bold")
        )
        if not text:
            count = Text("type words and press enter; enter on a hit opens its turn", style="dim")
        self.query_one("#search-count", Static).update(count)
        if hits:
            table.focus()
        self.mark_loaded()

    @on(DataTable.RowSelected, "#hits")
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self._open(int(str(event.row_key.value)))

    def action_open(self) -> None:
        table = self.query_one("#hits", DataTable)
        if table.row_count:
            self._open(table.cursor_row)

    def _open(self, index: int) -> None:
        hit = self.hits[index]
        episodes = tuple(dict.fromkeys(h.episode_id for h in self.hits))
        self.post_message(OpenEpisode(hit.episode_id, hit.turn_idx, episodes, self.query_text))

    def action_focus_input(self) -> None:
        self.query_one("#search-input", Input).focus()
