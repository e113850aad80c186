"""No dead ends: an episode by its id (a key and the palette), a job to its episodes, an episode
to its job and its task, number keys to their own screen, and esc out of any text field."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.widgets import DataTable, Input

from depthtui.app import DepthApp
from depthtui.screens.episode import EpisodeScreen
from depthtui.screens.goto import GotoEpisodeScreen
from depthtui.screens.jobs import JobsScreen
from depthtui.screens.search import SearchScreen
from depthtui.screens.task_detail import TaskDetailScreen
from depthtui.screens.tasks import TasksScreen
from depthtui.widgets.rows import cursor_key
from store import views
from store.db import open_reader

pytest_plugins = ["tests.fixtures_tui"]


def drive(tui, db: Path, flow) -> None:
    async def main() -> None:
        app = DepthApp(db, poll_seconds=0.1, start_engine=False)
        async with app.run_test(size=tui.size) as pilot:
            await tui.settle(pilot)
            await flow(app, pilot)

    asyncio.run(main())


def test_episode_by_id_and_the_links_between_episodes_jobs_and_tasks(tui, tui_db: Path) -> None:
    conn = open_reader(tui_db)
    episode_id = conn.execute(
        "SELECT id FROM episodes WHERE job_id IS NOT NULL AND turns > 1 ORDER BY id LIMIT 1"
    ).fetchone()[0]
    info = views.episode(conn, episode_id)
    job_episodes = views.job_episode_ids(conn, info.job_id)
    counts = views.job_episode_counts(conn, [info.job_id])[info.job_id]
    conn.close()

    async def flow(app: DepthApp, pilot) -> None:
        # the palette offers it too (as every key of the screen)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        assert "Go to episode #" in titles
        await pilot.press("number_sign")
        await pilot.pause()
        assert isinstance(app.screen, GotoEpisodeScreen)
        await pilot.press("x", "enter")
        await pilot.pause()
        assert "expected an episode id" in str(app.screen.query_one("#goto-note").render())
        app.screen.query_one("#goto-id", Input).value = "999999"
        await pilot.press("enter")
        await pilot.pause()
        assert "episode 999999 is not in this store" in str(
            app.screen.query_one("#goto-note").render()
        )
        app.screen.query_one("#goto-id", Input).value = str(episode_id)
        await pilot.press("enter")
        await tui.settle(pilot)
        screen = app.screen
        assert isinstance(screen, EpisodeScreen) and screen.episode_id == episode_id
        # episode -> its task
        await pilot.press("t")
        await tui.settle(pilot)
        assert isinstance(app.screen, TaskDetailScreen) and app.screen.task_id == info.task_id
        await pilot.press("escape")
        await tui.settle(pilot)
        assert app.screen is screen
        # episode -> its job, selected on the jobs screen
        await pilot.press("J")
        await tui.settle(pilot)
        jobs_screen = app.screen
        assert isinstance(jobs_screen, JobsScreen)
        table = jobs_screen.query_one("#jobs", DataTable)
        assert await tui.until(pilot, lambda: cursor_key(table) == str(info.job_id))
        # its progress counts episodes, not only tasks
        cell = str(table.get_cell(str(info.job_id), "episodes"))
        assert cell.startswith(f"{counts.done:,}")
        # job -> its episodes: the latest opens, H/L walk the job's others
        table.focus()
        await pilot.press("enter")
        await tui.settle(pilot)
        replay = app.screen
        assert isinstance(replay, EpisodeScreen)
        assert replay.episode_id == job_episodes[-1] and replay.context == tuple(job_episodes)

    drive(tui, tui_db, flow)


def test_number_keys_go_to_their_screen_and_esc_leaves_a_text_field(tui, tui_db: Path) -> None:
    conn = open_reader(tui_db)
    words = [
        w
        for (command,) in conn.execute("SELECT command FROM calls ORDER BY id LIMIT 200")
        for w in command.split()
        if w.isalpha() and len(w) >= 4
    ]
    conn.close()
    word = words[0]

    async def flow(app: DepthApp, pilot) -> None:
        await pilot.press("2")
        await tui.settle(pilot)
        tasks = app.screen
        assert isinstance(tasks, TasksScreen)
        # esc leaves the filter: the next keys are commands again, not text
        tasks.query_one("#task-filter", Input).focus()
        await pilot.press("escape")
        assert not isinstance(app.focused, Input)
        tasks.query_one(DataTable).focus()
        await pilot.press("enter")  # a task
        await tui.settle(pilot)
        assert isinstance(app.screen, TaskDetailScreen)
        await pilot.press("1", "2")  # away and back: the task list, not what was open
        await tui.settle(pilot)
        assert app.screen is tasks
        # search, open a hit, come back: the keys go to the hits, and 4 is the jobs screen
        await pilot.press("slash")
        await tui.settle(pilot)
        search = app.screen
        assert isinstance(search, SearchScreen)
        box = search.query_one("#search-input", Input)
        assert app.focused is box
        await pilot.press(*word, "enter")
        await tui.settle(pilot)
        assert search.hits
        await pilot.press("enter")
        await tui.settle(pilot)
        assert isinstance(app.screen, EpisodeScreen)
        await pilot.press("escape")
        await tui.settle(pilot)
        assert app.screen is search and app.focused is search.query_one("#hits", DataTable)
        await pilot.press("slash")  # back into the query, then esc out of it
        assert app.focused is box
        await pilot.press("escape")
        assert app.focused is not box
        await pilot.press("4")
        await tui.settle(pilot)
        assert isinstance(app.screen, JobsScreen)
        assert box.value == word  # the 4 went to the app, not into the query

    drive(tui, tui_db, flow)


def test_readable_at_100_by_30(tui, tui_db: Path) -> None:
    """Names are never cut to a shared prefix ("mod…"), and the turn list gives way."""
    import io

    from rich.console import Console
    from textual.widgets import Static

    from depthtui.widgets.messages import OpenEpisode

    conn = open_reader(tui_db)
    longest = views.find_episodes(conn, min_turns=3, limit=1)[0]
    conn.close()

    async def main() -> None:
        app = DepthApp(tui_db, start_engine=False)
        async with app.run_test(size=(100, 30)) as pilot:
            await tui.settle(pilot)
            screen = app.screen
            assert await tui.until(pilot, lambda: app.cached_report() is not None, tries=400)
            await tui.settle(pilot)
            report = app.cached_report()
            names = {m["model"] for m in report["models"]}
            for widget_id in ("#models", "#safety"):
                widget = screen.query_one(widget_id, Static)
                console = Console(width=widget.size.width, file=io.StringIO(), record=True)
                console.print(widget.content)
                text = console.export_text()
                assert "…" not in text, text
                for name in names:
                    if widget_id == "#models" and len(name) <= widget.size.width // 3:
                        assert name in text
            app.post_message(OpenEpisode(longest))
            await tui.settle(pilot)
            narrow = app.screen.query_one("#turn-list").size.width
        async with DepthApp(tui_db, start_engine=False).run_test(size=(160, 45)) as pilot:
            await tui.settle(pilot)
            pilot.app.post_message(OpenEpisode(longest))
            await tui.settle(pilot)
            wide = pilot.app.screen.query_one("#turn-list").size.width
        assert narrow < wide <= 46

    asyncio.run(main())
