"""What the TUI's start-up leans on: the headline figures that come before the whole report
equal it, the verb groups stay unimported when only the TUI opens, the dashboard shows the
headline while the report is still out, and quitting ends the report's child process."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path

import pytest

from depthtui.app import DepthApp
from depthtui.cli import opens_tui
from depthtui.screens.figures import ReportChild, ReportStopped
from devtools.bench.tui import FIGURES_MARK
from engine.analysis.report import build_headline, build_report
from store.db import open_reader

pytest_plugins = ["tests.fixtures_tui"]


def test_the_headline_part_equals_the_report_key_for_key(synthetic_db: Path) -> None:
    conn = open_reader(synthetic_db)
    try:
        part, whole = build_headline(conn), build_report(conn)
    finally:
        conn.close()
    assert set(part) == {"finished", "tasks", "datasets", "headline", "checks"}
    for key, value in part.items():
        assert json.dumps(value) == json.dumps(whole[key]), key  # same values, same order
    assert part["headline"]["measured"] > 0 and part["checks"]  # the store measures and checks


@pytest.mark.parametrize(
    ("args", "tui"),
    [
        ([], True),
        (["--db", "x.db"], True),
        (["--db=x.db", "--build-proxy"], True),
        (["--help"], False),
        (["report", "--json"], False),
        (["--db", "x.db", "report"], False),
        (["--db"], False),  # typer says the value is missing
    ],
)
def test_only_root_options_open_the_tui_without_the_verbs(args: list[str], tui: bool) -> None:
    assert opens_tui(args) is tui


def test_the_dashboard_shows_the_headline_before_the_report(tui, synthetic_db: Path) -> None:
    # the report's child is held back: the headline is on screen all the same
    class Slow(ReportChild):
        release = threading.Event()

        def build(self, db: Path, timeout_s: float = 300):
            self.release.wait(30)
            return super().build(db, timeout_s)

    async def main() -> None:
        app = DepthApp(synthetic_db, start_engine=False)
        app._report_child = Slow()
        async with app.run_test(size=tui.size) as pilot:
            await app.screen.loaded.wait()
            assert await tui.until(pilot, lambda: FIGURES_MARK in tui.text(app))
            assert "computing the report's figures" in tui.text(app)  # pass@1, safety
            Slow.release.set()
            await tui.settle(pilot)
            assert await tui.until(pilot, lambda: "computing" not in tui.text(app))
            assert "fault cleared" in tui.text(app)  # the safety table, from the report

    asyncio.run(main())


def test_stop_ends_a_report_child_that_is_running(synthetic_db: Path) -> None:
    child = ReportChild()
    outcome: list[object] = []

    def build() -> None:
        try:
            outcome.append(child.build(synthetic_db))
        except ReportStopped as exc:
            outcome.append(exc)

    worker = threading.Thread(target=build)
    worker.start()
    deadline = time.monotonic() + 30
    while child._proc is None and worker.is_alive() and time.monotonic() < deadline:
        time.sleep(0.001)
    proc = child._proc
    child.stop()
    worker.join(30)
    assert not worker.is_alive()
    assert proc is not None and proc.returncode is not None and proc.returncode < 0  # killed
    assert isinstance(outcome[0], ReportStopped)
    with pytest.raises(ReportStopped):  # and no other is started after
        child.build(synthetic_db)
