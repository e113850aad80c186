"""Runs: every episode in one table (all tasks, modes, models), with the columns the user picks
(kept in depthtui/prefs.py's file), sorting on any column with unmeasured values last, triage's
filter language, and ⏎ to the replay.

The rows come from one query (store/run_views.py) in a worker; filtering and sorting happen on
those rows in memory, and the table is rebuilt only when what it shows changed (a commit that
touches no episode leaves it alone).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Header, Input, SelectionList, Static

from depthtui.prefs import PrefsError, load_section, save_section
from depthtui.screens.base import DataScreen
from depthtui.screens.filter_query import query_matches
from depthtui.widgets.messages import OpenEpisode
from depthtui.widgets.sanitize import sanitize
from depthtui.widgets.turn_view import OUTCOME_STYLE
from depthtui.widgets.virtual_table import Cell, VColumn, VirtualTable
from store.run_views import RunRow, run_rows

PREFS_SECTION = "runs"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def _plain(text: str) -> str:
    """Recorded text (task ids, model names, prompt arms) as one inert line."""
    return sanitize(text.split("\n", 1)[0], keep_sgr=False)


def _or_dash(value: Any, show: Callable[[Any], str]) -> Cell:
    return ("–", "dim") if value is None else (show(value), "")


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    value: Callable[[RunRow], Any]  # what it sorts by; None = not measured (sorted last)
    cell: Callable[[RunRow], Cell]  # (text, style)
    most: int = 12  # the widest it gets (longer text is cut with …)
    right: bool = False


def _collateral(r: RunRow) -> Cell:
    if r.collateral is None:
        return ("–", "dim")
    return ("yes", "bold red") if r.collateral else ("no", "dim")


# The order here is the order on screen. "#" (the episode) is always shown.
COLUMNS: tuple[Column, ...] = (
    Column("task", "task", lambda r: r.task_id.lower(), lambda r: (_plain(r.task_id), ""), 36),
    Column("mode", "mode", lambda r: r.mode, lambda r: (_plain(r.mode), ""), 9),
    Column("model", "model", lambda r: r.agent.lower(), lambda r: (_plain(r.agent), ""), 22),
    Column("arm", "prompt arm", lambda r: r.prompt_arm.lower() or None,
           lambda r: (_plain(r.prompt_arm), "") if r.prompt_arm else ("–", "dim"), 18),
    Column("outcome", "outcome", lambda r: r.outcome,
           lambda r: (r.outcome, OUTCOME_STYLE.get(r.outcome, "")), 11),
    Column("reward", "reward", lambda r: r.reward,
           lambda r: _or_dash(r.reward, lambda v: f"{v:+.2f}"), right=True),
    Column("turns", "turns", lambda r: r.turns, lambda r: (str(r.turns), ""), right=True),
    Column("cap", "cap", lambda r: r.cap, lambda r: _or_dash(r.cap, str), right=True),
    Column("budget", "budget", lambda r: r.budget, lambda r: _or_dash(r.budget, str), right=True),
    Column("fault", "fault", lambda r: r.fault,
           lambda r: (_plain(r.fault), "dim" if r.fault == "clean" else ""), 16),
    Column("collateral", "collateral", lambda r: r.collateral, _collateral),
    Column("cost", "cost", lambda r: r.cost_usd,
           lambda r: _or_dash(r.cost_usd, lambda v: f"${v:.4f}"), right=True),
    Column("duration", "duration", lambda r: r.duration_s,
           lambda r: _or_dash(r.duration_s, _duration), right=True),
    Column("job", "job", lambda r: r.job_id, lambda r: _or_dash(r.job_id, lambda v: f"#{v}"),
           right=True),
)  # fmt: skip
BY_KEY = {c.key: c for c in COLUMNS}
ID_COLUMN = Column("#", "#", lambda r: r.episode_id, lambda r: (str(r.episode_id), ""), 9, True)
ALL_COLUMNS = (ID_COLUMN, *COLUMNS)
DEFAULT_COLUMNS = ("task", "mode", "model", "outcome", "reward", "turns", "cap", "fault",
                   "collateral", "duration")  # fmt: skip
FILTER_KEYS = ("task", "model", "mode", "outcome", "fault", "arm", "job")


def matches(row: RunRow, query: str) -> bool:
    """Triage's filter language (depthtui/screens/filter_query.py) on a run: `model:qwen
    outcome:fail fault:perm task:demo mode:ladder arm:terse job:12`, and bare words."""
    fields = {
        "task": row.task_id,
        "model": row.agent,
        "mode": row.mode,
        "outcome": row.outcome,
        "fault": row.fault,
        "arm": row.prompt_arm,
        "job": "" if row.job_id is None else str(row.job_id),
    }
    text = " ".join((row.task_id, row.agent, row.mode, row.outcome, row.fault, row.prompt_arm))
    return query_matches(fields, text, query)


def sort_rows(rows: list[RunRow], column: Column, descending: bool) -> list[RunRow]:
    """Sorted by `column`; rows it has no value for come last whichever the direction (ties keep
    their order: newest episode first)."""
    measured = [r for r in rows if column.value(r) is not None]
    missing = [r for r in rows if column.value(r) is None]
    measured.sort(key=column.value, reverse=descending)
    return measured + missing


class ColumnsScreen(ModalScreen[list[str] | None]):
    """Pick the Runs table's columns (space or ⏎ toggles; esc keeps the choice)."""

    BINDINGS = [Binding("escape", "done", "Done"), Binding("c", "done", "Done", show=False)]

    def __init__(self, shown: tuple[str, ...]) -> None:
        super().__init__()
        self.shown = shown

    def compose(self) -> ComposeResult:
        with Vertical(id="runs-columns-box"):
            yield Static("Columns of the Runs table", classes="title")
            yield SelectionList[str](
                *[(c.title, c.key, c.key in self.shown) for c in COLUMNS], id="runs-columns"
            )
            yield Static("space or ⏎ toggles · esc keeps the choice", classes="hint")

    def on_mount(self) -> None:
        self.query_one(SelectionList).focus()

    def action_done(self) -> None:
        chosen = set(self.query_one(SelectionList).selected)
        self.dismiss([c.key for c in COLUMNS if c.key in chosen])


@dataclass(frozen=True)
class Loaded:
    """What the worker read and prepared: rows, every column's cell per row, column widths."""

    rows: list[RunRow]
    cells: dict[int, tuple[Cell, ...]]  # episode id -> a cell per ALL_COLUMNS
    widths: dict[str, int]


def prepare(rows: list[RunRow]) -> Loaded:
    """Cells and widths for every row, computed once per load (off the UI thread), so sorting
    and filtering only reorder ids and a column is as wide as its widest value."""
    cells = {r.episode_id: tuple(c.cell(r) for c in ALL_COLUMNS) for r in rows}
    widths = {}
    for i, c in enumerate(ALL_COLUMNS):
        longest = max((cell_len(cs[i][0]) for cs in cells.values()), default=1)
        widths[c.key] = min(max(longest, len(c.title) + 2), max(c.most, len(c.title) + 2))
    return Loaded(rows, cells, widths)


class RunsScreen(DataScreen):
    watches = frozenset({"episodes"})  # every column it shows is an episode's
    DEFAULT_CSS = """
    #runs { height: 1fr; }
    #runs-counts { padding: 0 1; height: auto; }
    ColumnsScreen { align: center middle; }
    #runs-columns-box {
        width: 44; height: auto; max-height: 90%; padding: 1 2;
        border: thick $accent; background: $surface;
    }
    #runs-columns { height: auto; max-height: 20; }
    """
    BINDINGS = [
        Binding("enter", "open", "Open"),
        Binding("f", "focus_filter", "Filter"),
        Binding("c", "columns", "Columns"),
        Binding("s", "sort_next", "Sort"),
        Binding("o", "reverse", "Reverse"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.data = Loaded([], {}, {})
        self.shown_ids: tuple[int, ...] = ()
        self.filter = ""
        self.columns: tuple[str, ...] = DEFAULT_COLUMNS
        self.sort_key = "#"
        self.descending = True
        self._shown_state: tuple | None = None  # what the table was last built from
        self._prefs_problem = ""
        try:
            saved = load_section(PREFS_SECTION)
        except PrefsError as exc:
            saved, self._prefs_problem = {}, str(exc)
        columns = saved.get("columns")
        if isinstance(columns, list):
            self.columns = tuple(c.key for c in COLUMNS if c.key in columns)
        if saved.get("sort") in (*BY_KEY, "#"):
            self.sort_key = saved["sort"]
            self.descending = bool(saved.get("descending", True))

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(
            placeholder="filter: model:NAME outcome:fail fault:FAMILY task:ID mode:M arm:A "
            "job:N, or words",
            id="runs-filter",
            compact=True,
        )
        yield Static(id="runs-counts")
        yield VirtualTable(id="runs")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#runs", VirtualTable).focus()
        if self._prefs_problem:
            self.notify(self._prefs_problem, severity="warning", timeout=10)

    def load(self) -> None:
        self._fetch()

    @work(thread=True, exclusive=True, group="runs")
    def _fetch(self) -> None:
        with self.app.worker_reader() as conn:
            rows = run_rows(conn)
        if rows == self.data.rows:  # a commit that changed no episode: nothing to redo
            self.deliver(self.mark_loaded)
            return
        self.deliver(self._show, prepare(rows))

    def _show(self, data: Loaded) -> None:
        self.data = data
        self._rebuild()
        self.mark_loaded()

    # ------------------------------------------------------------------ the table

    def _sort_column(self) -> Column:
        return BY_KEY.get(self.sort_key, ID_COLUMN)

    def column_titles(self) -> list[str]:
        return [ID_COLUMN.title, *(BY_KEY[k].title for k in self.columns)]

    def _rebuild(self) -> None:
        """Filter and sort the rows, and point the table at them (keeping the cursor on its
        episode); nothing when none of what it is built from changed."""
        state = (self.data, self.filter, self.columns, self.sort_key, self.descending)
        if state == self._shown_state:
            return
        self._shown_state = state
        current = self.current_episode()
        rows = self.data.rows
        if self.filter:
            rows = [r for r in rows if matches(r, self.filter)]
        rows = sort_rows(rows, self._sort_column(), self.descending)
        self.shown_ids = ids = tuple(r.episode_id for r in rows)
        picked = [ID_COLUMN, *(BY_KEY[k] for k in self.columns)]
        where = [ALL_COLUMNS.index(c) for c in picked]
        arrow = " ↓" if self.descending else " ↑"
        columns = [
            VColumn(
                c.key,
                c.title + (arrow if c.key == self.sort_key else ""),
                self.data.widths.get(c.key, len(c.title)) + (2 if c.key == self.sort_key else 0),
                c.right,
            )
            for c in picked
        ]
        cells = self.data.cells

        def row_cells(i: int) -> list[Cell]:
            mine = cells[ids[i]]
            return [mine[j] for j in where]

        table = self.query_one("#runs", VirtualTable)
        table.set_rows(columns, len(ids), row_cells)
        if current is not None and current in ids:
            table.move_to(ids.index(current))
        self._counts(len(ids))

    def _counts(self, shown: int) -> None:
        total = len(self.data.rows)
        said = f"{shown} of {total}" if self.filter else f"{total}"
        sort = self._sort_column()
        order = "descending" if self.descending else "ascending"
        text = Text.assemble((said, "bold"), " episodes", ("   sorted by ", "dim"), sort.title,
                             f" {order}", (" (unmeasured last)", "dim"))  # fmt: skip
        if self.filter and not shown:
            text.append(f"   nothing matches '{self.filter}'", style="yellow")
        self.query_one("#runs-counts", Static).update(text)

    def current_episode(self) -> int | None:
        table = self.query_one("#runs", VirtualTable)
        if not table.row_count or table.cursor_row >= len(self.shown_ids):
            return None
        return self.shown_ids[table.cursor_row]

    def _set(self, **changes: Any) -> None:
        """Change filter/columns/sort and rebuild."""
        for name, value in changes.items():
            setattr(self, name, value)
        self._rebuild()

    def _save(self) -> None:
        choice = {"columns": list(self.columns), "sort": self.sort_key,
                  "descending": self.descending}  # fmt: skip
        try:
            save_section(PREFS_SECTION, choice)
        except PrefsError as exc:
            self.notify(f"{exc}; the choice holds until the TUI quits", severity="warning")

    # ------------------------------------------------------------------ actions

    @on(Input.Changed, "#runs-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._set(filter=event.value.strip())

    @on(Input.Submitted, "#runs-filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one("#runs", VirtualTable).focus()

    @on(VirtualTable.Selected, "#runs")
    def _selected(self, event: VirtualTable.Selected) -> None:
        event.stop()
        self.action_open()

    @on(VirtualTable.HeaderClicked, "#runs")
    def _header(self, event: VirtualTable.HeaderClicked) -> None:
        """A click on a column's header sorts by it; a second click reverses the order."""
        event.stop()
        if event.key == self.sort_key:
            self.action_reverse()
        else:
            # numbers and the newest first; words from A
            first_down = event.key in ("#", "reward", "cost", "duration", "turns")
            self._set(sort_key=event.key, descending=first_down)
            self._save()

    def action_move(self, step: int) -> None:
        """j/k move the cursor (DataScreen's version knows only DataTable)."""
        focused = self.focused
        if isinstance(focused, VirtualTable):
            focused.action_cursor(step)
        else:
            super().action_move(step)

    def action_back(self) -> None:
        if isinstance(self.focused, Input):
            self.query_one("#runs", VirtualTable).focus()
            return
        super().action_back()

    def action_focus_filter(self) -> None:
        self.query_one("#runs-filter", Input).focus()

    def action_open(self) -> None:
        episode = self.current_episode()
        if episode is not None:
            self.post_message(OpenEpisode(episode, context=self.shown_ids))

    def action_sort_next(self) -> None:
        keys = ["#", *self.columns]
        at = keys.index(self.sort_key) if self.sort_key in keys else 0
        self._set(sort_key=keys[(at + 1) % len(keys)])
        self._save()

    def action_reverse(self) -> None:
        self._set(descending=not self.descending)
        self._save()

    def action_columns(self) -> None:
        def chosen(columns: list[str] | None) -> None:
            if columns is None or tuple(columns) == self.columns:
                return
            sort_key = self.sort_key if self.sort_key in ("#", *columns) else "#"
            self._set(columns=tuple(columns), sort_key=sort_key)
            self._save()

        self.app.push_screen(ColumnsScreen(self.columns), chosen)
