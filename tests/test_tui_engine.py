"""End to end: a job launched from the TUI's form is run by the real background engine (real
Docker, a real demo task), the jobs screen shows it finish live, and its episode replays.

Needs Docker and the base image (docker/setup.sh); without them it fails, it does not skip.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input

from depthtui.app import DepthApp
from depthtui.screens.episode import EpisodeScreen
from depthtui.screens.jobs import JobsScreen
from depthtui.screens.launch import LaunchScreen
from depthtui.widgets.messages import OpenEpisode
from engine.jobs.launch import stop_engines
from store import jobs, queue, views
from store.db import Store

pytest_plugins = ["tests.fixtures_tui"]

ROOT = Path(__file__).resolve().parents[1]
DEPTHTUI = str(Path(sys.executable).with_name("depthtui"))
TASK = "demo/error-count"


def _docker_ids(*args: str) -> list[str]:
    out = subprocess.run(["docker", *args], capture_output=True, text=True, check=True)
    return out.stdout.split()


def _clean_up(db: Path) -> list[str]:
    """Stop this store's engines and remove what they left; the containers still there."""
    stop_engines(db, timeout_s=30)
    with Store(db) as store:
        owners = [e["owner"] for e in queue.list_engines(store)]
    left = []
    for owner in owners:
        label = f"label=depthtui.owner={owner}"
        containers = _docker_ids("ps", "-aq", "--filter", label)
        if containers:
            left += containers
            subprocess.run(["docker", "rm", "-f", *containers], capture_output=True, check=False)
        images = _docker_ids("images", "-q", "--filter", label)
        if images:
            subprocess.run(["docker", "rmi", "-f", *images], capture_output=True, check=False)
    return left


@pytest.mark.docker
@pytest.mark.slow
def test_a_launched_job_runs_on_the_engine_and_replays(tui, tmp_path: Path) -> None:
    db = tmp_path / "depthtui.db"
    imported = subprocess.run(
        [DEPTHTUI, "tasks", "import", str(ROOT / "tasks" / "demo"), "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert imported.returncode == 0, imported.stderr

    async def main() -> None:
        app = DepthApp(db, poll_seconds=0.2)  # starts an engine for what it queues
        async with app.run_test(size=tui.size) as pilot:
            await tui.settle(pilot)
            await pilot.press("2")
            await tui.settle(pilot)
            filter_input = app.screen.query_one("#task-filter", Input)
            filter_input.focus()
            await pilot.press(*"error-count", "enter")
            assert app.screen.visible_ids() == [TASK]
            await pilot.press("r")
            await pilot.pause()
            assert isinstance(app.screen, LaunchScreen)
            await pilot.press("ctrl+s")  # mode check: the reference passes, doing nothing fails
            await tui.settle(pilot)
            screen = app.screen
            assert isinstance(screen, JobsScreen)
            with Store(db) as store:
                job_id = jobs.list_jobs(store)[0].id

            def finished() -> bool:
                job = screen.jobs.get(str(job_id))
                return job is not None and not job.active

            assert await tui.until(pilot, finished, tries=3600)  # up to 3 minutes
            table = screen.query_one("#jobs", DataTable)
            assert str(table.get_cell(str(job_id), "status")) == "done"
            episodes = views.task_episodes(app.conn, TASK)
            assert {(e.agent, e.outcome) for e in episodes} == {("oracle", "pass"), ("nop", "fail")}
            oracle = next(e for e in episodes if e.agent == "oracle")
            app.post_message(OpenEpisode(oracle.id))
            await tui.settle(pilot)
            assert isinstance(app.screen, EpisodeScreen) and app.screen.info.turns >= 1
            await pilot.press("G")
            verdict = app.screen.query_one("#turn-verdict")
            app.screen.query_one("#turn-view").scroll_to_widget(verdict, animate=False)
            await pilot.pause()
            text = tui.text(app)
            assert "Verdict" in text and "safe success" in text and "passed" in text

    try:
        asyncio.run(main())
    finally:
        left = _clean_up(db)
    assert left == [], f"the engine left containers behind: {left}"
    with Store(db) as store:
        job = jobs.list_jobs(store)[0]
    assert job.status == "done" and job.progress_done == job.progress_total == 1
    assert job.cli.startswith(f"depthtui check {TASK} ") and job.cli.endswith(" --detach")
