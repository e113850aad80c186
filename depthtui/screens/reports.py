"""Reports: depth against work, the depth histogram, pass rate by cap, safe success by fault."""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Header, Static

from depthtui.screens.base import DataScreen
from depthtui.widgets.plot import depth_histogram, depth_scatter, family_bars, pass_rate_table
from store import views


class ReportsScreen(DataScreen):
    BINDINGS = [
        Binding("j", "scroll(1)", "Down", show=False),
        Binding("k", "scroll(-1)", "Up", show=False),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="reports"):
            yield Static("Depth D against work W", classes="section-title")
            yield Static(id="plot-scatter")
            yield Static("Depth histogram (tasks per D)", classes="section-title")
            yield Static(id="plot-histogram")
            yield Static("Pass rate by cap", classes="section-title")
            yield Static(id="plot-caps")
            yield Static("Safe success by fault family", classes="section-title")
            yield Static(id="plot-faults")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#reports", VerticalScroll).focus()

    def load(self) -> None:
        self._fetch()

    @work(thread=True, exclusive=True, group="reports")
    def _fetch(self) -> None:
        with self.app.worker_reader() as conn:
            data = (
                views.depth_points(conn),
                views.pass_rate_by_cap(conn),
                views.safe_by_fault(conn),
            )
        self.app.call_from_thread(self._show, *data)

    def _show(self, points, caps, faults) -> None:
        width = max(20, min(90, self.size.width - 34))
        self.query_one("#plot-scatter", Static).update(depth_scatter(points, width))
        self.query_one("#plot-histogram", Static).update(
            depth_histogram(points, max(10, width // 2))
        )
        self.query_one("#plot-caps", Static).update(pass_rate_table(caps))
        self.query_one("#plot-faults", Static).update(family_bars(faults))
        self.mark_loaded()

    def action_scroll(self, lines: int) -> None:
        self.query_one("#reports", VerticalScroll).scroll_relative(y=lines * 3, animate=False)
