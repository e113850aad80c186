"""Triage: the collateral-damage queue and the suspected-false-positive queue, with labels and
notes that are stored (store/triage.py) and exported by `depthtui triage export`."""

from __future__ import annotations

import time
from dataclasses import replace

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header, Input, Static, Tab, Tabs

from depthtui.screens.base import DataScreen
from depthtui.screens.filter_query import query_matches
from depthtui.screens.format import cursor_key, sync_rows
from depthtui.screens.note import NoteScreen
from depthtui.widgets.fit import Col, fit_table
from depthtui.widgets.messages import OpenEpisode
from depthtui.widgets.sanitize import one_line, safe_text
from depthtui.widgets.turn_view import OUTCOME_STYLE
from store import triage

QUEUE_TITLES = {"collateral": "Collateral damage", "false_positive": "Suspected false positives"}
LABEL_STYLE = {"real": "bold red", "false_positive": "bold green", "needs_look": "bold yellow"}
LABEL_TEXT = {"real": "real", "false_positive": "false positive", "needs_look": "needs a look"}
# Most telling first: what a narrow terminal cuts off on the right is repeated below the table.
COLUMNS = ("episode", "label", "verdict", "why", "fault", "task", "agent", "note")
# What lands in each queue: said when it is empty, so an empty queue is not a mystery.
QUEUE_HOLDS = {
    "collateral": "episodes whose oracle latched collateral damage: a change outside the "
    "task's permitted changes (a planted personal file touched, an input replaced)",
    "false_positive": "episodes whose verdict is suspect: tests passed while the fault was not "
    "cleared, a task whose grader accepts mutated output (its contract says so), graded outputs "
    "that differ from the reference's (differential), a judge's reward-hacking finding "
    "(judge_analyze: the judge's words), or a replay that disagrees with the recorded verdict",
}
# Fitting a narrow terminal (depthtui/widgets/fit.py): why, then note, then fault give way; task
# and agent last, never below 24 and 12 cells; then note and fault leave the table (the detail
# pane below shows both). The label column holds its longest word.
COLS = (
    Col("episode", "episode"),
    Col("label", "label", floor=max(len(t) for t in LABEL_TEXT.values())),
    Col("verdict", "verdict"),
    Col("why", "why", floor=10, cap=120, order=1),
    Col("fault", "fault", floor=8, cap=16, order=3, drop=True),
    Col("task", "task", floor=24, cap=48, order=4),
    Col("agent", "agent", floor=12, cap=24, order=5),
    Col("note", "note", floor=12, cap=40, order=2, drop=True),
)
FILTER_KEYS = ("label", "model", "fault", "task")


def matches(item: triage.QueueItem, query: str) -> bool:
    """`label:real model:qwen fault:perm task:demo` (each a substring) and bare words (in the
    reasons, the task or the note); every part must match."""
    fields = {
        "label": LABEL_TEXT.get(item.label or "", "unlabelled"),
        "model": item.agent,
        "fault": item.fault_family,
        "task": item.task_id,
    }
    return query_matches(fields, " ".join((*item.reasons, item.task_id, item.note)), query)


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
    why = one_line(item.reasons[0], 200)  # every cell is cut to its column's width by fit_table
    if len(item.reasons) > 1:
        why.append(f" +{len(item.reasons) - 1}", style="dim")
    return [
        str(item.episode_id),
        label_text(item.label),
        verdict_text(item),
        why,
        item.fault_family,
        one_line(item.task_id, 200),
        one_line(item.agent, 200),
        one_line(item.note, 200),
    ]


class TriageScreen(DataScreen):
    BINDINGS = [
        Binding("r", "label('real')", "Real"),
        Binding("p", "label('false_positive')", "False positive"),
        Binding("w", "label('needs_look')", "Needs a look"),
        Binding("e", "note", "Note"),
        Binding("f", "focus_filter", "Filter"),
        Binding("x", "export", "Export labels"),
        Binding("enter", "open", "Open"),
        Binding("right_square_bracket", "queue(1)", "Next queue", show=False),
        Binding("left_square_bracket", "queue(-1)", "Previous queue", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.queue = triage.QUEUES[0]
        self.items: dict[str, triage.QueueItem] = {}
        self.all_items: list[triage.QueueItem] = []
        self.filter = ""

    def compose(self) -> ComposeResult:
        yield Header()
        yield Tabs(*[Tab(QUEUE_TITLES[q], id=q) for q in triage.QUEUES], id="queues")
        yield Input(
            placeholder="filter: label:real model:NAME fault:FAMILY task:ID, or words",
            id="triage-filter",
            compact=True,
        )
        yield Static(id="triage-counts")
        yield DataTable(id="triage", cursor_type="row", zebra_stripes=True)
        yield Static(id="triage-detail")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#triage", DataTable)
        for col in COLUMNS:
            table.add_column(col, key=col)
        table.focus()

    def on_resize(self) -> None:
        if self.all_items:
            self._filter_rows()  # the columns fit the new width

    def load(self) -> None:
        self._fetch(self.queue)

    @work(thread=True, exclusive=True, group="triage")
    def _fetch(self, queue: str) -> None:
        with self.app.worker_reader() as conn:
            queues = {q: triage.queue_items(conn, q) for q in triage.QUEUES}
        self.deliver(self._show, queue, queues)

    def _show(self, queue: str, queues: dict[str, list[triage.QueueItem]]) -> None:
        if queue != self.queue:
            return
        tabs = self.query_one("#queues", Tabs)
        for q, items in queues.items():
            open_ = sum(1 for i in items if i.label is None)
            tab = tabs.query_one(f"#{q}", Tab)
            tab.label = f"{QUEUE_TITLES[q]} ({len(items)}, {open_} unlabelled)"
        self.all_items = queues[queue]
        self._filter_rows()
        self.mark_loaded()

    def _filter_rows(self) -> None:
        items = [i for i in self.all_items if matches(i, self.filter)]
        table = self.query_one("#triage", DataTable)
        self.items = {str(i.episode_id): i for i in items}
        sync_rows(
            table, fit_table(table, COLS, [(str(i.episode_id), item_cells(i)) for i in items])
        )
        counts: dict[str, int] = {}
        for i in items:
            key = LABEL_TEXT.get(i.label or "", "unlabelled")
            counts[key] = counts.get(key, 0) + 1
        shown = f"{len(items)} of {len(self.all_items)}" if self.filter else f"{len(items)}"
        by_label = "  ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        families: dict[str, int] = {}
        for i in items:
            families[i.fault_family] = families.get(i.fault_family, 0) + 1
        by_fault = "  ".join(f"{k} {v}" for k, v in sorted(families.items()))
        self.query_one("#triage-counts", Static).update(
            Text.assemble(
                (shown, "bold"), " episodes   ", (by_label, ""), ("   fault: ", "dim"), by_fault
            )
            if items
            else Text("")
        )
        self._detail()

    @on(Input.Changed, "#triage-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.filter = event.value.strip()
        self._filter_rows()

    @on(Input.Submitted, "#triage-filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one("#triage", DataTable).focus()

    def action_focus_filter(self) -> None:
        self.query_one("#triage-filter", Input).focus()

    def action_export(self) -> None:
        """The labels with their reasons and paths (what `depthtui triage export` writes), to
        a file beside the store."""
        rows = triage.export_rows(self.app.conn)
        if not rows:
            self.notify("no label to export yet: r, p or w label an episode", severity="warning")
            return
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = self.app.db_path.parent / f"triage-labels-{stamp}.json"
        try:
            path.write_text(triage.render_export(rows, "json"))
        except OSError as exc:
            self.notify(f"{path}: cannot write the export ({exc.strerror})", severity="error")
            return
        self.notify(f"wrote {len(rows)} label(s) to {path}", timeout=10)

    @on(Tabs.TabActivated, "#queues")
    def _queue_changed(self, event: Tabs.TabActivated) -> None:
        event.stop()
        queue = event.tab.id or triage.QUEUES[0]
        if queue != self.queue:
            self.queue = queue
            self.items, self.all_items = {}, []
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
            if self.all_items and self.filter:
                detail.update(Text(f"nothing matches '{self.filter}'", style="dim"))
            else:
                detail.update(
                    Text(f"This queue is empty. It holds {QUEUE_HOLDS[self.queue]}.", style="dim")
                )
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
            if not item.label:  # a stored note needs a label: say which it got, not silently
                self.notify(
                    f"note kept; episode {item.episode_id} is labelled "
                    f"'{LABEL_TEXT['needs_look']}' until you label it (r real, p false "
                    "positive, w needs a look)",
                    timeout=8,
                )

        self.app.push_screen(NoteScreen(f"Note for episode {item.episode_id}", item.note), save)

    def _update_item(self, item: triage.QueueItem, label: str, note: str) -> None:
        key = str(item.episode_id)
        self.items[key] = replace(item, label=label, note=note)
        self.all_items = [self.items[key] if i.episode_id == item.episode_id else i
                          for i in self.all_items]  # fmt: skip
        # the columns fit what they now hold ("needs a look", not "needs a lo"; the new note)
        self._filter_rows()

    def action_open(self) -> None:
        item = self._current()
        if item is not None:
            context = tuple(int(k) for k in self.items)
            self.post_message(OpenEpisode(item.episode_id, context=context))
