"""`bench tui`'s terminal measure: the real `depthtui` on a pseudo-terminal, timed to the moment
the dashboard draws the report's figures, then quit with `q` (figures are not asserted: speed is
`depthtui bench tui`'s business)."""

from __future__ import annotations

import asyncio
import io
import threading
from pathlib import Path

from rich.console import Console

from depthtui.app import DepthApp
from depthtui.screens import dashboard
from depthtui.screens.dashboard import headline_view, safety_view
from depthtui.screens.figures import ReportChild, build_report_here
from devtools.bench.tui import FIGURES_MARK, REPORT_MARKS, figures_in_a_terminal
from engine.analysis.report import build_headline

pytest_plugins = ["tests.fixtures_tui"]


def test_figures_are_seen_on_a_real_terminal(synthetic_db: Path) -> None:
    # the mark it waits for is drawn by the headline only, which needs the report
    console = Console(width=120, record=True, file=io.StringIO())
    report = build_report_here(synthetic_db)
    console.print(headline_view(report, 1, 0))
    assert FIGURES_MARK in console.export_text()
    console.print(safety_view(report["safety"]))
    assert any(mark in console.export_text() for mark in REPORT_MARKS)
    result = figures_in_a_terminal(synthetic_db)
    assert 0 < result["figures_shown_s"] <= result["report_shown_s"]
    assert result["raw_figures_s"] > 0 and result["bare_textual_s"] > 0
    # the app and the child that built its report, both counted
    assert result["pty_children"] >= 1 and result["pty_peak_rss_mb"] > 0


def test_the_marks_are_not_on_screen_before_their_figures(tui, synthetic_db: Path, monkeypatch):
    # Both stages held back: the dashboard is up, and neither mark is on it yet.
    release_headline, release_report = threading.Event(), threading.Event()

    def slow_headline(conn):
        release_headline.wait(30)
        return build_headline(conn)

    class SlowChild(ReportChild):
        def build(self, db: Path, timeout_s: float = 300):
            release_report.wait(30)
            return super().build(db, timeout_s)

    monkeypatch.setattr(dashboard, "build_headline", slow_headline)

    async def main() -> None:
        app = DepthApp(synthetic_db, start_engine=False)
        app._report_child = SlowChild()
        async with app.run_test(size=tui.size) as pilot:
            await pilot.pause(0.5)
            text = tui.text(app)
            assert "Headline figures" in text  # the dashboard is up, its figures are not
            assert FIGURES_MARK not in text and not any(m in text for m in REPORT_MARKS)
            release_headline.set()
            await app.screen.loaded.wait()  # the counts, and the headline with them
            assert await tui.until(pilot, lambda: FIGURES_MARK in tui.text(app))
            assert "computing the report's figures" in tui.text(app)
            assert not any(m in tui.text(app) for m in REPORT_MARKS)
            release_report.set()
            assert await tui.until(pilot, lambda: any(m in tui.text(app) for m in REPORT_MARKS))
            await tui.settle(pilot)

    asyncio.run(main())
