"""Tasks: every task with W, N, D, its pass rate and status (the report's figures, through
App.report) and its run count; filter by dataset, status, numbers and words; sort by any
column."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import DataTable, Footer, Header, Input, Select, Static

from depthtui.screens.base import DataScreen
from depthtui.screens.figures import TaskLine, task_lines
from depthtui.screens.format import cursor_key, move_to_key, num, pct, sync_rows
from depthtui.widgets.fit import Col, fit_table
from depthtui.widgets.messages import Launch, OpenTask
from depthtui.widgets.sanitize import one_line
from store import views

COLUMNS = (
    ("id", "task"),
    ("dataset", "dataset"),
    ("segments", "segs"),
    ("work", "W"),
    ("n", "N"),
    ("d", "D"),
    ("runs", "runs"),
    ("pass", "pass rate"),
    ("status", "status"),
)
# A narrow terminal: dataset gives way first, then the task id, which keeps 24 cells; then the
# dataset leaves the table (the task id starts with it) (issue 29).
FITS = {
    "id": Col("id", "task", floor=24, cap=48, order=2),
    "dataset": Col("dataset", "dataset", floor=8, cap=20, order=1, drop=True),
}
COLS = tuple(FITS.get(key, Col(key, label)) for key, label in COLUMNS)
STATUSES = ("running", "measuring", "measured", "no pass", "unmeasured", "invalid")
STATUS_STYLE = {
    "running": "bold cyan",
    "measuring": "cyan",
    "measured": "green",
    "no pass": "yellow",
    "unmeasured": "dim",
    "invalid": "bold red",
}
_NUMERIC = re.compile(r"^(d|n|w|runs|segs)(<=|>=|!=|=|<|>)(.*)$", re.IGNORECASE)
_OPS: dict[str, Callable[[int, int], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "!=": operator.ne,
    "=": operator.eq,
    "<": operator.lt,
    ">": operator.gt,
}
_FIELDS: dict[str, Callable[[TaskLine], int | None]] = {
    "d": lambda r: r.d,
    "n": lambda r: r.n,
    "w": lambda r: r.work,
    "runs": lambda r: r.runs,
    "segs": lambda r: r.segments,
}


class FilterError(ValueError):
    pass


@dataclass(frozen=True)
class TaskFilter:
    """`d<=3 w>10 csv` style: number tests on D, N, W, runs, segs; other words match id or name."""

    words: tuple[str, ...] = ()
    tests: tuple[tuple[str, str, int], ...] = ()
    dataset: str | None = None
    status: str | None = None

    @classmethod
    def parse(cls, text: str, dataset: str | None = None, status: str | None = None) -> TaskFilter:
        words, tests = [], []
        for token in text.split():
            m = _NUMERIC.match(token)
            if m is None:
                words.append(token.lower())
                continue
            field, op, value = m.group(1).lower(), m.group(2), m.group(3)
            if not value.isdigit():
                raise FilterError(f"filter '{token}': expected a whole number after '{field}{op}'")
            tests.append((field, op, int(value)))
        return cls(tuple(words), tuple(tests), dataset, status)

    def __call__(self, row: TaskLine) -> bool:
        if self.dataset is not None and row.dataset != self.dataset:
            return False
        if self.status is not None and row.status != self.status:
            return False
        for field, op, value in self.tests:
            have = _FIELDS[field](row)
            if have is None or not _OPS[op](have, value):
                return False
        haystack = f"{row.id} {row.name}".lower()
        return all(w in haystack for w in self.words)


def _sort_value(row: TaskLine, key: str) -> tuple:
    value = {
        "id": row.id,
        "dataset": row.dataset,
        "segments": row.segments,
        "work": row.work,
        "n": row.n,
        "d": row.d,
        "runs": row.runs,
        "pass": row.pass_rate,
        "status": row.status,
    }[key]
    return (value is None, value if value is not None else 0)


def row_cells(r: TaskLine) -> list:
    return [
        one_line(r.id, 200),  # cut to the column's width by fit_table
        one_line(r.dataset, 200),
        str(r.segments),
        num(r.work),
        num(r.n),
        Text(views.depth_label(r.d), style="bold"),
        num(r.runs),
        pct(r.pass_rate),
        Text(r.status, style=STATUS_STYLE.get(r.status, "")),
    ]


class TasksScreen(DataScreen):
    uses_report = True

    BINDINGS = [
        Binding("enter", "open", "Open"),
        Binding("f", "focus_filter", "Filter"),
        Binding("s", "cycle_sort", "Sort"),
        Binding("S", "reverse_sort", "Reverse", show=False),
        Binding("r", "launch", "Run…"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._rows: list[TaskLine] = []
        self._datasets: list[str] = []
        self._pending_dataset: str | None = None
        self._filter = TaskFilter()
        self.sort_key = "id"
        self.reverse = False

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="task-filters"):
            yield Select([], prompt="all datasets", id="dataset-select")
            yield Select([(s, s) for s in STATUSES], prompt="any status", id="status-select")
            yield Input(placeholder="filter: words, d<=3, w>10, n<5, d>80", id="task-filter")
        yield Static(id="task-count")
        yield DataTable(id="tasks", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#tasks", DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        table.focus()

    def on_resize(self) -> None:
        if self._rows:
            self._rebuild()  # the columns fit the new width

    def show_dataset(self, dataset: str) -> None:
        """Filter to `dataset`: now if its tasks are loaded, else as soon as they are."""
        self._pending_dataset = dataset
        self._apply_pending_dataset()

    def _apply_pending_dataset(self) -> None:
        if self._pending_dataset in self._datasets:
            self.query_one("#dataset-select", Select).value = self._pending_dataset
            self._pending_dataset = None

    def load(self) -> None:
        self._fetch()

    @work(thread=True, exclusive=True, group="tasks")
    def _fetch(self) -> None:
        with self.app.worker_reader() as conn:
            counts = views.task_counts(conn)
        if self.app.cached_report() is None:  # show the tasks now, their figures when built
            self.deliver(self._refresh_rows, task_lines(None, counts))
        self.deliver(self._refresh_rows, task_lines(self.app.report(), counts))

    def _refresh_rows(self, rows: list[TaskLine]) -> None:
        first = not self._rows and not self.loaded.is_set()
        self._rows = rows
        datasets = sorted({r.dataset for r in rows})
        if datasets != self._datasets:
            self._datasets = datasets
            select = self.query_one("#dataset-select", Select)
            value = select.value
            select.set_options([(d, d) for d in datasets])
            if value in datasets:
                select.value = value
            self._apply_pending_dataset()
        if first:
            self._rebuild()
        else:
            visible = [r for r in rows if self._filter(r)]
            table = self.query_one("#tasks", DataTable)
            sync_rows(table, fit_table(table, COLS, [(r.id, row_cells(r)) for r in visible]))
            self._count(len(visible))
        self.mark_loaded()

    def visible_ids(self) -> list[str]:
        table = self.query_one("#tasks", DataTable)
        return [str(row.key.value) for row in table.ordered_rows]

    def _rebuild(self) -> None:
        """Filter and sort from scratch (a user action), keeping the cursor on its task."""
        table = self.query_one("#tasks", DataTable)
        key = cursor_key(table)
        shown = [r for r in self._rows if self._filter(r)]
        # what has no value (an unmeasured D, no N) goes last whichever way the sort runs
        measured = [r for r in shown if not _sort_value(r, self.sort_key)[0]]
        unmeasured = [r for r in shown if _sort_value(r, self.sort_key)[0]]
        visible = sorted(
            measured, key=lambda r: _sort_value(r, self.sort_key), reverse=self.reverse
        ) + sorted(unmeasured, key=lambda r: r.id)
        table.clear()
        for k, cells in fit_table(table, COLS, [(r.id, row_cells(r)) for r in visible]):
            table.add_row(*cells, key=k)
        move_to_key(table, key)
        self._count(len(visible))

    def _count(self, shown: int) -> None:
        arrow = "▼" if self.reverse else "▲"
        label = dict(COLUMNS)[self.sort_key]
        self.query_one("#task-count", Static).update(
            Text.assemble(
                (f"{shown:,}", "bold"),
                f" of {len(self._rows):,} tasks",
                ("  sorted by ", "dim"),
                (f"{label} {arrow}", "bold"),
            )
        )

    def _set_filter(self) -> None:
        dataset = self.query_one("#dataset-select", Select).value
        status = self.query_one("#status-select", Select).value
        text = self.query_one("#task-filter", Input).value
        try:
            self._filter = TaskFilter.parse(
                text,
                dataset if isinstance(dataset, str) else None,
                status if isinstance(status, str) else None,
            )
        except FilterError as exc:
            self.query_one("#task-count", Static).update(Text(str(exc), style="bold red"))
            return
        self._rebuild()

    @on(Select.Changed)
    def _select_changed(self, event: Select.Changed) -> None:
        event.stop()
        self._set_filter()

    @on(Input.Changed, "#task-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._set_filter()

    @on(Input.Submitted, "#task-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one("#tasks", DataTable).focus()

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        key = str(event.column_key.value)
        if key == self.sort_key:
            self.reverse = not self.reverse
        else:
            self.sort_key, self.reverse = key, False
        self._rebuild()

    @on(DataTable.RowSelected, "#tasks")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.post_message(OpenTask(str(event.row_key.value)))

    def action_open(self) -> None:
        key = cursor_key(self.query_one("#tasks", DataTable))
        if key:
            self.post_message(OpenTask(key))

    def action_focus_filter(self) -> None:
        self.query_one("#task-filter", Input).focus()

    def action_cycle_sort(self) -> None:
        keys = [k for k, _ in COLUMNS]
        self.sort_key = keys[(keys.index(self.sort_key) + 1) % len(keys)]
        self.reverse = False
        self._rebuild()

    def action_reverse_sort(self) -> None:
        self.reverse = not self.reverse
        self._rebuild()

    def action_launch(self) -> None:
        ids = self.visible_ids()
        if not ids:
            self.notify("no task matches the filter", severity="warning")
            return
        self.post_message(Launch(tuple(ids)))
