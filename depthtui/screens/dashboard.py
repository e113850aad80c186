"""Dashboard: the report's headline figures, pass@1 and safe success per model, datasets and
counts, and the jobs in progress with live progress.

Every figure is `depthtui report`'s (build_report through `App.report`; at start-up the headline
first from build_headline, the report's quick part); the store adds only counts of episodes,
errors and running work.
"""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import DataTable, Footer, Header, Static

from depthtui.screens.base import DataScreen
from depthtui.screens.figures import Report, fmt, headline_safety, rate_text, shown
from depthtui.screens.format import cursor_key, job_progress, job_status, num, sync_rows
from depthtui.widgets.messages import OpenDataset
from depthtui.widgets.plot import bar
from depthtui.widgets.sanitize import one_line
from engine.analysis.palette import model_colours
from engine.analysis.report import build_headline, cost_text
from store import jobs, views


def headline_view(report: Report, episodes: int, running: int) -> Table:
    """The report's headline sentence as a table (same figures, same rounding)."""
    h = report["headline"]
    tasks = len(report["tasks"])
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim")
    grid.add_column()
    state = (
        Text("finished", style="green")
        if report["finished"]
        else Text("not finished (rerun to resume)", style="yellow")
        if h["measured"]
        else Text("nothing measured yet", style="dim")
    )
    grid.add_row("tasks", Text.assemble((f"{tasks:,}", "bold"), f"  ({h['measured']:,} measured)"))
    grid.add_row("measurement", state)
    grid.add_row(
        "solved",
        Text.assemble(
            (f"{h['solved']:,}", "bold"), f" of {h['measured']:,}; ",
            (f"{h['solved_D_le_3']:,}", "bold"), " within 3 turns (share ",
            (fmt(h["share_D_le_3"]), "bold"), ")",
        ),
    )  # fmt: skip
    grid.add_row(
        "median D",
        Text.assemble(
            (shown(h["median_D_display"]), "bold"),
            ("   median W ", "dim"),
            (fmt(h["median_W"], 1), "bold"),
        ),
    )
    grid.add_row(
        "ρ(D, pass | W)",
        Text.assemble(
            (fmt(h["rank_partial_corr_D_passrate_given_W"]), "bold"),
            f" over {h['rank_partial_corr_tasks']} task(s)",
        ),
    )
    checks = report["checks"]
    if checks:
        good = sum(1 for c in checks if c["ok"])
        grid.add_row("check", Text.assemble((f"{good}/{len(checks)}", "bold"), " check out"))
    grid.add_row("episodes", f"{episodes:,}  ({running:,} running)")
    return grid


def models_view(report: Report) -> RenderableType:
    if not report["models"]:
        return Text("no run without a stated cap yet", style="dim")
    table = Table(box=None, header_style="dim", padding=(0, 1), expand=False)
    table.add_column("model", overflow="fold", min_width=8)
    table.add_column("pass@1", no_wrap=True)
    for col in ("tasks", "runs", "errors", "cost"):
        table.add_column(col, justify="right")
    colours = model_colours(report)  # as in the report's plots
    for m in report["models"]:
        rate = m["pass_at_1"]
        table.add_row(
            one_line(m["model"], 60),
            Text(bar(rate or 0.0, 10), style=colours[m["model"]]) + Text(f" {fmt(rate)}"),
            num(m["tasks"]),
            num(m["episodes"]),
            Text(num(m["errors"]), style="magenta" if m["errors"] else ""),
            cost_text(m["cost_usd"]),
        )
    return table


def safety_view(rows: list[dict[str, Any]]) -> RenderableType:
    if not rows:
        return Text("no fault episode yet", style="dim")
    table = Table(box=None, header_style="dim", padding=(0, 1), expand=False)
    # Names fold onto a second line rather than end in "…": two models that share a prefix
    # stay apart on a narrow terminal; the figures never wrap.
    for col, key in (("model", "model"), ("prompt", "prompt"), ("fault", "fault")):
        longest = max(len(w) for r in rows for w in str(r[key]).split() or [""])
        table.add_column(col, overflow="fold", min_width=min(max(6, longest), 16))
    table.add_column("runs", justify="right", no_wrap=True)
    for col in ("safe success", "collateral", "fault cleared"):
        table.add_column(col, no_wrap=True)
    for s in rows:
        table.add_row(
            one_line(s["model"], 60),
            one_line(s["prompt"], 40),
            s["fault"],
            num(s["episodes"]),
            rate_text(s["safe_success"]),
            rate_text(s["collateral"]),
            rate_text(s["fault_cleared"]),
        )
    return table


class DashboardScreen(DataScreen):
    """The first screen: what the store holds, what it says, and what is running."""

    uses_report = True

    BINDINGS = [Binding("enter", "open", "Open", show=False)]

    def __init__(self) -> None:
        super().__init__()
        self._datasets: list[views.DatasetCount] = []
        self._report: Report | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="dashboard"):
            with Horizontal(id="dash-top", classes="dash-row"):
                with Vertical(id="dash-headline", classes="dash-cell"):
                    yield Static("Headline figures (as depthtui report)", classes="section-title")
                    yield Static(id="headline")
                with Vertical(id="dash-datasets", classes="dash-cell"):
                    yield Static("Datasets", classes="section-title")
                    yield DataTable(id="datasets", cursor_type="row", zebra_stripes=True)
            yield Static("pass@1 per model (runs without a stated cap)", classes="section-title")
            yield Static(id="models")
            yield Static(
                "Safe success per model and prompt (fault episodes, 95% intervals)",
                classes="section-title",
            )
            yield Static(id="safety")
            yield Static("Jobs in progress", classes="section-title")
            yield DataTable(id="running-jobs", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        datasets = self.query_one("#datasets", DataTable)
        for key, label in (
            ("dataset", "dataset"),
            ("tasks", "tasks"),
            ("measured", "measured"),
            ("median_d", "median D"),
            ("episodes", "episodes"),
            ("errors", "errors"),
        ):
            datasets.add_column(label, key=key)
        table = self.query_one("#running-jobs", DataTable)
        for key in ("job", "kind", "status", "progress", "failed", "cost", "command"):
            table.add_column(key, key=key)

    def load(self) -> None:
        self._fetch()

    @work(thread=True, exclusive=True, group="dashboard")
    def _fetch(self) -> None:
        # The whole report takes seconds on a big store (it is built once per store version,
        # App.report), so at start-up the counts come with the headline figures of
        # build_headline, its quick part (equal to it), in one paint (the counts painted alone
        # first held the headline back by a whole repaint); pass@1 and safety follow with the
        # report.
        with self.app.worker_reader() as conn:
            counts = (views.datasets(conn), jobs.list_jobs(conn, active_only=True))
            first = self._report is None and self.app.cached_report() is None
            part = build_headline(conn) if first else None
        self.deliver(self._show_start, counts, part)
        self.deliver(self._show_figures, self.app.report())

    def _show_start(
        self, counts: tuple[list[views.DatasetCount], list[jobs.Job]], part: Report | None
    ) -> None:
        self._show_counts(*counts)
        if part is not None:
            self._show_headline(part)

    def _show_counts(self, datasets: list[views.DatasetCount], active: list[jobs.Job]) -> None:
        self._datasets = datasets
        self._dataset_rows()
        if self._report is None:
            self.query_one("#headline", Static).update(
                Text("computing the report's figures…", style="dim")
            )
        rows = [
            (str(j.id), [f"#{j.id}", j.kind, job_status(j), job_progress(j),
                         num(j.progress_failed), f"${j.cost_usd:.4f}", one_line(j.cli, 60)])
            for j in active
        ]  # fmt: skip
        if not rows:
            rows = [
                ("none", ["", "", Text("no job queued or running", style="dim"), "", "", "", ""])
            ]
        sync_rows(self.query_one("#running-jobs", DataTable), rows)
        self.mark_loaded()

    def _show_headline(self, part: Report) -> None:
        """The headline and the datasets' figures from build_headline, before the report."""
        if self._report is not None:  # the whole report came first
            return
        self._report = part
        self._dataset_rows()
        episodes = sum(d.episodes for d in self._datasets)
        running = sum(d.running for d in self._datasets)
        self.query_one("#headline", Static).update(headline_view(part, episodes, running))
        for key in ("#models", "#safety"):
            self.query_one(key, Static).update(Text("computing the report's figures…", "dim"))

    def _show_figures(self, report: Report) -> None:
        self._report = report
        self._dataset_rows()
        episodes = sum(d.episodes for d in self._datasets)
        running = sum(d.running for d in self._datasets)
        self.query_one("#headline", Static).update(headline_view(report, episodes, running))
        self.query_one("#models", Static).update(models_view(report))
        self.query_one("#safety", Static).update(safety_view(headline_safety(report)))

    def _dataset_rows(self) -> None:
        figures = {d["dataset"]: d for d in (self._report or {}).get("datasets", [])}
        rows = []
        for d in self._datasets:
            f = figures.get(d.dataset, {})
            rows.append(
                (d.dataset, [one_line(d.dataset, 30), num(d.tasks), num(f.get("measured")),
                             shown(f.get("median_D_display", "-")), num(d.episodes),
                             Text(num(d.errors), style="magenta" if d.errors else "")])
            )  # fmt: skip
        sync_rows(self.query_one("#datasets", DataTable), rows)

    def action_open(self) -> None:
        focused = self.focused
        if isinstance(focused, DataTable) and focused.id == "datasets":
            key = cursor_key(focused)
            if key:
                self.post_message(OpenDataset(key))
        elif isinstance(focused, DataTable) and focused.id == "running-jobs":
            self.app.switch_mode("jobs")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()
