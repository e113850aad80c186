"""The TUI under a store that keeps committing: heartbeats of an idle engine reload nothing, the
compare screen's pickers keep working, and an engine with no job stops by itself and says so.

Heartbeats are written by the store's own engine functions (store/queue.py) from a thread, as
the engine's heartbeat thread writes them; the idle stop runs the real engine process.
"""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from textual import events
from textual.widgets import Select

from depthtui.app import DepthApp
from depthtui.screens.compare import CompareScreen
from depthtui.screens.dashboard import DashboardScreen
from depthtui.screens.launch import LaunchScreen
from depthtui.screens.tasks import TasksScreen
from depthtui.widgets.messages import OpenEpisode
from engine.jobs.engine import IDLE_ENV, idle_limit
from engine.jobs.launch import start_engine, stop_engines
from store import queue, triage
from store.db import Store

pytest_plugins = ["tests.fixtures_tui"]


def drive(tui, db: Path, flow: Callable[[DepthApp, object], Awaitable[None]]) -> None:
    async def main() -> None:
        app = DepthApp(db, poll_seconds=0.05, start_engine=False)
        async with app.run_test(size=tui.size) as pilot:
            await tui.settle(pilot)
            await flow(app, pilot)

    asyncio.run(main())


class Heartbeats:
    """An engine row heartbeating every `every_s` seconds from a thread, as an idle engine's
    heartbeat thread does (only faster)."""

    def __init__(self, db: Path, every_s: float = 0.02) -> None:
        self.db, self.every_s = db, every_s
        self.stop = threading.Event()
        self.beats = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with Store(self.db) as store:
            queue.register_engine(store, "test-host:1", "test-host", 1, 1, "")
            while not self.stop.is_set():
                queue.heartbeat_engine(store, "test-host:1", None)
                self.beats += 1
                self.stop.wait(self.every_s)

    def __enter__(self) -> Heartbeats:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(5)


def count_loads(screen) -> list[int]:
    loads: list[int] = []
    load = screen.load

    def counted() -> None:
        loads.append(1)
        load()

    screen.load = counted
    return loads


def test_heartbeats_reload_nothing_but_a_real_change_does(tui, synthetic_db: Path) -> None:
    async def flow(app: DepthApp, pilot) -> None:
        screen = app.screen
        assert isinstance(screen, DashboardScreen)
        loads = count_loads(screen)
        with Heartbeats(synthetic_db) as beats:
            assert await tui.until(pilot, lambda: beats.beats >= 10)
            await pilot.pause(0.3)
            # (registering the engine is a change to what the dashboard counts: one reload)
            first = len(loads)
            assert first <= 1
            start = beats.beats
            assert await tui.until(pilot, lambda: beats.beats >= start + 30)
            await pilot.pause(0.3)
            assert len(loads) == first, "heartbeats reloaded the dashboard"
            with Store(synthetic_db) as store:  # a label: something the screen can show
                episode = store.query("SELECT min(id) AS id FROM episodes")[0]["id"]
                triage.set_label(store, episode, triage.QUEUES[0], "needs_look")
            assert await tui.until(pilot, lambda: len(loads) > first)

    drive(tui, synthetic_db, flow)


def test_compare_pickers_take_keys_under_a_heartbeating_engine(
    tui, synthetic_db: Path, landmarks
) -> None:
    async def flow(app: DepthApp, pilot) -> None:
        app.push_screen(CompareScreen(landmarks.ladder_task))
        await tui.settle(pilot)
        screen = app.screen
        before = (screen.left, screen.right)
        right = screen.query_one("#compare-right", Select)
        options = [value for _, value in right._options if value is not Select.BLANK]
        assert len(options) >= 3 and before[1] in options
        with Heartbeats(synthetic_db) as beats:
            right.focus()
            await pilot.press("enter")  # open the list
            assert await tui.until(pilot, lambda: right.expanded)
            start = beats.beats
            assert await tui.until(pilot, lambda: beats.beats >= start + 20)
            await pilot.pause(0.2)
            overlay = right.query_one("SelectOverlay")
            assert overlay.highlighted is not None, "the open list lost its highlight"
            highlighted = overlay.highlighted
            await pilot.press("down")
            assert await tui.until(pilot, lambda: overlay.highlighted == highlighted + 1)
            start = beats.beats
            assert await tui.until(pilot, lambda: beats.beats >= start + 10)
            await pilot.press("enter")
            chosen = options[highlighted + 1 - (len(right._options) - len(options))]
            assert await tui.until(pilot, lambda: screen.right == chosen)
        assert screen.right != before[1]

    drive(tui, synthetic_db, flow)


def test_the_idle_limit_reads_the_option_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(IDLE_ENV, raising=False)
    assert idle_limit() == 600
    monkeypatch.setenv(IDLE_ENV, "30")
    assert idle_limit() == 30 and idle_limit("0") == 0
    monkeypatch.setenv(IDLE_ENV, "soon")
    with pytest.raises(ValueError, match=rf"{IDLE_ENV}: expected seconds .* got 'soon'"):
        idle_limit()
    with pytest.raises(ValueError, match=r"--idle-s: expected seconds .* got '-1'"):
        idle_limit("-1")


@pytest.mark.slow
def test_an_idle_engine_stops_by_itself_and_the_tui_says_so(
    tui, synthetic_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(IDLE_ENV, "2")  # the engine process inherits it
    # the synthetic store's jobs must not keep it busy
    with Store(synthetic_db) as store, store.tx() as conn:
        conn.execute("UPDATE jobs SET status = 'cancelled' WHERE status IN ('queued', 'running')")

    async def flow(app: DepthApp, pilot) -> None:
        notes: list[str] = []
        notify = app.notify

        def noted(message: str, *args, **kwargs) -> None:
            notes.append(str(message))
            notify(message, *args, **kwargs)

        app.notify = noted  # type: ignore[method-assign]
        pid = await asyncio.to_thread(start_engine, synthetic_db)

        def said() -> bool:
            return any(f"(pid {pid}) stopped: no job for 2 s" in n for n in notes)

        # up to a minute: the engine process imports and starts slowly on a loaded host
        assert await tui.until(pilot, said, tries=1200), notes
        with Store(synthetic_db) as store:
            row = next(e for e in queue.list_engines(store) if e["pid"] == pid)
        assert row["status"] == "stopped" and row["message"].startswith("stopped: no job for 2 s")

    try:
        drive(tui, synthetic_db, flow)
    finally:
        stop_engines(synthetic_db, timeout_s=10)


# --------------------------------------------------------------------------- keys during a switch


def type_fast(app: DepthApp, *keys: str) -> None:
    """Keys as a quick typist sends them: all queued before the app has handled the first."""
    for key in keys:
        app.post_message(events.Key(key, key if len(key) == 1 else None))


def test_a_key_typed_while_the_launch_form_opens_goes_to_the_form(tui, tui_db: Path) -> None:
    async def flow(app: DepthApp, pilot) -> None:
        await pilot.press("2")
        await tui.settle(pilot)
        assert isinstance(app.screen, TasksScreen)
        type_fast(app, "r", "r")  # the second `r` once ran the tasks screen's Run… again
        assert await tui.until(pilot, lambda: isinstance(app.screen, LaunchScreen))
        await pilot.pause(0.5)
        await app.workers.wait_for_complete()
        assert [type(s).__name__ for s in app.screen_stack] == ["TasksScreen", "LaunchScreen"]

    drive(tui, tui_db, flow)


class CountingApp(DepthApp):
    """The app with a `key_z` handler, as an app's own key method: it counts its runs."""

    CSS_PATH = str(Path(sys.modules[DepthApp.__module__].__file__).with_name("app.tcss"))

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.z_runs = 0

    def key_z(self) -> None:
        self.z_runs += 1


def test_an_unbound_key_that_bubbles_back_to_the_app_is_handled_once(tui, tui_db: Path) -> None:
    # Textual calls the `_on_key` of every class in the app's MRO: the key order's own decision
    # (run it once, or not at all for a screen that is gone or while the app quits, where
    # App._on_key raised ScreenStackError on the empty stack) was followed by App._on_key anyway
    async def main() -> None:
        app = CountingApp(tui_db, poll_seconds=0.05, start_engine=False)
        async with app.run_test(size=tui.size) as pilot:
            await tui.settle(pilot)
            await pilot.press("z")
            await tui.settle(pilot)
            assert app.z_runs == 1
            type_fast(app, "z", "z")
            assert await tui.until(pilot, lambda: app.z_runs >= 3)
            await pilot.pause(0.2)
            assert app.z_runs == 3

    asyncio.run(main())


def test_the_first_episode_opened_finds_its_screen_built_ahead(tui, synthetic_db: Path) -> None:
    """`depthtui` builds an episode screen while the user reads the first screen (nothing is
    drawn meanwhile), and the first open uses it: the first open no longer builds one."""

    async def main() -> None:
        app = DepthApp(synthetic_db, poll_seconds=0.1, start_engine=False, prewarm=True)
        async with app.run_test(size=tui.size) as pilot:
            await tui.settle(pilot)
            assert await tui.until(pilot, lambda: app._spare_episode is not None, tries=300)
            spare = app._spare_episode
            assert isinstance(app.screen, DashboardScreen) and len(app.screen_stack) == 1
            with Store(synthetic_db) as store:
                first = store.query("SELECT min(id) AS id FROM episodes")[0]["id"]
            app.post_message(OpenEpisode(first))
            await tui.settle(pilot)
            assert app.screen is spare and spare.episode_id == first
            assert spare.info is not None and spare.info.id == first

    asyncio.run(main())
