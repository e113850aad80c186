"""The Runs screen: every episode in one table, with columns the user picks and keeps across a
restart, sorting with unmeasured values last, triage's filter language, and ⏎ to the replay.
Expected rows come from SQL on the store, not from the screen's own query."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from textual.widgets import Input, SelectionList

from depthtui.app import DepthApp
from store.db import open_reader

pytest_plugins = ["tests.fixtures_tui"]


@pytest.fixture(autouse=True)
def config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The preferences file goes to a folder of this test's own, never the user's."""
    home = tmp_path / "config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home


def _sql(db: Path, query: str) -> list[tuple]:
    conn = open_reader(db)
    try:
        return [tuple(r) for r in conn.execute(query)]
    finally:
        conn.close()


def _titles(table) -> list[str]:
    return [c.title.rstrip(" ↑↓") for c in table.columns]


def _ids(table) -> list[int]:
    """The episode ids in the table's rows, top to bottom (as the screen shows them)."""
    return [int(table._cells(i)[0][0]) for i in range(table.row_count)]


def _sorted_by(table) -> str:
    return next(c.key for c in table.columns if c.title.endswith(("↑", "↓")))


async def _open_runs(app: DepthApp, pilot, tui):
    await tui.settle(pilot)
    await pilot.press("6")
    await tui.settle(pilot)
    assert type(app.screen).__name__ == "RunsScreen"
    return app.screen.query_one("#runs")


def test_every_episode_listed_and_columns_kept_across_a_restart(
    tui, tui_db: Path, config_home: Path
) -> None:
    every = [r[0] for r in _sql(tui_db, "SELECT id FROM episodes ORDER BY id DESC")]
    assert len({r[0] for r in _sql(tui_db, "SELECT DISTINCT mode FROM episodes")}) > 1

    async def pick() -> list[str]:
        app = DepthApp(tui_db, poll_seconds=0.1, start_engine=False)
        async with app.run_test(size=tui.size) as pilot:
            table = await _open_runs(app, pilot, tui)
            assert _ids(table) == every  # all tasks, modes and models, newest first
            assert "cost" not in _titles(table) and "task" in _titles(table)
            await pilot.press("c")
            await pilot.pause()
            chooser = app.screen.query_one(SelectionList)
            titles = [
                str(chooser.get_option_at_index(i).prompt) for i in range(chooser.option_count)
            ]
            for title in ("task", "cost", "prompt arm", "job"):  # one off, three on
                chooser.highlighted = titles.index(title)
                await pilot.press("space")
            await pilot.press("escape")
            await tui.settle(pilot)
            return _titles(table)

    chosen = asyncio.run(pick())
    assert "task" not in chosen and {"cost", "prompt arm", "job"} <= set(chosen)
    saved = json.loads((config_home / "depthtui" / "tui.json").read_text())
    assert "cost" in saved["runs"]["columns"]

    async def reopen() -> list[str]:
        app = DepthApp(tui_db, poll_seconds=0.1, start_engine=False)
        async with app.run_test(size=tui.size) as pilot:
            return _titles(await _open_runs(app, pilot, tui))

    assert asyncio.run(reopen()) == chosen


def test_sorting_puts_unmeasured_last_both_ways_and_a_header_click_sorts(tui, tui_db: Path) -> None:
    caps = dict(_sql(tui_db, "SELECT id, cap FROM episodes"))
    # an infrastructure error or a broken task has no reward of the agent's
    rewards = dict(
        _sql(
            tui_db,
            "SELECT id, CASE WHEN outcome IN ('infra_error', 'task_broken') "
            "OR status != 'done' THEN NULL ELSE reward END FROM episodes",
        )
    )
    assert None in rewards.values()
    assert None in caps.values() and len(set(caps.values())) > 2

    async def main() -> tuple[list[int], list[int], list[int]]:
        app = DepthApp(tui_db, poll_seconds=0.1, start_engine=False)
        async with app.run_test(size=tui.size) as pilot:
            table = await _open_runs(app, pilot, tui)
            while _sorted_by(table) != "cap":
                await pilot.press("s")  # the next column, until it is cap
                await pilot.pause()
            first = _ids(table)
            await pilot.press("o")
            await pilot.pause()
            second = _ids(table)
            # a click on a header sorts by that column (reward: highest first)
            x = 0
            for column in table.columns:
                if column.key == "reward":
                    break
                x += column.width + 1
            await pilot.click("#runs", offset=(x + 1, 0))
            await pilot.pause()
            assert _sorted_by(table) == "reward"
            return first, second, _ids(table)

    first, second, by_reward = asyncio.run(main())
    values = [rewards[i] for i in by_reward]
    measured = [v for v in values if v is not None]
    assert measured == sorted(measured, reverse=True)
    assert values == measured + [None] * (len(values) - len(measured))
    for ids in (first, second):
        values = [caps[i] for i in ids]
        measured = [v for v in values if v is not None]
        assert values == measured + [None] * (len(values) - len(measured))  # unmeasured last
    firsts = [caps[i] for i in first if caps[i] is not None]
    seconds = [caps[i] for i in second if caps[i] is not None]
    assert {tuple(firsts), tuple(seconds)} == {
        tuple(sorted(firsts)),
        tuple(sorted(firsts, reverse=True)),
    }
    assert firsts != seconds


def test_filter_and_enter_opens_the_replay(tui, tui_db: Path) -> None:
    want = [
        r[0]
        for r in _sql(
            tui_db,
            "SELECT id FROM episodes WHERE agent LIKE '%qwen%' AND mode = 'ladder' "
            "AND status = 'done' AND outcome = 'fail' AND collateral = 0 "
            "AND coalesce(end_reason, '') != 'turn_cap' ORDER BY id DESC",
        )
    ]
    assert want

    async def main() -> tuple[list[int], int, int | None]:
        app = DepthApp(tui_db, poll_seconds=0.1, start_engine=False)
        async with app.run_test(size=tui.size) as pilot:
            table = await _open_runs(app, pilot, tui)
            await pilot.press("f")
            assert isinstance(app.focused, Input)
            await pilot.press(*"model:qwen mode:ladder outcome:fail")
            await pilot.pause()
            shown = _ids(table)
            await pilot.press("enter")  # back to the table
            await pilot.press("down")
            chosen = shown[table.cursor_row]
            await pilot.press("enter")
            await tui.settle(pilot)
            return shown, chosen, getattr(app.screen, "episode_id", None)

    shown, chosen, opened = asyncio.run(main())
    assert shown == want
    assert type(opened) is int and opened == chosen


@pytest.mark.slow
def test_opens_fast_on_five_thousand_episodes(tui, tmp_path: Path) -> None:
    """One query, and only the visible rows drawn: 5,000 episodes open quickly, and a sort or a
    filter keystroke does not redraw them all (a DataTable took 5.8 s per sort here at load 14,
    0.15 s now)."""
    from devtools import synthetic
    from store.db import Store

    db = tmp_path / "big.db"
    with Store(db) as store:
        synthetic.generate(
            store, synthetic.SyntheticSpec(hostile=False, total_episodes=5000, total_turns=5000)
        )
    total = _sql(db, "SELECT count(*) FROM episodes")[0][0]
    assert total >= 5000

    async def main() -> tuple[int, float, float, int]:
        app = DepthApp(db, poll_seconds=0.1, start_engine=False)
        async with app.run_test(size=tui.size) as pilot:
            await tui.settle(pilot)
            started = time.perf_counter()
            table = await _open_runs(app, pilot, tui)
            opened, shown = time.perf_counter() - started, table.row_count
            started = time.perf_counter()
            await pilot.press("s", "f", "q")  # a sort, then a filter keystroke
            await pilot.pause()
            return shown, opened, time.perf_counter() - started, len(_ids(table))

    rows, opened, changed, matching = asyncio.run(main())
    assert rows == total
    assert opened < 10, f"the Runs screen took {opened:.1f} s to open on {total} episodes"
    assert 0 < matching < total  # the filter "q" (qwen, ...) narrowed the rows
    assert changed < 3, f"a sort and a filter keystroke took {changed:.1f} s on {total} episodes"


def test_a_broken_preferences_file_is_named_and_replaced_on_save(config_home: Path) -> None:
    from depthtui.prefs import PrefsError, load_section, prefs_path, save_section

    path = prefs_path()
    assert path == config_home / "depthtui" / "tui.json"
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(PrefsError, match=str(path)):
        load_section("runs")
    save_section("runs", {"columns": ["cost"]})
    assert load_section("runs") == {"columns": ["cost"]}
    path.write_text('{"runs": []}')
    with pytest.raises(PrefsError, match="'runs' should be an object"):
        load_section("runs")
