"""SVG snapshots of the main screens at 120x40 on the synthetic store (fixed content, fixed
timestamps). Update with `pytest tests/test_tui_snapshots.py --snapshot-update` after a
deliberate change, and look at the SVGs in tests/__snapshots__/ before committing them."""

from __future__ import annotations

from pathlib import Path

# syrupy's own fixture, held here so that no other file's fixture of the same name (a Docker
# snapshot in tests/fixtures_verify.py, registered for the session by pytest_plugins) replaces
# it for these tests, whatever order the files are collected in.
from syrupy import snapshot  # noqa: F401

from depthtui.app import DepthApp
from depthtui.widgets.messages import OpenEpisode, OpenTask
from store import views
from store.db import open_reader

pytest_plugins = ["tests.fixtures_tui"]


def _shot(snap_compare, tui, db: Path, steps) -> None:
    async def run_before(pilot) -> None:
        await tui.settle(pilot)
        await steps(pilot)
        await tui.settle(pilot)

    assert snap_compare(
        DepthApp(db, start_engine=False), terminal_size=tui.size, run_before=run_before
    )


def test_dashboard(snap_compare, tui, synthetic_db: Path) -> None:
    async def steps(pilot) -> None:
        pass

    _shot(snap_compare, tui, synthetic_db, steps)


def test_tasks(snap_compare, tui, synthetic_db: Path) -> None:
    async def steps(pilot) -> None:
        await pilot.press("2")

    _shot(snap_compare, tui, synthetic_db, steps)


def test_task_detail_with_ladder_grid(snap_compare, tui, synthetic_db: Path, landmarks) -> None:
    async def steps(pilot) -> None:
        await pilot.press("2")
        await tui.settle(pilot)
        pilot.app.post_message(OpenTask(landmarks.ladder_task))

    _shot(snap_compare, tui, synthetic_db, steps)


def test_episode_replay_with_oracle_diff(snap_compare, tui, synthetic_db: Path, landmarks) -> None:
    conn = open_reader(synthetic_db)
    turn = next(m.idx for m in views.turn_marks(conn, landmarks.collateral) if m.collateral)
    conn.close()

    async def steps(pilot) -> None:
        pilot.app.post_message(OpenEpisode(landmarks.collateral, turn=turn))

    _shot(snap_compare, tui, synthetic_db, steps)


def test_episode_replay_verdict(snap_compare, tui, synthetic_db: Path, landmarks) -> None:
    async def steps(pilot) -> None:
        pilot.app.post_message(OpenEpisode(landmarks.fault_false_positive))
        await tui.settle(pilot)
        await pilot.press("G")

    _shot(snap_compare, tui, synthetic_db, steps)


def test_triage(snap_compare, tui, synthetic_db: Path) -> None:
    async def steps(pilot) -> None:
        await pilot.press("3")

    _shot(snap_compare, tui, synthetic_db, steps)


def test_episode_verdict_strip_of_a_multi_segment_task(
    snap_compare, tui, synthetic_db: Path, landmarks
) -> None:
    async def steps(pilot) -> None:
        pilot.app.post_message(OpenEpisode(landmarks.multi_segment))

    _shot(snap_compare, tui, synthetic_db, steps)


def test_reports(snap_compare, tui, synthetic_db: Path) -> None:
    # the terminal plots: depth against work (no baseline of dots along D = 1), the histogram,
    # pass rate by cap and safe success in each model's colour
    async def steps(pilot) -> None:
        await pilot.press("5")

    _shot(snap_compare, tui, synthetic_db, steps)
