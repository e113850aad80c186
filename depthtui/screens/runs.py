"""Runs: every episode of the store (all tasks, modes and models) in one table, with the columns
the user picks (kept beside the store), sorting on any of them, triage's filter language, and
enter to the replay (H/L there walk the rows shown)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Header, Input, SelectionList, Static

from depthtui.screens.base import DataScreen
from depthtui.screens.format import cursor_key, move_to_key
from depthtui.widgets.messages import OpenEpisode
from depthtui.widgets.sanitize import one_line
from depthtui.widgets.turn_view import OUTCOME_STYLE
from store.run_views import RunRow, all_runs


@dataclass(frozen=True)
class Column:
    title: str
    cell: Callable[[RunRow], Any]
    value: Callable[[RunRow], Any]  # what it sorts on (None: no value, always last)


def _num(value: float | None, fmt: str) -> Text:
    return Text("–", style="dim") if value is None else Text(format(value, fmt), justify="right")


def _outcome(r: RunRow) -> Text:
    return Text(r.outcome, style=OUTCOME_STYLE.get(r.outcome, ""))


def _reward(r: RunRow) -> Text:
    # an infrastructure error is left out of every rate: its stored reward means nothing
    return _num(None if r.outcome == "error" else r.reward, "+.2f")


COLUMNS: dict[str, Column] = {
    "outcome": Column("outcome", _outcome, lambda r: r.outcome),
    "reward": Column("reward", _reward, lambda r: None if r.outcome == "error" else r.reward),
    "turns": Column("turns", lambda r: _num(r.turns, "d"), lambda r: r.turns),
    "cap": Column("cap", lambda r: _num(r.cap, "d"), lambda r: r.cap),
    "budget": Column("budget", lambda r: _num(r.budget, "d"), lambda r: r.budget),
    "fault": Column("fault", lambda r: one_line(r.fault, 16), lambda r: r.fault),
    "collateral": Column(
        "collateral",
        lambda r: Text("■ yes", style="bold red") if r.collateral else Text("no", style="dim"),
        lambda r: r.collateral,
    ),
    "cost": Column("cost $", lambda r: _num(r.cost_usd, ".4f"), lambda r: r.cost_usd),
    "duration": Column("duration s", lambda r: _num(r.duration_s, ".1f"), lambda r: r.duration_s),
    "model": Column("model", lambda r: one_line(r.agent, 24), lambda r: r.agent),
    "prompt": Column("prompt", lambda r: one_line(r.prompt or "–", 16), lambda r: r.prompt or None),
    "job": Column("job", lambda r: _num(r.job_id, "d"), lambda r: r.job_id),
    "mode": Column("mode", lambda r: r.mode, lambda r: r.mode),
}
FIXED = ("episode", "task")  # always shown, first
DEFAULT_COLUMNS = ("outcome", "reward", "turns", "cap", "fault", "model", "mode")
FILTER_KEYS = {
    "model": lambda r: r.agent,
    "task": lambda r: r.task_id,
    "mode": lambda r: r.mode,
    "fault": lambda r: r.fault,
    "outcome": lambda r: r.outcome,
    "prompt": lambda r: r.prompt,
    "job": lambda r: "" if r.job_id is None else str(r.job_id),
}
HINT = (
    "filter: model:qwen task:demo mode:free fault:perm outcome:fail prompt:budget job:3 and "
    "words · s/S sort · c columns · enter: replay"
)


def matches(row: RunRow, query: str) -> bool:
    """Triage's filter language: `key:value` (a substring of that field) and bare words (in the
    task, model, outcome or mode); every part must match."""
    for part in query.lower().split():
        key, _, value = part.partition(":")
        if value and key in FILTER_KEYS:
            if value not in FILTER_KEYS[key](row).lower():
                return False
        elif part not in f"{row.task_id} {row.agent} {row.outcome} {row.mode}".lower():
            return False
    return True


def settings_path(db_path: Path) -> Path:
    """Where the Runs screen keeps its columns and sort: beside the store."""
    return db_path.with_name(db_path.name + ".tui.json")


def read_settings(db_path: Path) -> dict[str, Any]:
    try:
        data = json.loads(settings_path(db_path).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_settings(db_path: Path, **values: Any) -> None:
    data = {**read_settings(db_path), **values}
    try:
        settings_path(db_path).write_text(json.dumps(data, indent=2) + "\n")
    except OSError:
        pass  # a read-only folder: the choice holds for this session only


def sort_rows(rows: list[RunRow], key: str, reverse: bool) -> list[RunRow]:
    """Sorted on `key`; rows without a value last, whichever way."""
    value = (lambda r: r.id) if key == "episode" else (
        (lambda r: r.task_id) if key == "task" else COLUMNS[key].value
    )  # fmt: skip
    known = [r for r in rows if value(r) is not None]
    unknown = [r for r in rows if value(r) is None]
    return sorted(known, key=lambda r: (value(r), r.id), reverse=reverse) + unknown


class ColumnsScreen(ModalScreen[tuple[str, ...] | None]):
    """Pick the columns shown (space or enter toggles; esc keeps the choice)."""

    BINDINGS = [Binding("escape", "keep", "Keep")]

    def __init__(self, shown: tuple[str, ...]) -> None:
        super().__init__()
        self.shown = shown

    def compose(self) -> ComposeResult:
        with Vertical(id="columns-box"):
            yield Static(Text("Columns of the runs table", style="bold"))
            yield SelectionList[str](
                *[(COLUMNS[k].title, k, k in self.shown) for k in COLUMNS], id="columns-list"
            )
            yield Static(Text("space/enter: show or hide   esc: keep", style="dim"))

    def action_keep(self) -> None:
        chosen = set(self.query_one("#columns-list", SelectionList).selected)
        self.dismiss(tuple(k for k in COLUMNS if k in chosen))


class RunsScreen(DataScreen):
    watches = frozenset({"episodes"})
    BINDINGS = [
        Binding("enter", "open", "Replay", show=False),
        Binding("f", "focus_filter", "Filter"),
        Binding("s", "cycle_sort", "Sort"),
        Binding("S", "reverse_sort", "Reverse", show=False),
        Binding("c", "columns", "Columns"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[RunRow] = []
        self.query_text = ""
        self.columns: tuple[str, ...] = DEFAULT_COLUMNS
        self.sort_key = "episode"
        self.reverse = True  # newest first
        self._shown_columns: tuple[str, ...] | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(placeholder=HINT, id="runs-filter")
        yield Static(id="runs-count")
        yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        kept = read_settings(self.app.db_path)
        columns = kept.get("runs_columns")
        if isinstance(columns, list):
            self.columns = tuple(c for c in COLUMNS if c in columns)
        if kept.get("runs_sort") in (*FIXED, *COLUMNS):
            self.sort_key = kept["runs_sort"]
            self.reverse = bool(kept.get("runs_reverse", False))
        self.query_one("#runs", DataTable).focus()

    def load(self) -> None:
        self._fetch()

    @work(thread=True, exclusive=True, group="runs")
    def _fetch(self) -> None:
        with self.app.worker_reader() as conn:
            rows = all_runs(conn)
        self.deliver(self._show, rows)

    def _show(self, rows: list[RunRow]) -> None:
        self.rows = rows
        self._rebuild()
        self.mark_loaded()

    def visible(self) -> list[RunRow]:
        shown = [r for r in self.rows if matches(r, self.query_text)]
        return sort_rows(shown, self.sort_key, self.reverse)

    def visible_ids(self) -> list[int]:
        return [int(str(k.value)) for k in self.query_one("#runs", DataTable).rows]

    def _rebuild(self) -> None:
        table = self.query_one("#runs", DataTable)
        key = cursor_key(table)
        if self._shown_columns != self.columns:
            table.clear(columns=True)
            for name in FIXED:
                table.add_column(name, key=name)
            for name in self.columns:
                table.add_column(COLUMNS[name].title, key=name)
            self._shown_columns = self.columns
        else:
            table.clear()
        visible = self.visible()
        for r in visible:  # (a table draws only the rows on screen: thousands are cheap)
            cells = [Text(str(r.id), justify="right"), one_line(r.task_id, 40)]
            table.add_row(*cells, *[COLUMNS[c].cell(r) for c in self.columns], key=str(r.id))
        move_to_key(table, key)
        sort_title = "episode" if self.sort_key == "episode" else (
            "task" if self.sort_key == "task" else COLUMNS[self.sort_key].title
        )  # fmt: skip
        self.query_one("#runs-count", Static).update(
            Text.assemble(
                (f"{len(visible)} of {len(self.rows)} runs", "bold"),
                ("  sorted by ", "dim"),
                sort_title,
                (" (descending)" if self.reverse else "", "dim"),
            )
        )

    def _keep(self) -> None:
        write_settings(
            self.app.db_path,
            runs_columns=list(self.columns),
            runs_sort=self.sort_key,
            runs_reverse=self.reverse,
        )

    # ------------------------------------------------------------------ events

    @on(Input.Changed, "#runs-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.query_text = event.value
        self._rebuild()

    @on(Input.Submitted, "#runs-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one("#runs", DataTable).focus()

    @on(DataTable.HeaderSelected, "#runs")
    def _header(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        key = str(event.column_key.value)
        if key == self.sort_key:
            self.reverse = not self.reverse
        else:
            self.sort_key, self.reverse = key, False
        self._keep()
        self._rebuild()

    @on(DataTable.RowSelected, "#runs")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_open(self) -> None:
        key = cursor_key(self.query_one("#runs", DataTable))
        if key:
            self.post_message(OpenEpisode(int(key), context=tuple(self.visible_ids())))

    def action_focus_filter(self) -> None:
        self.query_one("#runs-filter", Input).focus()

    def action_cycle_sort(self) -> None:
        keys = [*FIXED, *self.columns]
        at = keys.index(self.sort_key) if self.sort_key in keys else -1
        self.sort_key, self.reverse = keys[(at + 1) % len(keys)], False
        self._keep()
        self._rebuild()

    def action_reverse_sort(self) -> None:
        self.reverse = not self.reverse
        self._keep()
        self._rebuild()

    def action_columns(self) -> None:
        def chosen(columns: tuple[str, ...] | None) -> None:
            if columns is None:
                return
            self.columns = columns
            if self.sort_key not in (*FIXED, *columns):
                self.sort_key, self.reverse = "episode", True
            self._keep()
            self._rebuild()

        self.app.push_screen(ColumnsScreen(self.columns), chosen)
