"""A screen's load worker that finishes after the screen has gone (popped, or the app quitting
while a big store's report is still being computed) drops what it loaded instead of failing
the app: seen once as NoMatches('#datasets') from the dashboard when a test quit mid-load."""

from __future__ import annotations

import asyncio
import threading

from textual import work
from textual.app import App, ComposeResult
from textual.widgets import Static

from depthtui.screens.base import DataScreen


class SlowScreen(DataScreen):
    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.delivered = threading.Event()
        self.shown: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static(id="out")

    def load(self) -> None:
        self._fetch()

    @work(thread=True)
    def _fetch(self) -> None:
        self.gate.wait(10)
        self.deliver(self._show, "loaded")
        self.delivered.set()

    def _show(self, text: str) -> None:
        self.query_one("#out", Static).update(text)
        self.shown.append(text)


class HostApp(App[None]):
    version = 0  # what DataScreen reads to know whether the store changed


async def _wait(event: threading.Event) -> None:
    for _ in range(200):
        if event.is_set():
            return
        await asyncio.sleep(0.025)
    raise AssertionError("the load worker never delivered")


def shown_after_a_late_load(pop_first: bool) -> list[str]:
    """What the screen showed when its held-back load was let through, after the screen was
    popped or while it is still on top. Leaving `run_test` re-raises any worker failure."""

    async def main() -> list[str]:
        app = HostApp()
        screen = SlowScreen()
        async with app.run_test() as pilot:
            await app.push_screen(screen)
            await pilot.pause()
            if pop_first:
                await app.pop_screen()
                await pilot.pause()
            screen.gate.set()
            await _wait(screen.delivered)
            await pilot.pause()
        return screen.shown

    return asyncio.run(main())


def test_a_load_that_lands_on_its_screen_is_shown() -> None:
    assert shown_after_a_late_load(pop_first=False) == ["loaded"]


def test_a_load_that_lands_after_its_screen_was_popped_is_dropped() -> None:
    assert shown_after_a_late_load(pop_first=True) == []
