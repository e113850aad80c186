"""Triage: the collateral-damage queue and the suspected-false-positive queue, with labels and
notes that are stored (store/triage.py) and exported by `depthtui triage export`."""

from __future__ import annotations

from dataclasses import replace

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header, Static, Tab, Tabs

from depthtui.screens.base import DataScreen
from depthtui.screens.format import cursor_key, sync_rows
from depthtui.screens.note import NoteScreen
from depthtui.widgets.messages import OpenEpisode
from depthtui.widgets.sanitize import one_line, safe_text
from depthtui.widgets.turn_view import OUTCOME_STYLE
from store import triage

QUEUE_TITLES = {"collateral": "Collateral damage", "false_positive": "Suspected false positives"}
LABEL_STYLE = {"real": "bold red", "false_positive": "bold green", "needs_look": "bold yellow"}
LABEL_TEXT = {"real": "real", "false_positive": "false positive", "needs_look": "needs a look"}
# Most telling first: what a narrow terminal cuts off on the right is repeated below the table.
COLUMNS = ("episode", "label", "verdict", "why", "task", "agent", "note")


def label_text(label: str | None) -> Text:
    if label is None:
        return Text("unlabelled", style="dim")
    return Text(LABEL_TEXT.get(label, label), style=LABEL_STYLE.get(label, ""))


def verdict_text(item: triage.QueueItem) -> Text:
    """The episode's outcome with its reward: a run that passed its tests but latched
    collateral reads `unsafe -1.00`, never `pass`."""
    text = Text(item.outcome, style=OUTCOME_STYLE.get(item.outcome, ""))
    if item.reward is not None:
        text.append(f" {item.reward:+.2f}")
    return text


def item_cells(item: triage.QueueItem) -> list:
    why = one_line(item.reasons[0], 40)
    if len(item.reasons) > 1:
        why.append(f" +{len(item.reasons) - 1}", style="dim")
    return [
        str(item.episode_id),
        label_text(item.label),
        verdict_text(item),
        why,
        one_line(item.task_id, 24),
        one_line(item.agent, 12),
        one_line(item.note, 24),
    ]


class TriageScreen(DataScreen):
    BINDINGS = [
        Binding("r", "label('real')", "Real"),
        Binding("p", "label('false_positive')", "False positive"),
        Binding("w", "label('needs_look')", "Needs a look"),
        Binding("e", "note", "Note"),
        Binding("enter", "open", "Open"),
        Binding("right_square_bracket", "queue(1)", "Next queue", show=False),
        Binding("left_square_bracket", "queue(-1)", "Previous queue", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.queue = triage.QUEUES[0]
        self.items: dict[str, triage.QueueItem] = {}

    def compose(self) -> ComposeResult:
        yield Header()
        yield Tabs(*[Tab(QUEUE_TITLES[q], id=q) for q in triage.QUEUES], id="queues")
        yield DataTable(id="triage", cursor_type="row", zebra_stripes=True)
        yield Static(id="triage-detail")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#triage", DataTable)
        for col in COLUMNS:
            table.add_column(col, key=col)
        table.focus()

    def load(self) -> None:
        self._fetch(self.queue)

    @work(thread=True, exclusive=True, group="triage")
    def _fetch(self, queue: str) -> None:
        with self.app.worker_reader() as conn:
            items = triage.queue_items(conn, queue)
        self.deliver(self._show, queue, items)

    def _show(self, queue: str, items: list[triage.QueueItem]) -> None:
        if queue != self.queue:
            return
        table = self.query_one("#triage", DataTable)
        self.items = {str(i.episode_id): i for i in items}
        sync_rows(table, [(str(i.episode_id), item_cells(i)) for i in items])
        self._detail()
        self.mark_loaded()

    @on(Tabs.TabActivated, "#queues")
    def _queue_changed(self, event: Tabs.TabActivated) -> None:
        event.stop()
        queue = event.tab.id or triage.QUEUES[0]
        if queue != self.queue:
            self.queue = queue
            self.items = {}
            self.query_one("#triage", DataTable).clear()
            self.load()

    @on(DataTable.RowHighlighted, "#triage")
    def _row(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._detail()

    @on(DataTable.RowSelected, "#triage")
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def _current(self) -> triage.QueueItem | None:
        key = cursor_key(self.query_one("#triage", DataTable))
        return self.items.get(key) if key else None

    def _detail(self) -> None:
        item = self._current()
        detail = self.query_one("#triage-detail", Static)
        if item is None:
            detail.update(Text("this queue is empty", style="dim"))
            return
        text = Text.assemble(
            (f"episode {item.episode_id}", "bold"), "  ", label_text(item.label), "  ",
            verdict_text(item), "\n",
            safe_text(item.task_id, 120), ("  agent ", "dim"), safe_text(item.agent, 60),
            ("  mode ", "dim"), item.mode, ("  fault ", "dim"), item.fault_family, "\n",
        )  # fmt: skip
        for reason in item.reasons:
            text.append("• ")
            text.append_text(safe_text(reason, 400))
            text.append("\n")
        if item.note:
            text.append("note: ", style="dim")
            text.append_text(safe_text(item.note, 1000))
        detail.update(text)

    def action_queue(self, step: int) -> None:
        tabs = self.query_one("#queues", Tabs)
        index = (triage.QUEUES.index(self.queue) + step) % len(triage.QUEUES)
        tabs.active = triage.QUEUES[index]

    def action_label(self, label: str) -> None:
        item = self._current()
        if item is None:
            return
        triage.set_label(self.app.writer, item.episode_id, self.queue, label)
        self._update_item(item, label=label, note=item.note)
        table = self.query_one("#triage", DataTable)
        if table.cursor_row < table.row_count - 1:
            table.move_cursor(row=table.cursor_row + 1)

    def action_note(self) -> None:
        item = self._current()
        if item is None:
            return

        def save(note: str | None) -> None:
            if note is None:
                return
            triage.set_note(self.app.writer, item.episode_id, self.queue, note)
            self._update_item(item, label=item.label or "needs_look", note=note)

        self.app.push_screen(NoteScreen(f"Note for episode {item.episode_id}", item.note), save)

    def _update_item(self, item: triage.QueueItem, label: str, note: str) -> None:
        key = str(item.episode_id)
        self.items[key] = replace(item, label=label, note=note)
        table = self.query_one("#triage", DataTable)
        table.update_cell(key, "label", label_text(label))
        table.update_cell(key, "note", one_line(note, 24))
        self._detail()

    def action_open(self) -> None:
        item = self._current()
        if item is not None:
            context = tuple(int(k) for k in self.items)
            self.post_message(OpenEpisode(item.episode_id, context=context))
