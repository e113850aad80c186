"""The Runs screen: every episode of the store in one table, columns picked and kept, sorting
on any column, triage's filter language, enter to the replay (Textual's Pilot, synthetic store)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.widgets import DataTable, Input, SelectionList

from depthtui.app import DepthApp
from depthtui.screens.episode import EpisodeScreen
from depthtui.screens.runs import ColumnsScreen, RunsScreen, settings_path
from store.db import open_reader

pytest_plugins = ["tests.fixtures_tui"]


def drive(tui, db: Path, flow) -> None:
    async def main() -> None:
        app = DepthApp(db, poll_seconds=0.1, start_engine=False)
        async with app.run_test(size=(160, 45)) as pilot:
            await tui.settle(pilot)
            await flow(app, pilot)

    asyncio.run(main())


def test_every_run_sorted_filtered_and_opened(tui, synthetic_db: Path) -> None:
    conn = open_reader(synthetic_db)
    every = [r[0] for r in conn.execute("SELECT id FROM episodes ORDER BY id DESC")]
    qwen_free = {
        r[0]
        for r in conn.execute("SELECT id FROM episodes WHERE agent LIKE '%qwen%' AND mode = 'free'")
    }
    by_reward = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM episodes WHERE reward IS NOT NULL AND outcome != 'infra_error' "
            "ORDER BY reward, id"
        )
    ]
    conn.close()
    assert qwen_free and by_reward

    async def flow(app: DepthApp, pilot) -> None:
        await pilot.press("6")
        await tui.settle(pilot)
        screen = app.screen
        assert isinstance(screen, RunsScreen)
        assert screen.visible_ids() == every  # all tasks, modes and models; newest first
        # sort on reward (a header click): the measured ones ascending, the rest after
        table = screen.query_one("#runs", DataTable)
        screen.sort_key, screen.reverse = "reward", False
        screen._rebuild()
        ids = screen.visible_ids()
        assert ids[: len(by_reward)] == by_reward and set(ids) == set(every)
        # triage's filter language
        await pilot.press("f")
        await pilot.press(*"model:qwen mode:free")
        await pilot.pause()
        assert set(screen.visible_ids()) == qwen_free
        await pilot.press("enter")  # back to the table
        assert app.focused is table
        first = screen.visible_ids()[0]
        await pilot.press("enter")
        await tui.settle(pilot)
        replay = app.screen
        assert isinstance(replay, EpisodeScreen) and replay.episode_id == first
        assert set(replay.context) == qwen_free  # H/L walk the rows shown

    drive(tui, synthetic_db, flow)


def test_columns_picked_are_kept_across_restarts(tui, synthetic_db: Path) -> None:
    async def pick(app: DepthApp, pilot) -> None:
        await pilot.press("6")
        await tui.settle(pilot)
        screen = app.screen
        assert "cost $" not in [str(c.label) for c in screen.query_one(DataTable).columns.values()]
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, ColumnsScreen)
        chooser = app.screen.query_one(SelectionList)
        chooser.select("cost")
        chooser.select("prompt")
        chooser.deselect("fault")
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen
        await pilot.press("s")  # sort on the next column: kept too

    drive(tui, synthetic_db, pick)
    assert settings_path(synthetic_db).exists()

    async def reopen(app: DepthApp, pilot) -> None:
        await pilot.press("6")
        await tui.settle(pilot)
        screen = app.screen
        labels = [str(c.label) for c in screen.query_one(DataTable).ordered_columns]
        assert "cost $" in labels and "prompt" in labels and "fault" not in labels
        assert labels[:2] == ["episode", "task"]
        assert screen.sort_key == "task"
        assert isinstance(screen.query_one("#runs-filter"), Input)

    drive(tui, synthetic_db, reopen)
