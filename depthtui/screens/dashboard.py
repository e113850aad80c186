"""Dashboard: datasets and counts, jobs in progress with live progress, headline figures."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Header, Static

from depthtui.screens.base import DataScreen
from depthtui.screens.format import cursor_key, job_progress, job_status, num, pct, sync_rows
from depthtui.widgets.plot import bar
from depthtui.widgets.sanitize import one_line
from store import jobs, views


def median_label(d: float | None) -> str:
    if d is None or d >= views.D_ABOVE_80:
        return views.depth_label(None if d is None else int(d))
    return f"{d:g}"


def headline_view(h: views.Headline) -> Group:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim")
    grid.add_column(style="bold")
    grid.add_row("tasks", f"{h.tasks:,}  ({h.measured:,} with a depth estimate)")
    grid.add_row("episodes", f"{h.episodes:,}  ({h.running:,} running)")
    grid.add_row("median D", median_label(h.median_d))
    grid.add_row("solved with D ≤ 3", pct(h.share_d_le_3))
    grid.add_row("safe success", f"{pct(h.safe_rate)}  ({h.safe:,}/{h.safe_runs:,} runs)")
    models = Table(box=None, header_style="dim", padding=(0, 1), expand=False)
    models.add_column("model")
    models.add_column("pass@1 (uncapped)")
    for col in ("runs", "errors", "safe"):
        models.add_column(col, justify="right")
    for m in h.models:
        rate = m.pass_rate
        models.add_row(
            one_line(m.model, 24),
            Text(bar(rate or 0.0, 12), style="green") + Text(f" {pct(rate)}"),
            num(m.runs),
            Text(num(m.errors), style="magenta" if m.errors else ""),
            pct(m.safe_rate),
        )
    return Group(grid, Text(""), models)


class DashboardScreen(DataScreen):
    """The first screen: what the store holds and what is running."""

    BINDINGS = [Binding("enter", "open", "Open", show=False)]

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="dash-top"):
            with Vertical(id="dash-datasets"):
                yield Static("Datasets", classes="section-title")
                yield DataTable(id="datasets", cursor_type="row", zebra_stripes=True)
            with Vertical(id="dash-headline"):
                yield Static("Headline figures", classes="section-title")
                yield Static(id="headline")
        yield Static("Jobs in progress", classes="section-title")
        yield DataTable(id="running-jobs", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        datasets = self.query_one("#datasets", DataTable)
        for key in ("dataset", "tasks", "episodes", "passed", "errors", "running"):
            datasets.add_column(key, key=key)
        table = self.query_one("#running-jobs", DataTable)
        for key in ("job", "kind", "status", "progress", "failed", "cost", "command"):
            table.add_column(key, key=key)

    def load(self) -> None:
        self._fetch()

    @work(thread=True, exclusive=True, group="dashboard")
    def _fetch(self) -> None:
        with self.app.worker_reader() as conn:
            data = (
                views.datasets(conn),
                views.headline(conn),
                jobs.list_jobs(conn, active_only=True),
            )
        self.app.call_from_thread(self._show, *data)

    def _show(
        self, datasets: list[views.DatasetCount], headline: views.Headline, active: list[jobs.Job]
    ) -> None:
        rows = [
            (d.dataset, [one_line(d.dataset, 40), num(d.tasks), num(d.episodes), num(d.passed),
                         Text(num(d.errors), style="magenta" if d.errors else ""), num(d.running)])
            for d in datasets
        ]  # fmt: skip
        sync_rows(self.query_one("#datasets", DataTable), rows)
        self.query_one("#headline", Static).update(headline_view(headline))
        rows = [
            (str(j.id), [f"#{j.id}", j.kind, job_status(j), job_progress(j),
                         num(j.progress_failed), f"${j.cost_usd:.2f}", one_line(j.cli, 60)])
            for j in active
        ]  # fmt: skip
        if not rows:
            rows = [
                ("none", ["", "", Text("no job queued or running", style="dim"), "", "", "", ""])
            ]
        sync_rows(self.query_one("#running-jobs", DataTable), rows)
        self.mark_loaded()

    def action_open(self) -> None:
        focused = self.focused
        if isinstance(focused, DataTable) and focused.id == "datasets":
            key = cursor_key(focused)
            if key:
                self.app.requested_dataset = key
                self.app.switch_mode("tasks")
        elif isinstance(focused, DataTable) and focused.id == "running-jobs":
            self.app.switch_mode("jobs")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()
