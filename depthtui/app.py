"""The Textual application: modes for the main screens, navigation by messages, and the live poll.

The app reads the store through read-only connections and polls `PRAGMA data_version`; when
another connection (the engine, a CLI verb, this app's own writer) commits, a worker takes the
store's signature (store/changes.py: per table, heartbeats left out) and only when a table the
visible screen shows has changed does the screen reload, keeping its selection and scroll place.
An idle engine's heartbeats thus reload nothing, and a burst of commits costs one signature per
poll (a poll while one is being taken waits for it). Writes (labels, jobs) go
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
from textual.actions import SkipAction
from textual.app import App, ScreenStackError, SystemCommand
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widget import AwaitMount
from textual.widgets import Input, TextArea

from depthtui.keys import KeyOrder
from depthtui.screens.base import DataScreen
from depthtui.screens.dashboard import DashboardScreen
from depthtui.screens.figures import Report, ReportChild, ReportStopped, build_report_here
from depthtui.widgets.messages import Launch, OpenDataset, OpenEpisode, OpenTask, Searched
from store.changes import Signature, changed_tables, signature
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


PREWARM_AFTER_S = 0.5  # after start-up, how often to look whether the app is idle enough


class _Prewarm(Message):
    """Build the episode screen ahead of the first open (DepthApp.on__prewarm)."""


IDLE_PREFIX = "stopped: no job for"  # engine/jobs/engine.py IDLE_MESSAGE (not imported: slow)


def _engine_states(conn: sqlite3.Connection) -> dict[str, tuple[str, str, int]]:
    """owner -> (status, message, pid) of the store's engines."""
    rows = conn.execute("SELECT owner, status, message, pid FROM engines").fetchall()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


@dataclass(frozen=True)
class _CachedReport:
    version: int  # App.version it was built at
    at: float  # time.monotonic() when built
    report: Report


class DepthApp(KeyOrder, App[None]):
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
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide"), (180, "-widest")]
    # The keys that change screens are priority bindings: Textual resolves an ordinary binding
    # only once the key has bubbled up from the focused widget, and the keys typed meanwhile
    # were already handed to the old screen's focus (a `p` typed after `2` paused a job on
    # Jobs). A priority binding runs as the key arrives, and its action waits for the new screen
    # to be mounted, so the keys after it go to the screen the user will see. Where the key is
    # text (an input has focus) or a dialog is up, the actions skip and the key goes on as before.
    BINDINGS = [
        Binding("1", "goto('dashboard')", "Dashboard", priority=True),
        Binding("2", "goto('tasks')", "Tasks", priority=True),
        Binding("3", "goto('triage')", "Triage", priority=True),
        Binding("4", "goto('jobs')", "Jobs", priority=True),
        Binding("5", "goto('reports')", "Reports", priority=True),
        Binding("6", "goto('runs')", "Runs", priority=True),
        Binding("slash", "search", "Search", priority=True),
        Binding("number_sign", "goto_episode", "Go to episode #", priority=True),
        Binding("question_mark", "toggle_help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        db: Path | str,
        *,
        poll_seconds: float = POLL_SECONDS,
        start_engine: bool = True,
        prewarm: bool = False,
    ) -> None:
        super().__init__()
        # build an episode screen while the user reads the dashboard (see _prewarm); the
        # command line's app does, tests that count screens do not
        self.prewarm = prewarm
        self._spare_episode: EpisodeScreen | None = None
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
        self.version = 0  # bumped whenever another connection changed what a screen shows
        # per table (and "report"), how often it changed: what DataScreen.watches compares
        self.table_versions: dict[str, int] = {}
        self._data_version = data_version(self.conn)
        self._sign_conn = open_reader(self.db_path)  # the signature worker's own
        self._sign_lock = threading.Lock()
        self._signature: Signature | None = None  # taken by the first worker (off start-up)
        self._engines: dict[str, tuple[str, str, int]] = {}
        self._signing = False  # a signature worker is out: polls wait for it
        self.return_mode: str | None = None  # where esc on the jobs screen goes after `J`
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
        self._signing = True
        self._sign()  # the signature to compare the next ones with
        self.set_interval(self.poll_seconds, self.poll_store)
        if self.prewarm:
            self.set_timer(PREWARM_AFTER_S, self._prewarm_when_idle)

    # The first episode opened in a process built its screen: widgets, their styles, the
    # footer's keys, the turn view's renderers (8.5 s at load 11 on the bench's store, against
    # 0.95 s for the next ones). Once the first screen is up and nothing else is going on, an
    # episode screen is built and shown inside a batch (nothing reaches the terminal), then
    # kept as the spare the first open points at the episode asked for.

    def _prewarm_when_idle(self) -> None:
        screen = self.screen
        busy = (
            self._navigating
            or self._held_keys
            or len(self.screen_stack) > 1
            or not (isinstance(screen, DataScreen) and screen.loaded.is_set())
            or any(w.is_running for w in self.workers)
        )
        if busy:
            self.set_timer(PREWARM_AFTER_S, self._prewarm_when_idle)
        elif not self._episode_screens and self._spare_episode is None:
            self.post_message(_Prewarm())

    async def on__prewarm(self, _: _Prewarm) -> None:
        """(A message handler of the app's: keys typed meanwhile wait for it, in order.)"""
        from depthtui.screens.episode import EpisodeScreen

        row = self.conn.execute("SELECT max(id) FROM episodes").fetchone()
        if row is None or row[0] is None or len(self.screen_stack) > 1:
            return
        spare = EpisodeScreen(row[0])
        self.install_screen(spare, name="episode-spare")
        with self.batch_update():
            await self.push_screen(spare)
            await spare.loaded.wait()
            await self.pop_screen()
        self._spare_episode = spare

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
        if self._signing:  # one signature at a time: what commits meanwhile waits for the next
            return
        current = data_version(self.conn)
        if current != self._data_version:
            self._data_version = current
            self._signing = True
            self._sign()
        elif self._report_due() and getattr(screen, "uses_report", False):
            # nothing new, but the figures on screen are from a report that held back
            self._changed(frozenset({"report"}))

    @work(thread=True, group="signature", exit_on_error=False)
    def _sign(self) -> None:
        """The store's signature, off the UI thread (it scans the episodes' columns)."""
        try:
            with self._sign_lock:  # on_unmount closes the connection under it
                taken: Signature | None = signature(self._sign_conn)
                engines = _engine_states(self._sign_conn)
        except sqlite3.Error:
            taken, engines = None, {}
        try:
            self.call_from_thread(self._signed, taken, engines)
        except RuntimeError:  # the app has stopped meanwhile
            pass

    def _signed(self, taken: Signature | None, engines: dict[str, tuple[str, str, int]]) -> None:
        self._signing = False
        if self._signature is None:  # the first: nothing to compare it with
            self._signature, self._engines = taken or {}, engines
            return
        if taken is None:  # could not read it: reload as data_version alone would have
            changed = frozenset(self._signature) | {"?"}
        else:
            changed = changed_tables(self._signature, taken)
            self._signature = taken
        self._say_engines_stopped(engines)
        if changed:
            self._changed(changed)

    def _changed(self, tables: frozenset[str]) -> None:
        for table in tables:
            self.table_versions[table] = self.table_versions.get(table, 0) + 1
        self.version += 1
        try:
            screen = self.screen
        except ScreenStackError:
            return
        if isinstance(screen, DataScreen):
            screen.reload()

    def _say_engines_stopped(self, engines: dict[str, tuple[str, str, int]]) -> None:
        """An engine seen running that stopped by itself (idle) is said once, on any screen."""
        before, self._engines = self._engines, engines
        for owner, (status, message, pid) in engines.items():
            was = before.get(owner)
            if was is None or was[0] not in ("running", "stopping") or status != "stopped":
                continue
            if message.startswith(IDLE_PREFIX):
                self.notify(
                    f"the background engine (pid {pid}) {message}; running a job starts one again",
                    timeout=15,
                )

    def on_unmount(self) -> None:
        self._report_child.stop()
        # A thread worker may be inside a query on its connection: closing it under the query
        # crashed the process (a segfault in signature() at quit). Interrupt the query, close
        # once the worker let go; one still held after a second is left to the process's end.
        self.conn.close()
        for conn, lock in (
            (self._worker_conn, self._worker_lock),
            (self._sign_conn, self._sign_lock),
        ):
            conn.interrupt()
            if lock.acquire(timeout=1.0):
                try:
                    conn.close()
                finally:
                    lock.release()
        if self._writer is not None:
            self._writer.close()

    # ------------------------------------------------------------------ navigation

    async def on_open_episode(self, message: OpenEpisode) -> None:
        try:
            await self._open_episode(message)
        finally:
            self._navigated()

    async def _open_episode(self, message: OpenEpisode) -> None:
        from depthtui.screens.episode import EpisodeScreen

        query = message.query or self.last_query
        kept = self._episode_screens.get(self.current_mode)
        if kept is None and self._spare_episode is not None:  # built ahead (_prewarm)
            kept, self._spare_episode = self._spare_episode, None
            self._episode_screens[self.current_mode] = kept
        if kept is not None and kept not in self.screen_stack:
            kept.retarget(message.episode_id, message.turn, message.context, query)
            await self.push_screen(kept)
            return
        screen = EpisodeScreen(
            message.episode_id, turn=message.turn, context=message.context, query=query
        )
        if kept is None:
            self._episode_screens[self.current_mode] = screen
            self.install_screen(screen, name=f"episode-{self.current_mode}")
        await self.push_screen(screen)

    def show_job(self, job_id: int, *, come_back: bool = False) -> None:
        """The jobs screen with this job selected (after a submit, or `J` in a replay: with
        `come_back`, esc on the jobs screen goes back to where `J` was pressed)."""
        from depthtui.screens.jobs import JobsScreen

        self.return_mode = self.current_mode if come_back and self.current_mode != "jobs" else None
        self._goto("jobs")

        def select() -> None:
            screen = self.screen
            if isinstance(screen, JobsScreen):
                screen.select_job(job_id)

        self.call_after_refresh(select)

    async def on_open_task(self, message: OpenTask) -> None:
        from depthtui.screens.task_detail import TaskDetailScreen

        try:
            await self.push_screen(TaskDetailScreen(message.task_id))
        finally:
            self._navigated()

    def on_searched(self, message: Searched) -> None:
        self.last_query = message.query

    async def on_open_dataset(self, message: OpenDataset) -> None:
        from depthtui.screens.tasks import TasksScreen

        try:
            mounted = self.switch_mode("tasks")
            tasks = self._screen_stacks["tasks"][0]  # the mode's own screen, made by the switch
            if isinstance(tasks, TasksScreen):
                tasks.show_dataset(message.dataset)
            await mounted
        finally:
            self._navigated()

    async def on_launch(self, message: Launch) -> None:
        from depthtui.screens.launch import LaunchScreen

        try:
            await self.push_screen(LaunchScreen(message.task_ids))
        finally:
            self._navigated()

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

    def _skip_if_typing(self) -> None:
        """A screen-changing key is text in an input, and no key of the app under a dialog."""
        if isinstance(self.focused, Input | TextArea) or self.screen.is_modal:
            raise SkipAction()

    async def action_goto(self, mode: str) -> None:
        """A number key: that screen itself, not whatever was last opened on top of it."""
        self._skip_if_typing()
        mounted = self._goto(mode)
        if mounted is not None:
            await mounted  # the keys typed meanwhile wait for the new screen

    def _goto(self, mode: str) -> AwaitMount | None:
        if mode != "jobs":
            self.return_mode = None  # a number key: no way back to keep
        stack = self._screen_stacks.get(mode, [])
        above = set(stack[1:])  # what was opened on top of the mode's screen, as of now
        mounted = self.switch_mode(mode) if self.current_mode != mode else None
        # (a screen pushed after this key, an episode opened next, stays)
        self.call_after_refresh(self._pop_these, mode, above)
        return mounted

    def go_back(self) -> bool:
        """esc on a mode's own screen reached by `J`: back to the mode (and replay) left."""
        mode, self.return_mode = self.return_mode, None
        if mode is None or mode == self.current_mode or mode not in self._screen_stacks:
            return False
        self.switch_mode(mode)
        return True

    def _pop_these(self, mode: str, above: set[Screen]) -> None:
        while self.current_mode == mode and len(self.screen_stack) > 1 and self.screen in above:
            self.pop_screen()

    async def action_goto_episode(self) -> None:
        from depthtui.screens.goto import GotoEpisodeScreen

        self._skip_if_typing()

        def chosen(episode_id: int | None) -> None:
            if episode_id is not None:
                self.post_message(OpenEpisode(episode_id))

        await self.push_screen(GotoEpisodeScreen(), chosen)

    async def action_search(self) -> None:
        self._skip_if_typing()
        if self.current_mode == "search":
            raise SkipAction()  # the search screen's own `/`: back to its query
        await self.switch_mode("search")

    def action_toggle_help(self) -> None:
        from depthtui.screens.help import HelpScreen

        if isinstance(self.screen, HelpScreen):
            self.pop_screen()
        else:
            self.push_screen(HelpScreen(self.screen))
