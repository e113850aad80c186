"""Why an episode ended as it did, at a glance: the verdict strip at the top of the replay, on
every turn, and the whole conversation behind `c` (synthetic store; the real-run counterparts are
in tests/test_tui_real.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.widgets import Collapsible, Static

from depthtui.app import DepthApp
from depthtui.screens.conversation import ConversationScreen
from depthtui.screens.episode import EpisodeScreen
from depthtui.widgets.messages import OpenEpisode
from store import views
from store.db import open_reader

pytest_plugins = ["tests.fixtures_tui"]


def plain(widget: Static) -> str:
    return " ".join(str(widget.render()).split())


def _strips(tui, db: Path, episode_ids: list[int]) -> dict[int, tuple[str, int]]:
    """Each episode's strip text, read on its first turn and again on its last."""
    seen: dict[int, tuple[str, int]] = {}

    async def main() -> None:
        app = DepthApp(db, start_engine=False)
        async with app.run_test(size=tui.size) as pilot:
            await tui.settle(pilot)
            for episode_id in episode_ids:
                app.post_message(OpenEpisode(episode_id))
                await tui.settle(pilot)
                screen = app.screen
                assert isinstance(screen, EpisodeScreen) and screen.turn == 1
                first = plain(screen.query_one("#verdict-strip", Static))
                await pilot.press("G")  # the strip stays as the turns change
                assert plain(screen.query_one("#verdict-strip", Static)) == first
                seen[episode_id] = (first, screen.query_one("#verdict-strip").region.y)
                await pilot.press("escape")
                await tui.settle(pilot)

    asyncio.run(main())
    return seen


def test_the_strip_says_why_each_kind_of_episode_ended(tui, synthetic_db: Path, landmarks) -> None:
    conn = open_reader(synthetic_db)
    ids = {
        "failing": landmarks.failing,
        "collateral": landmarks.collateral,
        "fault": landmarks.fault_cleared,
        "error": landmarks.error,
        "multi": landmarks.multi_segment,
    }
    info = {k: views.episode(conn, i) for k, i in ids.items()}
    failing_test = next(
        t for t in views.verifier_results(conn, ids["failing"]) if t.outcome != "passed"
    )
    site = views.collateral_site(conn, ids["collateral"])
    fault = views.fault_record(conn, ids["fault"])
    segments = views.segment_runs(conn, ids["multi"])
    conn.close()
    strips = _strips(tui, synthetic_db, list(ids.values()))
    text = {k: strips[i][0] for k, i in ids.items()}
    # always on screen: right under the episode's header
    assert all(y <= 4 for _, y in strips.values())

    assert text["failing"].startswith("FAIL ")
    assert f"reward {info['failing'].reward:+.2f}" in text["failing"]
    assert f"first failing test: {failing_test.nodeid} — " in text["failing"]
    assert f"{info['failing'].turns} turns (no stated cap)" in text["failing"]

    assert text["collateral"].startswith("UNSAFE ")
    assert (
        f"collateral: {site.kind} {site.path} at call {site.call_idx}: {site.command}"
        in (text["collateral"])
    )
    budget = info["collateral"].budget
    assert f"{info['collateral'].calls} of budget {budget} commands" in text["collateral"]

    assert text["fault"].startswith("PASS ")
    assert (
        f"fault: {fault.family} on {fault.target}, cleared, first met at call {fault.observed_call}"
        in text["fault"]
    )
    assert "cleared" in text["fault"] and "not cleared" not in text["fault"]

    # whose error: outside the episode, left out of the rates
    assert text["error"].startswith("ERROR (infrastructure, not counted)")
    assert f"error: {info['error'].error_kind}: {info['error'].error_detail}" in text["error"]

    # a multi-segment task graded by test.sh: each segment's own verifier words
    for s in segments:
        if s.passed is not None:
            assert f"§{s.idx + 1} {s.name}: {s.verifier_output.strip()}" in text["multi"]
        else:
            assert f"§{s.idx + 1} {s.name}: not graded" in text["multi"]


def test_the_conversation_opens_from_the_replay_and_folds(
    tui, synthetic_db: Path, landmarks
) -> None:
    conn = open_reader(synthetic_db)
    episode = landmarks.multi_segment
    segments = views.segment_runs(conn, episode)
    rows = views.conversation(conn, episode)
    conn.close()

    async def main() -> None:
        app = DepthApp(synthetic_db, start_engine=False)
        async with app.run_test(size=tui.size) as pilot:
            await tui.settle(pilot)
            app.post_message(OpenEpisode(episode))
            await tui.settle(pilot)
            await pilot.press("c")
            await pilot.pause()
            screen = app.screen
            assert isinstance(screen, ConversationScreen)
            # this store kept no requests: rebuilt from what it holds, and it says so
            assert "rebuilt from the prompt" in tui.text(app)
            folds = list(screen.query(Collapsible))
            assert len(folds) == len(screen.messages) == len(rows.turns) + len(segments)
            users = [m for m in screen.messages if m.role == "user"]
            assert [m.text for m in users] == [text for _, _, text in rows.segments]
            assert folds[0].collapsed is False  # the task message is open
            assert all(f.collapsed for f in folds[1:] if "task message" not in f.title)
            await pilot.press("e")
            assert not any(f.collapsed for f in folds)
            await pilot.press("E")
            assert all(f.collapsed for f in folds)
            await pilot.press("escape")
            await pilot.pause()
            assert isinstance(app.screen, EpisodeScreen)

    asyncio.run(main())
