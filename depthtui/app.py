"""The Textual application: modes for the main screens, navigation by messages, and the live poll.

The app reads the store through read-only connections and polls `PRAGMA data_version`; when
another connection (the engine, a CLI verb, this app's own writer) commits, the visible screen
reloads what can have changed, keeping its selection and scroll place. Writes (labels, jobs) go
through store functions on a writer opened on first use. The app never runs an episode: a job it
queues is run by a background engine process, which it starts when none is alive.
"""

from __future__ import annotations

import asyncio
import importlib
import sqlite3
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.app import App, ScreenStackError, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from depthtui.screens.base import DataScreen
from depthtui.screens.dashboard import DashboardScreen
from depthtui.screens.figures import Report, ReportChild, ReportStopped, build_report_here
from depthtui.widgets.messages import Launch, OpenDataset, OpenEpisode, OpenTask, Searched
from store.db import Store, StoreError, data_version, open_reader

if TYPE_CHECKING:
    from depthtui.screens.episode import EpisodeScreen

POLL_SECONDS = 0.5
REPORT_EVERY_S = 2.0  # while runs write, the report's figures are rebuilt at most this often


def _screen(module: str, name: str) -> Callable[[], Screen]:
    """A mode's screen, its module imported when the mode is first shown: only the dashboard's
    imports are on the start-up path (the others took a third of the time to the figures)."""

    def make() -> Screen:
        return getattr(importlib.import_module(f"depthtui.screens.{module}"), name)()

    return make


@dataclass(frozen=True)
class _CachedReport:
    version: int  # App.version it was built at
    at: float  # time.monotonic() when built
    report: Report


class DepthApp(App[None]):
    """depthtui's terminal UI on one store file."""

    CSS_PATH = "app.tcss"
    TITLE = "depthtui"
    MODES = {
        "dashboard": DashboardScreen,
        "tasks": _screen("tasks", "TasksScreen"),
        "triage": _screen("triage", "TriageScreen"),
        "jobs": _screen("jobs", "JobsScreen"),
        "search": _screen("search", "SearchScreen"),
        "reports": _screen("reports", "ReportsScreen"),
        "runs": _screen("runs", "RunsScreen"),
    }
    DEFAULT_MODE = "dashboard"
    # Below 100 columns the screens stack what sits side by side and narrow their lists.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    BINDINGS = [
        Binding("1", "goto('dashboard')", "Dashboard"),
        Binding("2", "goto('tasks')", "Tasks"),
        Binding("3", "goto('triage')", "Triage"),
        Binding("4", "goto('jobs')", "Jobs"),
        Binding("5", "goto('reports')", "Reports"),
        # not in the footer (its line is full at 100 columns); help and ctrl+p list it
        Binding("6", "goto('runs')", "Runs", show=False),
        Binding("slash", "search", "Search"),
        Binding("number_sign", "goto_episode", "Go to episode #"),
        Binding("question_mark", "toggle_help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self, db: Path | str, *, poll_seconds: float = POLL_SECONDS, start_engine: bool = True
    ) -> None:
        super().__init__()
        self.db_path = Path(db)
        self.start_engine = start_engine  # start a background engine for submitted jobs
        self.sub_title = self.db_path.name
        self.poll_seconds = poll_seconds
        # UI-thread reader (polls and quick point queries) and one more for thread workers.
        self.conn = open_reader(self.db_path)
        self._worker_conn = open_reader(self.db_path)
        self._worker_lock = threading.Lock()
        self._writer: Store | None = None
        self._report_lock = threading.Lock()
        self._report: _CachedReport | None = None
        self._report_child = ReportChild()
        self.version = 0  # bumped whenever another connection committed
        self._data_version = data_version(self.conn)
        self.last_query = ""  # the last search (a Searched message), marked in episodes opened
        # One episode screen per mode, kept (installed) when popped and pointed at the next
        # episode opened: building its widgets and styles again took most of an open.
        self._episode_screens: dict[str, EpisodeScreen] = {}

    # ------------------------------------------------------------------ store access

    @contextmanager
    def worker_reader(self) -> Iterator[sqlite3.Connection]:
        """The connection for thread workers; one at a time."""
        with self._worker_lock:
            yield self._worker_conn

    def report(self) -> Report:
        """`depthtui report`'s figures (build_report), shared by the screens that show them.

        Built once per store version, and while runs keep writing at most every
        REPORT_EVERY_S: in between, the last one is returned and poll_store asks the screen to
        reload once it is due. Called from workers. It is built in a child process: thousands
        of rows and a bootstrap in a thread would take the GIL from the screen (stepping
        through turns slowed by half while it ran, and the report itself starved).
        """
        with self._report_lock:
            version, cached = self.version, self._report
            if cached is not None and (
                cached.version == version or time.monotonic() - cached.at < REPORT_EVERY_S
            ):
                return cached.report
            try:
                report = self._report_child.build(self.db_path)
            except ReportStopped:
                # the app is quitting: the worker ends as cancelled, with nothing to show
                raise asyncio.CancelledError from None
            except (StoreError, subprocess.SubprocessError, ValueError) as exc:
                # the figures still come from build_report, in this process
                self.call_from_thread(self.notify, str(exc), severity="warning", timeout=10)
                report = build_report_here(self.db_path)
            self._report = _CachedReport(version, time.monotonic(), report)
            return report

    def cached_report(self) -> Report | None:
        """The last report built, however old (never waits)."""
        cached = self._report
        return None if cached is None else cached.report

    def _report_due(self) -> bool:
        cached = self._report
        return (
            cached is not None
            and cached.version != self.version
            and time.monotonic() - cached.at >= REPORT_EVERY_S
        )

    @property
    def writer(self) -> Store:
        """The write connection, opened on first use (labels, jobs)."""
        if self._writer is None:
            self._writer = Store(self.db_path)
        return self._writer

    def on_mount(self) -> None:
        self.set_interval(self.poll_seconds, self.poll_store)

    def hand_to_engine(self, job_id: int, workers: int) -> None:
        """Make sure a background engine will run a job just queued (starting one if none)."""
        if self.start_engine:
            self._ensure_engine(job_id, workers)

    @work(thread=True, group="engine", exit_on_error=False)
    def _ensure_engine(self, job_id: int, workers: int) -> None:
        from engine.jobs.launch import EngineError, ensure_engine

        try:
            pid = ensure_engine(self.db_path, workers=workers)
        except EngineError as exc:
            message = f"job #{job_id} is queued, but no engine could be started: {exc}"
            self.call_from_thread(self.notify, message, severity="error", timeout=15)
            return
        self.call_from_thread(self.notify, f"job #{job_id}: engine pid {pid} runs it")

    def poll_store(self) -> None:
        try:
            screen = self.screen
        except ScreenStackError:  # starting up or shutting down
            return
        current = data_version(self.conn)
        if current != self._data_version:
            self._data_version = current
        elif not (self._report_due() and getattr(screen, "uses_report", False)):
            return
        # (else: nothing new, but the figures on screen are from a report that held back)
        self.version += 1
        if isinstance(screen, DataScreen):
            screen.reload()

    def on_unmount(self) -> None:
        self._report_child.stop()
        for conn in (self.conn, self._worker_conn):
            conn.close()
        if self._writer is not None:
            self._writer.close()

    # ------------------------------------------------------------------ navigation

    def on_open_episode(self, message: OpenEpisode) -> None:
        from depthtui.screens.episode import EpisodeScreen

        query = message.query or self.last_query
        kept = self._episode_screens.get(self.current_mode)
        if kept is not None and kept not in self.screen_stack:
            kept.retarget(message.episode_id, message.turn, message.context, query)
            self.push_screen(kept)
            return
        screen = EpisodeScreen(
            message.episode_id, turn=message.turn, context=message.context, query=query
        )
        if kept is None:
            self._episode_screens[self.current_mode] = screen
            self.install_screen(screen, name=f"episode-{self.current_mode}")
        self.push_screen(screen)

    def show_job(self, job_id: int) -> None:
        """The jobs screen with this job selected (after a submit)."""
        from depthtui.screens.jobs import JobsScreen

        self.action_goto("jobs")

        def select() -> None:
            screen = self.screen
            if isinstance(screen, JobsScreen):
                screen.select_job(job_id)

        self.call_after_refresh(select)

    def on_open_task(self, message: OpenTask) -> None:
        from depthtui.screens.task_detail import TaskDetailScreen

        self.push_screen(TaskDetailScreen(message.task_id))

    def on_searched(self, message: Searched) -> None:
        self.last_query = message.query

    def on_open_dataset(self, message: OpenDataset) -> None:
        from depthtui.screens.tasks import TasksScreen

        self.switch_mode("tasks")
        tasks = self._screen_stacks["tasks"][0]  # the mode's own screen, made by the switch
        if isinstance(tasks, TasksScreen):
            tasks.show_dataset(message.dataset)

    def on_launch(self, message: Launch) -> None:
        from depthtui.screens.launch import LaunchScreen

        self.push_screen(LaunchScreen(message.task_ids))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The palette offers every key binding of the current screen as a command too."""
        builtin = list(super().get_system_commands(screen))
        yield from builtin
        seen = {command.title for command in builtin}
        for key, active in screen.active_bindings.items():
            binding = active.binding
            if not binding.description or not active.enabled or binding.description in seen:
                continue
            seen.add(binding.description)
            yield SystemCommand(
                binding.description,
                f"key: {self.get_key_display(binding) or key}",
                partial(self.run_action, binding.action, active.node),
            )

    def action_goto(self, mode: str) -> None:
        """A number key: that screen itself, not whatever was last opened on top of it."""
        stack = self._screen_stacks.get(mode, [])
        above = set(stack[1:])  # what was opened on top of the mode's screen, as of now
        if self.current_mode != mode:
            self.switch_mode(mode)
        # (a screen pushed after this key, an episode opened next, stays)
        self.call_after_refresh(self._pop_these, mode, above)

    def _pop_these(self, mode: str, above: set[Screen]) -> None:
        while self.current_mode == mode and len(self.screen_stack) > 1 and self.screen in above:
            self.pop_screen()

    def action_goto_episode(self) -> None:
        from depthtui.screens.goto import GotoEpisodeScreen

        def chosen(episode_id: int | None) -> None:
            if episode_id is not None:
                self.post_message(OpenEpisode(episode_id))

        self.push_screen(GotoEpisodeScreen(), chosen)

    def action_search(self) -> None:
        self.switch_mode("search")

    def action_toggle_help(self) -> None:
        from depthtui.screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            self.pop_screen()
        else:
            self.push_screen(HelpScreen(self.screen))
