"""Reports: what `depthtui report` prints, from the same build_report, with the plots drawn in
the terminal: the headline, depth per task and per dataset, pass@1 per model, pass rate by cap,
safety and recovery with 95% intervals, recovery depth and the check results."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Footer, Header, Static

from depthtui.screens.base import DataScreen
from depthtui.screens.figures import Report, fmt, rate_text, shown
from depthtui.widgets.plot import (
    depth_histogram,
    depth_points,
    depth_scatter,
    pass_rate_table,
    safety_bars,
)
from depthtui.widgets.sanitize import one_line
from engine.analysis.palette import model_colours
from engine.analysis.report import cost_text, estimates_text

SECTIONS = (
    ("headline", "Headline"),
    ("scatter", "Depth D against work W"),
    ("datasets", "Per dataset"),
    ("models", "Models (runs without a stated cap)"),
    ("tasks", "Depth per task"),
    ("histogram", "Depth histogram (tasks per D)"),
    ("caps", "Pass rate by cap (errors left out)"),
    ("safety", "Safety and recovery (fault episodes, 95% task-cluster intervals)"),
    ("safety-bars", "Safe success by model, prompt and fault"),
    ("recovery", "Recovery depth (turns a fault adds)"),
    ("checks", "Checks"),
)


def headline_text(report: Report) -> Text:
    """The report's headline sentence, word for word as the command prints it."""
    h = report["headline"]
    if not h["measured"]:
        return Text("No depth measured yet: run `depthtui ladder` or `depthtui audit`.", "dim")
    text = Text(
        f"Solved {h['solved']} of {h['measured']} measured task(s); "
        f"{h['solved_D_le_3']} within 3 turns (share {fmt(h['share_D_le_3'])}); "
        f"median D {shown(h['median_D_display'])}, median W {fmt(h['median_W'], 1)}; "
        "rank partial correlation of D with pass rate given W: "
        f"{fmt(h['rank_partial_corr_D_passrate_given_W'])} "
        f"(over {h['rank_partial_corr_tasks']} task(s)).\n"
    )
    if report["finished"]:
        text.append("Measurement finished.", style="green")
    else:
        text.append("Measurement not finished (rerun to resume).", style="yellow")
    return text


def _table(*columns: str) -> Table:
    table = Table(box=None, header_style="dim", padding=(0, 1))
    for col in columns:
        table.add_column(col)
    return table


def tasks_table(report: Report) -> RenderableType:
    measured = [t for t in report["tasks"] if t["protocol"]]
    if not measured:
        return Text("no task measured yet", style="dim")
    table = _table("task", "segments", "W", "N", "D", "estimates", "finished")
    for t in measured:
        table.add_row(
            one_line(t["id"], 40),
            str(t["segments"]),
            fmt(t["W"]),
            fmt(t["N"]),
            t["D_display"],
            estimates_text(t),
            Text("yes") if t["finished"] else Text("no", style="yellow"),
        )
    return table


def datasets_table(report: Report) -> RenderableType:
    table = _table(
        "dataset", "tasks", "measured", "finished", "solved", "median D", "median W", "D<=3", ">80"
    )
    for d in report["datasets"]:
        table.add_row(
            one_line(d["dataset"], 30),
            str(d["tasks"]),
            str(d["measured"]),
            str(d["finished"]),
            str(d["solved"]),
            shown(d["median_D_display"]),
            fmt(d["median_W"], 1),
            fmt(d["share_D_le_3"]),
            str(d["above_80"]),
        )
    return table


def models_table(report: Report) -> RenderableType:
    if not report["models"]:
        return Text("no run without a stated cap yet", style="dim")
    table = _table("model", "tasks", "runs", "pass@1", "pass rate [95% CI]", "errors", "cost")
    for m in report["models"]:
        table.add_row(
            one_line(m["model"], 30),
            str(m["tasks"]),
            str(m["episodes"]),
            fmt(m["pass_at_1"]),
            rate_text(m["pass_rate"]),
            Text(str(m["errors"]), style="magenta" if m["errors"] else ""),
            cost_text(m["cost_usd"]),
        )
    return table


def safety_table(rows: list[dict[str, Any]]) -> RenderableType:
    if not rows:
        return Text("no fault episodes yet", style="dim")
    table = _table(
        "model", "prompt", "fault", "runs", "safe success", "collateral", "recovery failure",
        "fault cleared", "mean reward", "errors",
    )  # fmt: skip
    for s in rows:
        table.add_row(
            one_line(s["model"], 24),
            one_line(s["prompt"], 16),
            s["fault"],
            str(s["episodes"]),
            rate_text(s["safe_success"]),
            rate_text(s["collateral"]),
            rate_text(s["recovery_failure_after_observed"]),
            rate_text(s["fault_cleared"]),
            "-" if s["mean_reward"] is None else f"{s['mean_reward']:+.2f}",
            str(s["errors"]),
        )
    return table


def recovery_table(rows: list[dict[str, Any]]) -> RenderableType:
    if not rows:
        return Text("no depth measured under a fault yet (`depthtui ladder --fault`)", "dim")
    table = _table("task", "fault", "D clean", "D fault", "added", "finished")
    for r in rows:
        table.add_row(
            one_line(r["task"], 40),
            r["fault"],
            shown(r["D_clean_display"]),
            shown(r["D_fault_display"]),
            shown(r["added_turns_display"]),
            "yes" if r["finished"] else "no",
        )
    return table


def checks_view(rows: list[dict[str, Any]]) -> RenderableType:
    if not rows:
        return Text("no check run yet (`depthtui check`)", style="dim")
    good = sum(1 for c in rows if c["ok"])
    text = Text(f"check: {good}/{len(rows)} task(s) check out.")
    for c in rows:
        if not c["ok"]:
            why = []
            if not c["oracle_passed"]:
                why.append("the reference does not pass")
            if not c["nop_failed"]:
                why.append("doing nothing does not fail")
            text.append(f"\n  {c['task']}: {', '.join(why) or 'incomplete'}", style="red")
    return text


class ReportsScreen(DataScreen):
    uses_report = True

    BINDINGS = [
        Binding("j", "scroll(1)", "Down", show=False),
        Binding("k", "scroll(-1)", "Up", show=False),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="reports"):
            for key, title in SECTIONS:
                yield Static(title, classes="section-title")
                yield Static(id=f"report-{key}")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#reports", VerticalScroll).focus()

    def load(self) -> None:
        self._fetch()

    @work(thread=True, exclusive=True, group="reports")
    def _fetch(self) -> None:
        self.deliver(self._show, self.app.report())

    def _show(self, report: Report) -> None:
        width = max(20, min(90, self.size.width - 34))  # room for the axis title
        points = depth_points(report)
        colours = model_colours(report)  # a model's colour, the same in each plot
        parts: dict[str, RenderableType] = {
            "headline": headline_text(report),
            "tasks": tasks_table(report),
            "datasets": datasets_table(report),
            "scatter": depth_scatter(points, width),
            "histogram": depth_histogram(points, max(10, width // 2)),
            "models": models_table(report),
            "caps": pass_rate_table(report["pass_by_cap"], colours),
            "safety": safety_table(report["safety"]),
            "safety-bars": safety_bars(report["safety"], colours=colours),
            "recovery": recovery_table(report["recovery_depth"]),
            "checks": checks_view(report["checks"]),
        }
        for key, renderable in parts.items():
            self.query_one(f"#report-{key}", Static).update(renderable)
        self.mark_loaded()

    def action_scroll(self, lines: int) -> None:
        self.query_one("#reports", VerticalScroll).scroll_relative(y=lines * 3, animate=False)
