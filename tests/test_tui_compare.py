"""Two models (or prompt arms) side by side on one task, and the contract tab and the oracle's diff
saying one thing per path.

- store/compare.py on a real SQLite file written through store/episodes.py's writers;
- the compare screen, the contract tab and the diff through Textual's Pilot on the store of real
  demo runs (tests/fixtures_tui_real.py: real Docker, real verifiers, scripted models on
  loopback), which has two models on demo/error-count and demo/top-error-ips, the frozen
  contract of demo/error-count (its reference creates a report file) and validate's forgery
  probes, where a new file at a fault's input path is flagged by the integrity check;
- one SVG snapshot of the compare screen on the synthetic store (fixed content).
"""

from __future__ import annotations

import asyncio
import io
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from rich.console import Console

# syrupy's own fixture, held here as tests/test_tui_snapshots.py does (a Docker snapshot fixture
# of the same name in tests/fixtures_verify.py must not replace it for this file's snapshot).
from syrupy import snapshot  # noqa: F401
from textual.widgets import DataTable, Select, Static

from depthtui.app import DepthApp
from depthtui.screens.compare import CompareScreen, _row_key
from depthtui.screens.episode import EpisodeScreen
from depthtui.screens.task_detail import TaskDetailScreen
from depthtui.widgets.diff_view import events_view
from depthtui.widgets.messages import OpenEpisode, OpenTask
from store import compare, views
from store import episodes as ep
from store.db import Store, open_reader
from store.protocol import get_contract

if TYPE_CHECKING:
    pass

pytest_plugins = ["tests.fixtures_tui", "tests.fixtures_tui_real"]
real = [pytest.mark.docker, pytest.mark.slow]
EC, TOP = "demo/error-count", "demo/top-error-ips"
TASK = "demo/x"


def drive(tui, db: Path, flow: Callable[[DepthApp, object], Awaitable[None]]) -> None:
    async def main() -> None:
        app = DepthApp(db, poll_seconds=0.1, start_engine=False)
        async with app.run_test(size=tui.size) as pilot:
            await tui.settle(pilot)
            await flow(app, pilot)

    asyncio.run(main())


def plain(widget: Static, width: int = 200) -> str:
    console = Console(width=width, color_system=None, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


# --------------------------------------------------------------------------- the store query


def _run(
    store: Store,
    agent: str,
    turns: list[list[tuple[str, str]]],
    *,
    cap: int | None = None,
    passed: bool = True,
    prompt: str = "general",
    attempt: int = 0,
    closing: bool = True,
    **more,
) -> int:
    """One finished episode as the engine writes it: a turn per reply with its calls (command,
    what the model was shown), then the closing reply (not a counted turn)."""
    key = f"{agent}-{cap}-{prompt}-{attempt}-{more.get('fault_family', 'clean')}"
    eid = ep.create_episode(
        store, run_key=key, task_id=TASK, task_hash="h", mode="ladder", agent=agent,
        cap=cap, attempt=attempt, prompt_name=prompt, **more,
    )  # fmt: skip
    n = 0
    for i, calls in enumerate(turns, start=1):
        rows = []
        for command, shown in calls:
            n += 1
            rows.append({"idx": n, "command": command, "exit_code": 0, "observation": shown})
        ep.record_turn(store, eid, {"idx": i, "text": f"reply {i}"}, rows)
    if closing:
        ep.record_turn(store, eid, {"idx": len(turns) + 1, "text": "Done.", "counted": False}, [])
    hit_cap = not passed and cap is not None and len(turns) >= cap
    ep.finish_episode(
        store, eid, passed=passed, end_reason="turn_cap" if hit_cap else "no_tool_call",
        tests_passed=int(passed), tests_total=1, reward=1.0 if passed else 0.0,
    )  # fmt: skip
    return eid


LOOK = [("ls -la /home/user/logs", "app.log")]
WORK = [("wc -l app.log > /home/user/reports/n.txt", "")]


def test_sides_rows_and_the_default_pair(db_path: Path) -> None:
    with Store(db_path) as store:
        a1 = _run(store, "alpha", [LOOK], cap=1, passed=False)
        a2 = _run(store, "alpha", [LOOK], cap=1, passed=False, attempt=1)
        a3 = _run(store, "alpha", [LOOK, WORK])
        b1 = _run(store, "beta", [WORK], cap=1)
        b2 = _run(store, "beta", [WORK], budget=3, fault_family="perm_denied")
        g1 = _run(store, "gamma", [WORK])
        _run(store, "oracle", [WORK], prompt="")  # a built-in agent: not a model
        running = ep.create_episode(  # still running: shown, as running
            store,
            run_key="r",
            task_id=TASK,
            task_hash="h",
            mode="ladder",
            agent="beta",
            cap=5,
            prompt_name="general",
        )
        stopped = ep.create_episode(
            store, run_key="i", task_id=TASK, task_hash="h", mode="ladder", agent="gamma"
        )
        ep.finish_episode(store, stopped, status="interrupted")  # run again: not shown
    conn = open_reader(db_path)
    sides = compare.sides(conn, TASK)
    assert [(s.name, s.runs) for s in sides.models] == [("alpha", 3), ("beta", 3), ("gamma", 1)]
    assert [(s.name, s.runs) for s in sides.prompts] == [("general", 7)]
    left, right = sides.default_pair()
    assert (left.kind, left.name, right.name) == ("model", "alpha", "beta")

    c = compare.compare(conn, TASK, "model", "alpha", "beta")
    table = [
        (
            r.condition.label(c.several_others),
            [(x.episode_id, x.outcome, x.turns) for x in r.left],
            [(x.episode_id, x.outcome, x.turns) for x in r.right],
        )
        for r in c.rows
    ]
    assert table == [
        ("cap 1", [(a1, "cap", 1), (a2, "cap", 1)], [(b1, "pass", 1)]),
        ("cap 5", [], [(running, "running", 0)]),
        ("uncapped", [(a3, "pass", 2)], []),
        ("uncapped · budget 3 · perm_denied", [], [(b2, "pass", 1)]),
    ]
    assert not c.several_others
    assert compare.compare(conn, TASK, "model", "alpha", "gamma").rows[-1].right[0].episode_id == g1
    conn.close()


def test_prompt_arms_are_compared_model_by_model(db_path: Path) -> None:
    with Store(db_path) as store:
        _run(store, "alpha", [LOOK], prompt="general")
        _run(store, "alpha", [WORK], prompt="budget")
        _run(store, "beta", [LOOK], prompt="general")
    conn = open_reader(db_path)
    sides = compare.sides(conn, TASK)
    assert [s.name for s in sides.prompts] == ["general", "budget"]
    c = compare.compare(conn, TASK, "prompt", "budget", "general")
    assert c.several_others  # rows are per model, and say which
    labels = [r.condition.label(c.several_others) for r in c.rows]
    assert labels == ["uncapped · alpha", "uncapped · beta"]
    assert [len(r.left) for r in c.rows] == [1, 0] and [len(r.right) for r in c.rows] == [1, 1]
    conn.close()


def test_the_screen_switches_to_prompt_arms(tui, db_path: Path) -> None:
    with Store(db_path) as store:
        first = _run(store, "alpha", [LOOK, WORK], prompt="general")
        second = _run(store, "alpha", [LOOK, LOOK], prompt="budget")
        _run(store, "beta", [WORK], prompt="general")
        _run(store, "beta", [WORK], prompt="general", attempt=1)

    async def flow(app: DepthApp, pilot) -> None:
        app.push_screen(CompareScreen(TASK))
        await tui.settle(pilot)
        screen = app.screen
        assert (screen.kind, screen.left, screen.right) == ("model", "alpha", "beta")
        kind = screen.query_one("#compare-kind", Select)
        assert kind.display  # both kinds can be compared here
        kind.value = "prompt"
        assert await tui.until(pilot, lambda: screen.kind == "prompt" and screen.loaded.is_set())
        await tui.settle(pilot)
        assert (screen.left, screen.right) == ("general", "budget")  # most runs first
        table = screen.query_one("#compare-table", DataTable)
        rows = [[str(x) for x in table.get_row_at(i)] for i in range(table.row_count)]
        assert rows == [
            ["uncapped · alpha", "pass", "2", "pass", "2", "turn 2: commands"],
            ["uncapped · beta", "pass pass", "1 1", "·", "·", "–"],
        ]
        detail = plain(screen.query_one("#compare-divergence", Static))
        assert f"episode {first} general" in detail and f"episode {second} budget" in detail
        assert "first divergence: turn 2, the commands differ" in detail
        assert "general  $ wc -l app.log" in detail and "budget   $ ls -la" in detail

    drive(tui, db_path, flow)


def test_the_first_divergence_of_two_transcripts(db_path: Path) -> None:
    cat = [("cat app.log", "ERROR 1")]
    with Store(db_path) as store:
        base = _run(store, "alpha", [LOOK, cat, WORK])
        same = _run(store, "beta", [LOOK, cat, WORK])
        other_cmd = _run(store, "gamma", [LOOK, [("head app.log", "x")]])
        other_out = _run(store, "delta", [LOOK, [("cat app.log", "ERROR 2")], WORK])
        shorter = _run(store, "eps", [LOOK, cat])
        after_out = _run(store, "zeta", [LOOK, [("cat app.log", "ERROR 2")], LOOK])
    conn = open_reader(db_path)
    d = compare.divergence(conn, base, same)
    assert (d.what, d.turn, d.left_step, d.right_step) == ("identical", None, None, None)

    d = compare.divergence(conn, base, other_cmd)
    assert (d.what, d.turn, d.ended, d.output_turn) == ("command", 2, None, None)
    assert d.left_step.commands == ("cat app.log",)
    assert d.right_step.commands == ("head app.log",) and d.right_step.idx == 2

    d = compare.divergence(conn, base, other_out)
    assert (d.what, d.turn) == ("output", 2)
    assert d.left_step.outputs == ("ERROR 1",) and d.right_step.outputs == ("ERROR 2",)

    # the closing reply is not a turn: the shorter run ended after 2 turns
    d = compare.divergence(conn, base, shorter)
    assert (d.what, d.turn, d.ended, d.right_step) == ("ended", 3, "right", None)
    assert d.left_step.commands == (WORK[0][0],)

    # the outputs parted first, then the commands: both are said
    d = compare.divergence(conn, base, after_out)
    assert (d.what, d.turn, d.output_turn) == ("command", 3, 2)
    conn.close()


# --------------------------------------------------------------------------- the compare screen


@pytest.mark.docker
@pytest.mark.slow
def test_compare_two_models_on_a_real_task(tui, real_db: Path) -> None:
    conn = open_reader(real_db)
    sides = compare.sides(conn, EC)
    default = sides.default_pair()
    shared = any(
        r.left and r.right
        for r in compare.compare(conn, EC, "model", default[0].name, default[1].name).rows
    )
    c = compare.compare(conn, EC, "model", "alpha", "beta")
    row = next(r for r in c.rows if r.condition.cap == 1)
    beta_run = row.right[0]
    conn.close()
    # what the scripted models did: alpha looks first and hits cap 1, beta does the work at once
    assert [r.outcome for r in row.left] == ["cap", "cap"] and beta_run.outcome == "pass"

    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(OpenTask(EC))
        await tui.settle(pilot)
        assert isinstance(app.screen, TaskDetailScreen)
        assert "c Compare…" in tui.text(app)  # in the footer
        assert "Compare…" in {c.title for c in app.get_system_commands(app.screen)}
        await pilot.press("c")
        await tui.settle(pilot)
        screen = app.screen
        assert isinstance(screen, CompareScreen) and screen.task_id == EC
        # the two models with most runs
        assert (screen.left, screen.right) == (default[0].name, default[1].name)
        assert screen.query_one("#compare-left", Select).value == default[0].name
        note = "these two never ran under the same condition on this task"
        assert (note in plain(screen.query_one("#compare-divergence", Static))) != shared
        screen.query_one("#compare-right", Select).value = "beta"
        assert await tui.until(pilot, lambda: screen.right == "beta" and screen.loaded.is_set())
        await tui.settle(pilot)
        table = screen.query_one("#compare-table", DataTable)
        cells = [str(x) for x in table.get_row_at(0)]
        assert cells == ["cap 1", "cap cap", "1 1", "pass", "1", "turn 1: commands"]
        assert "alpha" in str(table.ordered_columns[1].label)
        assert "beta" in str(table.ordered_columns[3].label)
        detail = plain(screen.query_one("#compare-divergence", Static))
        assert "first divergence: turn 1, the commands differ" in detail
        assert "alpha  $ ls -la /home/user/logs" in detail
        assert "beta   $ mkdir -p /home/user/reports && awk" in detail
        uncapped = next(i for i, r in enumerate(screen.comparison.rows) if r.condition.cap is None)
        assert [str(x) for x in table.get_row_at(uncapped)][3:] == ["·", "·", "–"]
        # a: the left side's other run at cap 1 is compared instead
        await pilot.press("a")
        await tui.settle(pilot)
        # (the screen's own row key: a copy of its format here went stale when fault-bench
        # clean runs got a row of their own)
        assert screen.pairs[_row_key(row.condition)] == (1, 0)
        assert f"episode {row.left[1].episode_id} alpha" in plain(
            screen.query_one("#compare-divergence", Static)
        )
        # enter on beta's cell opens beta's run, at the turn where they part
        table.move_cursor(row=0, column=3)
        await pilot.press("enter")
        await tui.settle(pilot)
        replay = app.screen
        assert isinstance(replay, EpisodeScreen) and replay.episode_id == beta_run.episode_id
        assert replay.turn == 1
        await pilot.press("escape")
        await tui.settle(pilot)
        assert app.screen is screen
        # x swaps the sides
        await pilot.press("x")
        await tui.settle(pilot)
        assert (screen.left, screen.right) == ("beta", "alpha")
        assert [str(x) for x in table.get_row_at(0)][1] == "pass"

    drive(tui, real_db, flow)


@pytest.mark.docker
@pytest.mark.slow
def test_identical_transcripts_say_so_and_the_palette_opens_compare(tui, real_db: Path) -> None:
    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(OpenTask(TOP))
        await tui.settle(pilot)
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Compare")
        assert await tui.until(pilot, lambda: "Compare…" in tui.text(app))
        await pilot.pause(0.3)
        await pilot.press("enter")
        assert await tui.until(pilot, lambda: isinstance(app.screen, CompareScreen))
        await tui.settle(pilot)
        screen = app.screen
        assert (screen.left, screen.right) == ("alpha", "beta")  # the only two here
        row = [str(x) for x in screen.query_one("#compare-table", DataTable).get_row_at(0)]
        # both look first at cap 1 and run out of turns: the same command, the same output
        assert row == ["cap 1", "cap cap", "1 1", "cap cap", "1 1", "identical"]
        detail = plain(screen.query_one("#compare-divergence", Static))
        assert "identical: the same commands and outputs in every turn" in detail

    drive(tui, real_db, flow)


# --------------------------------------------------------------------------- contract and diff


@pytest.mark.docker
@pytest.mark.slow
def test_the_contract_tab_says_creating_files_is_permitted(tui, real_db: Path) -> None:
    conn = open_reader(real_db)
    contract = get_contract(conn, EC)
    conn.close()
    # validate froze it: the reference changes nothing that existed, it creates the report
    assert contract["permitted"] == {}
    created = [p for p, k in contract["detail"]["reference_changes"].items() if k == ["created"]]
    assert "/home/user/reports/error_count.txt" in created

    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(OpenTask(EC))
        await tui.settle(pilot)
        for _ in range(4):
            await pilot.press("right_square_bracket")
        await tui.settle(pilot)
        text = plain(app.screen.query_one("#contract", Static))
        assert "nothing may change" not in text
        assert "none: every file and folder there before must stay as it was" in text
        assert "creating files and folders is always permitted" in text
        lines = text.splitlines()
        start = lines.index("the reference created (permitted as new paths)")
        assert {line.strip() for line in lines[start + 1 : start + 1 + len(created)]} == set(
            created
        )
        assert "/home/user/reports/error_count.txt" in tui.text(app)  # on screen, not only held

    drive(tui, real_db, flow)


def _shared_paths(conn: sqlite3.Connection, other_kind: str) -> tuple[int, int, str, int]:
    """(episode, call, path, turn) where one call has a collateral integrity finding and a
    non-collateral `other_kind` event at the same path."""
    r = conn.execute(
        "SELECT a.episode_id, a.call_idx, a.path FROM oracle_events a JOIN oracle_events b "
        "ON a.episode_id = b.episode_id AND a.call_idx = b.call_idx AND a.path = b.path "
        "WHERE a.kind = 'integrity' AND a.collateral = 1 AND b.kind = ? AND b.collateral = 0 "
        "ORDER BY a.episode_id LIMIT 1",
        (other_kind,),
    ).fetchone()
    assert r is not None, f"no call with integrity and {other_kind} at one path"
    (turn,) = conn.execute(
        "SELECT turn_idx FROM calls WHERE episode_id = ? AND idx = ?", (r[0], r[1])
    ).fetchone()
    return r[0], r[1], r[2], turn


@pytest.mark.docker
@pytest.mark.slow
def test_a_path_has_one_verdict_per_call_in_the_diff(tui, real_db: Path) -> None:
    conn = open_reader(real_db)
    # validate's moved_input forgery probe: a new file where the moved input belongs, which
    # the integrity check calls fabricated (the oracle stores "created" as permitted too)
    forged = _shared_paths(conn, "created")
    # the blocking_fifo forgery: the pipe replaced (permitted by the fault) by made-up bytes
    piped = _shared_paths(conn, "type_changed")
    conn.close()

    async def oracle_text(app: DepthApp, pilot, episode_id: int, turn: int) -> str:
        app.post_message(OpenEpisode(episode_id, turn=turn))
        await tui.settle(pilot)
        assert isinstance(app.screen, EpisodeScreen) and app.screen.episode_id == episode_id
        return plain(app.screen.query_one("#turn-oracle", Static))

    async def flow(app: DepthApp, pilot) -> None:
        episode_id, call, path, turn = forged
        lines = (await oracle_text(app, pilot, episode_id, turn)).splitlines()
        assert (
            lines[0].startswith(" COLLATERAL  integrity " + path) and f"(call {call})" in lines[0]
        )
        assert "fabricated" in lines[1]
        assert "also created in this call" in lines[2] and "integrity check decides" in lines[2]
        about = [line for line in lines if path in line]
        assert not any("permitted" in line for line in about), about
        await pilot.press("escape")
        await tui.settle(pilot)

        episode_id, call, path, turn = piped
        lines = (await oracle_text(app, pilot, episode_id, turn)).splitlines()
        assert lines[0].startswith(" COLLATERAL  integrity " + path)
        assert "also type_changed: allowed here on its own" in "\n".join(lines)
        assert not any("permitted" in line and path in line for line in lines)
        assert sum(path in line for line in lines) == 1  # one block for the path

    drive(tui, real_db, flow)


def test_a_new_file_flagged_in_a_later_call_is_not_called_permitted() -> None:
    """An empty placeholder made at one call, judged at the next (or the final check): the
    earlier line names the call that flagged the path instead of a 'permitted' badge."""
    path = "/home/user/logs/app.log"
    made = views.OracleEvent(1, 1, path, "created", True, False, None, {"size": 0}, None, "")
    report = views.OracleEvent(
        2, 1, "/home/user/r.txt", "created", True, False, None, None, None, ""
    )
    flagged = views.OracleEvent(
        3, 2, path, "integrity", False, True, None, {"size": 7}, None, "fabricated: other bytes"
    )
    console = Console(width=200, color_system=None, record=True, file=io.StringIO())
    console.print(events_view([made, report, flagged]))
    lines = console.export_text().splitlines()
    assert lines[0].startswith(" COLLATERAL  integrity " + path) and "(call 2)" in lines[0]
    assert "fabricated: other bytes" in lines[1]
    mine = [line for line in lines if path in line]
    assert len(mine) == 2 and "permitted" not in mine[1]
    assert "the integrity check flagged this path at call 2" in mine[1] and "(call 1)" in mine[1]
    assert any(line.startswith(" permitted  created /home/user/r.txt") for line in lines)


# --------------------------------------------------------------------------- snapshot


def test_snapshot_compare_screen(snap_compare, tui, synthetic_db: Path, landmarks) -> None:
    async def run_before(pilot) -> None:
        await tui.settle(pilot)
        pilot.app.post_message(OpenTask(landmarks.ladder_task))
        await tui.settle(pilot)
        await pilot.press("c")
        await tui.settle(pilot)
        await pilot.press("down", "down")  # a row whose runs part on what a command printed
        await tui.settle(pilot)

    assert snap_compare(
        DepthApp(synthetic_db, start_engine=False), terminal_size=tui.size, run_before=run_before
    )


def test_compare_on_the_synthetic_ladder_task_matches_the_store(
    tui, synthetic_db: Path, landmarks
) -> None:
    """The screen's rows are the store query's, on a task with three models (no Docker)."""
    conn = open_reader(synthetic_db)
    sides = compare.sides(conn, landmarks.ladder_task)
    left, right = sides.default_pair()
    c = compare.compare(conn, landmarks.ladder_task, "model", left.name, right.name)
    episode_ids = set(views.task_episode_ids(conn, landmarks.ladder_task))
    conn.close()
    assert len(sides.models) >= 3 and left.runs >= right.runs >= sides.models[2].runs
    assert {r.episode_id for row in c.rows for r in row.left + row.right} <= episode_ids

    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(OpenTask(landmarks.ladder_task))
        await tui.settle(pilot)
        await pilot.press("c")
        await tui.settle(pilot)
        table = app.screen.query_one("#compare-table", DataTable)
        assert [str(table.get_row_at(i)[0]) for i in range(table.row_count)] == [
            r.condition.label(c.several_others) for r in c.rows
        ]
        # the third model instead of the second: the rows follow
        third = sides.models[2].name
        app.screen.query_one("#compare-right", Select).value = third
        assert await tui.until(pilot, lambda: app.screen.right == third)
        await tui.settle(pilot)
        assert third in str(table.ordered_columns[3].label)

    drive(tui, synthetic_db, flow)
