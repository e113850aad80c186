"""Issue 29 point 6, the smaller TUI items: the launch form names the measurement model itself;
the task/agent columns keep a readable width at 100 columns. Textual Pilot on the synthetic
store (tests/fixtures_tui.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.widgets import Select, SelectionList

from depthtui.app import DepthApp
from depthtui.screens.launch import LaunchScreen
from depthtui.widgets.messages import Launch
from store.db import open_reader
from tests.conftest import ROOT

pytest_plugins = ["tests.fixtures_tui"]

MODELS = ROOT / "models.example.toml"


def drive(tui, db: Path, flow: Callable[[DepthApp, object], Awaitable[None]], size=None) -> None:
    async def main() -> None:
        app = DepthApp(db, poll_seconds=0.1, start_engine=False)
        async with app.run_test(size=size or tui.size) as pilot:
            await tui.settle(pilot)
            await flow(app, pilot)

    asyncio.run(main())


def test_the_launch_form_names_the_measurement_model_in_the_form(tui, tui_db: Path) -> None:
    conn = open_reader(tui_db)
    task = conn.execute("SELECT id FROM tasks ORDER BY id LIMIT 1").fetchone()[0]
    conn.close()

    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(Launch((task,)))
        await tui.settle(pilot)
        form = app.screen
        assert isinstance(form, LaunchScreen)
        form.query_one("#models-file").value = str(MODELS)
        form.query_one("#mode", Select).value = "ladder"
        await pilot.pause()
        models = form.query_one("#models", SelectionList)
        # Picked against the list's order: the first picked measures, not the first listed.
        models.select("gpt-4.1-mini")
        models.select("qwen3-8b-local")
        await pilot.pause()
        form_text = " ".join(tui.text(app).split("equivalent command")[0].split())
        assert "measurement model gpt-4.1-mini: the uncapped runs (N)" in form_text, form_text
        assert "then qwen3-8b-local: caps below its estimate" in form_text, form_text
        # Not a ladder: no measurement model to name.
        form.query_one("#mode", Select).value = "free"
        await pilot.pause()
        assert not form.query_one("#row-measurement").display
        assert "measurement model" not in tui.text(app)

    drive(tui, tui_db, flow, size=(120, 60))
