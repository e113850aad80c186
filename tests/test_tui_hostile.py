"""A hostile transcript (screen-switching, mouse-mode and OSC escapes, NUL and C1 bytes, a 5 MB
single line) renders without harm: nothing but colour and cursor-position sequences, drawn by
Textual itself, reaches the terminal."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

from rich.console import Console

from depthtui.app import DepthApp
from depthtui.screens.episode import EpisodeScreen
from depthtui.screens.output import OutputScreen
from depthtui.widgets.messages import OpenEpisode
from depthtui.widgets.output_view import OutputView
from depthtui.widgets.turn_view import TurnView
from devtools import synthetic

pytest_plugins = ["tests.fixtures_tui"]

# What Textual may write: SGR (colours) and CUP (cursor moves); nothing from the transcript.
ALLOWED = re.compile(r"\x1b\[[0-9;]*[mH]")
ANY_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|.?)", re.DOTALL)
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1a\x1c-\x1f\x7f-\x9f]")


def terminal_output(app: DepthApp) -> str:
    """Exactly what a full redraw of the current screen writes to a colour terminal."""
    console = Console(
        file=io.StringIO(), force_terminal=True, color_system="truecolor", width=app.size.width
    )
    return app.screen._compositor.render_full_update().render_segments(console)


def assert_harmless(app: DepthApp, where: str) -> str:
    out = terminal_output(app)
    foreign = sorted(
        {m.group() for m in ANY_ESCAPE.finditer(out) if not ALLOWED.fullmatch(m.group())}
    )
    assert foreign == [], f"{where}: escape sequences reached the terminal: {foreign[:5]}"
    controls = sorted({hex(ord(c)) for c in CONTROL.findall(out)})
    assert controls == [], f"{where}: control bytes reached the terminal: {controls}"
    return out


def test_hostile_transcript_renders_without_harm(tui, synthetic_db: Path, landmarks) -> None:
    async def main() -> None:
        app = DepthApp(synthetic_db, start_engine=False)
        async with app.run_test(size=tui.size) as pilot:
            await tui.settle(pilot)
            app.post_message(OpenEpisode(landmarks.hostile))
            await tui.settle(pilot)
            screen = app.screen
            assert isinstance(screen, EpisodeScreen)
            out = assert_harmless(app, "turn 1")
            assert "␛[?1049h" in tui.text(app)  # shown, inert
            assert "ALT-SCREEN" in tui.text(app) and "\x1b[?1049h" not in out
            await pilot.press("r")  # reasoning with OSC 8 and DCS
            assert_harmless(app, "turn 1 reasoning")
            await pilot.press("o")  # the 5 MB single line with escapes and NUL bytes
            await pilot.pause()
            assert isinstance(app.screen, OutputScreen)
            view = app.screen.query_one(OutputView)
            assert view.row_count > synthetic.HOSTILE_LINE_BYTES // view.size.width // 2
            assert_harmless(app, "full output, top")
            await pilot.press("G")
            await pilot.pause()
            assert view.scroll_y > 0
            assert_harmless(app, "full output, bottom")
            await pilot.press("escape")
            await pilot.press("l")  # turn 2: 5 MB of model words on one line
            assert screen.turn == 2
            assert screen.detail.text_length == synthetic.HOSTILE_LINE_BYTES
            assert_harmless(app, "turn 2")
            view = screen.query_one(TurnView)
            view.scroll_to_widget(screen.query_one("#turn-calls"), animate=False, top=True)
            await pilot.pause()
            view.scroll_relative(y=-2, animate=False)
            await pilot.pause()
            assert "more characters not shown" in tui.text(app)
            assert_harmless(app, "turn 2, end of the words")
            await pilot.press("l")  # turn 3: format error, verdict with a hostile test message
            assert screen.turn == 3
            assert_harmless(app, "turn 3 and verdict")
            await pilot.press("j", "j", "j", "j")
            assert_harmless(app, "verdict scrolled")
            await pilot.press("escape", "3")  # triage lists the hostile path
            await tui.settle(pilot)
            assert_harmless(app, "triage")
            await pilot.press("slash")
            await tui.settle(pilot)
            await pilot.press(*"pwned", "enter")
            await tui.settle(pilot)
            assert "pwned" in tui.text(app)
            assert_harmless(app, "search hits")

    asyncio.run(main())
