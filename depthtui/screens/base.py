"""What every screen that shows store data shares: reload when the store changed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from textual._context import NoActiveAppError
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Input


class DataScreen(Screen[None]):
    """A screen that loads from the store and reloads on `App.version` changes.

    Subclasses implement `load()`; it must keep the user's selection and scroll place. A screen
    that is not visible when the store changes reloads when it is shown again. (Textual calls
    `on_mount` of every class in the MRO, subclass first, so a subclass's own `on_mount` sets up
    its widgets and this one then loads: no `super()` call.)
    """

    uses_report = False  # shows figures from App.report (reloaded when a held-back one is due)
    # The tables whose changes this screen shows (store/changes.py names); None: all of them.
    # A commit that changes none of them (a heartbeat, a job's progress on the compare screen)
    # does not reload the screen.
    watches: frozenset[str] | None = None

    BINDINGS = [
        Binding("escape", "back", "Back", show=False),
        Binding("j", "move(1)", "Down", show=False),
        Binding("k", "move(-1)", "Up", show=False),
    ]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.loaded_version = -1  # -1: widgets not set up yet, nothing to reload into
        self._loaded_stamp: object = None  # the watched tables' versions at the last load
        self.loaded = asyncio.Event()  # set once the first load is on screen (tests, bench)

    def on_mount(self) -> None:
        self.loaded_version = self.app.version
        self._loaded_stamp = self._stamp()
        self.load()

    def on_screen_resume(self) -> None:
        self.reload()

    def reload(self) -> None:
        """Load again if the store changed since the last load (and the screen is set up)."""
        if self.loaded_version in (-1, self.app.version):
            return
        self.loaded_version = self.app.version
        stamp = self._stamp()
        if stamp is not None and stamp == self._loaded_stamp:
            return  # what changed is nothing this screen shows
        self._loaded_stamp = stamp
        self.load()

    def _stamp(self) -> object:
        """The versions of the tables this screen watches (None: it watches everything)."""
        versions = getattr(self.app, "table_versions", None)
        if versions is None or self.watches is None:
            return None
        watched = sorted(self.watches | ({"report"} if self.uses_report else set()))
        # "?": the app could not read a signature, and reloads everything
        return tuple(versions.get(t, 0) for t in watched), versions.get("?", 0)

    def load(self) -> None:
        raise NotImplementedError

    def mark_loaded(self) -> None:
        self.loaded.set()

    def deliver(self, show: Callable[..., None], *args: Any) -> None:
        """From a load worker's thread: `show(*args)` on the app's thread, unless this screen
        has left the app meanwhile (popped, or the app exiting while a slow load was out): its
        widgets are gone then, and what was loaded has nowhere to go."""

        def guarded() -> None:
            if self.is_attached:
                show(*args)

        try:
            app = self.app
        except NoActiveAppError:  # a removed screen no longer knows its app
            return
        app.call_from_thread(guarded)

    def action_move(self, step: int) -> None:
        """j/k: the focused table's cursor, or the focused view's scroll."""
        focused = self.focused
        if isinstance(focused, DataTable):
            if step > 0:
                focused.action_cursor_down()
            else:
                focused.action_cursor_up()
        elif focused is not None and focused.allow_vertical_scroll:
            focused.scroll_relative(y=step * 3, animate=False)

    def action_back(self) -> None:
        """esc: out of a text field first (so number keys and j/k work again), else back."""
        if isinstance(self.focused, Input):
            tables = [t for t in self.query(DataTable) if t.display]
            self.set_focus(tables[0] if tables else None)
            return
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
        elif getattr(self.app, "return_mode", None):
            self.app.go_back()  # (J from a replay: back to it)
