"""Issue 29 point 6, the smaller TUI items: the launch form names the measurement model itself;
the task/agent columns keep a readable width at 100 columns. Textual Pilot on the synthetic
store (tests/fixtures_tui.py)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.widgets import DataTable, Select, SelectionList

from depthtui.app import DepthApp
from depthtui.screens.launch import LaunchScreen
from depthtui.screens.tasks import STATUSES
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


LONG_TASK = "terminal-bench-core-sample/reconcile-the-quarterly-ledgers-001"


def _rename_task(db: Path, old: str, new: str) -> None:
    """A long task id and dataset, as imported datasets have (the synthetic ones are short)."""
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute(
            "UPDATE tasks SET id = ?, dataset = ? WHERE id = ?", (new, new.split("/")[0], old)
        )
        for table in ("segments", "episodes", "contracts", "estimates", "reviews"):
            conn.execute(f"UPDATE {table} SET task_id = ? WHERE task_id = ?", (new, old))
    conn.close()


def test_name_columns_stay_readable_at_100_columns(tui, synthetic_db: Path) -> None:
    _rename_task(synthetic_db, "demo/log-errors-001", LONG_TASK)
    conn = open_reader(synthetic_db)
    task_ids = [r[0] for r in conn.execute("SELECT id FROM tasks")]
    conn.close()

    async def flow(app: DepthApp, pilot) -> None:
        await pilot.press("2")
        await tui.settle(pilot)
        text = tui.text(app)
        # The long id keeps at least 24 cells, and every row still shows its status column.
        last_words = {s.split()[-1] for s in STATUSES}
        assert LONG_TASK in task_ids
        for task in task_ids:
            [line] = [ln for ln in text.splitlines() if task[:24] in ln]
            assert line.rstrip().split()[-1] in last_words, line
        await pilot.press("3")
        await tui.settle(pilot)
        table = app.screen.query_one("#triage", DataTable)
        assert table.row_count
        lines = tui.text(app).splitlines()
        for row_key in table.rows:
            item = app.screen.items[row_key.value]
            [line] = [ln for ln in lines if ln.startswith(f" {item.episode_id} ")]
            # The name columns are read whole (or, for a long id, its first 24 cells).
            assert item.task_id[:24] in line, (line, item.task_id)
            assert f" {item.agent[:12]}" in line, (line, item.agent)
            assert len(line) <= 100

    drive(tui, synthetic_db, flow, size=(100, 30))
