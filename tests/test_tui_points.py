"""What a new user tripped over (issue 29's smaller points), each through Textual's Pilot on a
copy of the synthetic store, with rows added through the store's own writers."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from rich.console import Console
from textual.coordinate import Coordinate
from textual.widgets import Checkbox, DataTable, Select, Static

from depthtui.app import DepthApp
from depthtui.screens.compare import CompareScreen
from depthtui.screens.conversation import ConversationScreen
from depthtui.screens.episode import EpisodeScreen
from depthtui.screens.jobs import JobsScreen
from depthtui.screens.launch import LaunchScreen
from depthtui.screens.tasks import TasksScreen
from depthtui.screens.triage import TriageScreen
from depthtui.widgets.ladder_grid import LadderGridView, cell_text
from depthtui.widgets.messages import Launch, OpenEpisode, OpenTask
from store import episodes as ep
from store import views
from store.db import ENV_VAR, Store, open_reader

pytest_plugins = ["tests.fixtures_tui"]


def drive(tui, db: Path, flow: Callable[[DepthApp, object], Awaitable[None]], size=None) -> None:
    async def main() -> None:
        app = DepthApp(db, poll_seconds=0.1, start_engine=False)
        async with app.run_test(size=size or tui.size) as pilot:
            await tui.settle(pilot)
            await flow(app, pilot)

    asyncio.run(main())


def plain(widget: Static, width: int = 200) -> str:
    console = Console(width=width, color_system=None, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def _unmeasured_task(db: Path) -> tuple[str, str]:
    """A task of the store made to have no depth run yet (its ladder, audit and free runs and
    its estimates deleted), and its hash."""
    with Store(db) as store, store.tx() as conn:
        task_id, task_hash = conn.execute(
            "SELECT id, content_hash FROM tasks WHERE id IN (SELECT task_id FROM episodes "
            "WHERE mode = 'free') ORDER BY id DESC LIMIT 1"
        ).fetchone()
        conn.execute(
            "DELETE FROM episodes WHERE task_id = ? AND mode IN ('ladder', 'audit', 'free')",
            (task_id,),
        )
        conn.execute("DELETE FROM estimates WHERE task_id = ?", (task_id,))
    return task_id, task_hash


def _free_run(store: Store, task_id: str, task_hash: str, model: str, attempt: int) -> int:
    eid = ep.create_episode(
        store, run_key=f"free-{task_id}-{model}-{attempt}", task_id=task_id, task_hash=task_hash,
        mode="free", agent=model, attempt=attempt, prompt_name="general",
    )  # fmt: skip
    ep.record_turn(store, eid, {"idx": 1, "text": "trying"}, [])
    ep.finish_episode(
        store, eid, passed=False, end_reason="no_tool_call", tests_passed=0, tests_total=2,
        reward=0.0, turns=1,
    )  # fmt: skip
    return eid


# --------------------------------------------------------------------------- point 3


def test_a_task_whose_free_runs_all_failed_shows_them_and_why_there_is_no_d(
    tui, synthetic_db: Path
) -> None:
    task_id, task_hash = _unmeasured_task(synthetic_db)
    with Store(synthetic_db) as store:
        runs = [_free_run(store, task_id, task_hash, "m-free", i) for i in range(4)]

    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(OpenTask(task_id))
        await tui.settle(pilot)
        screen = app.screen
        view = screen.query_one(LadderGridView)
        rows = [str(k.value) for k in view.rows]
        assert rows == ["m-free"]
        row = 0
        free_column = [str(c.label) for c in view.ordered_columns].index("free")
        assert view.runs_at(row, free_column) == runs
        assert str(view.get_cell_at(Coordinate(row, free_column))) == "✗✗✗✗"
        notes = plain(screen.query_one("#ladder-notes", Static))
        assert "No depth runs for this task yet" not in notes
        assert "D – for m-free: no uncapped run passed (4 free runs, none passed)" in notes

    drive(tui, synthetic_db, flow)


# --------------------------------------------------------------------------- point 4


def test_a_grid_cell_shows_outcomes_the_legend_has_no_mark_for() -> None:
    # a free run of a broken task (outcome `broken`) once raised KeyError and took the grid down
    assert str(cell_text(["pass", "broken", "error"], implied=False)) == "✓b!"


def test_the_launch_command_names_the_store_given_by_the_global_db_option(
    tui, tui_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`depthtui --db PATH tui` sets $DEPTHTUI_DB for its own process only: the command the form
    shows and stores must still say --db PATH, or pasted into a shell it uses another store."""
    monkeypatch.setenv(ENV_VAR, str(tui_db))
    conn = open_reader(tui_db)
    task = conn.execute("SELECT id FROM tasks ORDER BY id LIMIT 1").fetchone()[0]
    conn.close()

    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(Launch((task,)))
        await tui.settle(pilot)
        form = app.screen
        assert isinstance(form, LaunchScreen)
        shown = str(form.query_one("#cli-preview", Static).render())
        assert shown.endswith(f" --db {tui_db.resolve()} --detach"), shown

    drive(tui, tui_db, flow)


# --------------------------------------------------------------------------- point 5


def test_a_long_verdict_strip_scrolls_and_v_shows_it_whole(
    tui, synthetic_db: Path, landmarks
) -> None:
    """A long assertion took the strip's 8 lines: the fault's "cleared" and the verifier's line
    never showed, and nothing scrolled."""
    episode = landmarks.fault_cleared
    assertion = (
        "E   assert report == expected, " + "x" * 200 + "\nE     where report = " + "y" * 200
    )
    with Store(synthetic_db) as store:
        ep.add_test_results(
            store, episode,
            [{"nodeid": "tests/test_out.py::test_report", "outcome": "failed",
              "message": assertion}],
        )  # fmt: skip

    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(OpenEpisode(episode))
        await tui.settle(pilot)
        screen = app.screen
        box = screen.query_one("#verdict-box")
        strip = plain(screen.query_one("#verdict-strip", Static), width=76)
        assert "first failing test: tests/test_out.py::test_report" in strip
        assert "fault: perm_denied" in strip  # (what the store holds)
        assert box.region.height <= 8 and box.max_scroll_y > 0  # cut, but it scrolls
        assert "fault: perm_denied" not in tui.text(app)
        await pilot.press("v")
        await pilot.pause()
        assert box.max_scroll_y == 0
        assert "fault: perm_denied" in tui.text(app)
        await pilot.press("v")
        await pilot.pause()
        assert box.region.height <= 8

    drive(tui, synthetic_db, flow, size=(80, 30))


# --------------------------------------------------------------------------- point 6


def _notes(app: DepthApp) -> list[str]:
    seen: list[str] = []
    notify = app.notify

    def noted(message, *args, **kwargs):
        seen.append(str(message))
        return notify(message, *args, **kwargs)

    app.notify = noted  # type: ignore[method-assign]
    return seen


def test_help_glossary_keeps_bracketed_words(tui, synthetic_db: Path) -> None:
    async def flow(app: DepthApp, pilot) -> None:
        await pilot.press("question_mark")
        await pilot.pause()
        glossary = plain(app.screen.query_one("#help-glossary", Static))
        assert "0.5·[all tests pass]" in glossary

    drive(tui, synthetic_db, flow)


def test_j_to_the_job_and_esc_back_to_the_replay(tui, synthetic_db: Path) -> None:
    conn = open_reader(synthetic_db)
    episode, job = conn.execute(
        "SELECT id, job_id FROM episodes WHERE job_id IS NOT NULL ORDER BY id LIMIT 1"
    ).fetchone()
    conn.close()

    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(OpenEpisode(episode))
        await tui.settle(pilot)
        replay = app.screen
        assert isinstance(replay, EpisodeScreen)
        await pilot.press("J")
        await tui.settle(pilot)
        assert isinstance(app.screen, JobsScreen)
        assert await tui.until(pilot, lambda: app.screen._current() is not None)
        assert app.screen._current().id == job
        await pilot.press("escape")
        await tui.settle(pilot)
        assert app.screen is replay and replay.episode_id == episode

    drive(tui, synthetic_db, flow)


def test_episode_header_names_the_prompt_arm_and_no_reward_for_an_infra_error(
    tui, synthetic_db: Path, landmarks
) -> None:
    conn = open_reader(synthetic_db)
    armed, arm = conn.execute(
        "SELECT id, prompt_name FROM episodes WHERE prompt_name != '' ORDER BY id LIMIT 1"
    ).fetchone()
    assert views.episode(conn, landmarks.error).outcome_class == "infra_error"
    conn.close()

    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(OpenEpisode(landmarks.error))
        await tui.settle(pilot)
        head = plain(app.screen.query_one("#episode-head", Static))
        strip = plain(app.screen.query_one("#verdict-strip", Static))
        assert "reward —" in head and "reward +" not in head and "reward -" not in head
        assert "reward —" in strip and "reward +" not in strip
        await pilot.press("escape")
        app.post_message(OpenEpisode(armed))
        await tui.settle(pilot)
        head = plain(app.screen.query_one("#episode-head", Static))
        assert f"prompt {arm}" in head

    drive(tui, synthetic_db, flow)


def test_a_running_episode_says_its_segments_are_not_graded_yet(tui, synthetic_db: Path) -> None:
    conn = open_reader(synthetic_db)
    task_id, task_hash = conn.execute("SELECT id, content_hash FROM tasks LIMIT 1").fetchone()
    conn.close()
    with Store(synthetic_db) as store:
        running = ep.create_episode(
            store, run_key="running-now", task_id=task_id, task_hash=task_hash, mode="free",
            agent="m-live", segments_total=2,
        )  # fmt: skip
        ep.add_segment_run(store, running, 0, "do the first part")
        ep.record_turn(store, running, {"idx": 1, "text": "working on it"}, [])

    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(OpenEpisode(running))
        await tui.settle(pilot)
        strip = plain(app.screen.query_one("#verdict-strip", Static))
        assert strip.startswith(" RUNNING")
        assert "not graded yet (the episode is running)" in strip
        assert "an earlier segment failed" not in strip

    drive(tui, synthetic_db, flow)


def test_the_conversation_names_the_closing_reply_as_the_replay_does(
    tui, synthetic_db: Path
) -> None:
    conn = open_reader(synthetic_db)
    task_id, task_hash = conn.execute("SELECT id, content_hash FROM tasks LIMIT 1").fetchone()
    conn.close()
    with Store(synthetic_db) as store:
        eid = ep.create_episode(
            store, run_key="closing", task_id=task_id, task_hash=task_hash, mode="free",
            agent="m-close",
        )  # fmt: skip
        ep.record_turn(store, eid, {"idx": 1, "text": "ls"}, [
            {"idx": 1, "command": "ls", "exit_code": 0, "observation": "a"}
        ])  # fmt: skip
        ep.record_turn(store, eid, {"idx": 2, "text": "All done.", "counted": False}, [])
        ep.finish_episode(store, eid, passed=True, end_reason="no_tool_call", reward=1.0)

    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(OpenEpisode(eid))
        await tui.settle(pilot)
        await pilot.press("c")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ConversationScreen)
        whats = [m.what for m in screen.messages if m.role == "assistant"]
        assert whats == ["turn 1", "closing reply (not a turn)"]

    drive(tui, synthetic_db, flow)


def test_a_note_on_an_unlabelled_episode_says_the_label_it_gets(tui, synthetic_db: Path) -> None:
    async def flow(app: DepthApp, pilot) -> None:
        notes = _notes(app)
        await pilot.press("3")
        await tui.settle(pilot)
        screen = app.screen
        assert isinstance(screen, TriageScreen)
        item = screen._current()
        assert item is not None and not item.label
        await pilot.press("e")
        await pilot.pause()
        await pilot.press(*"odd", "enter")
        await pilot.pause()
        assert any(
            f"episode {item.episode_id} is labelled 'needs a look' until you label it" in n
            for n in notes
        ), notes

    drive(tui, synthetic_db, flow)


def test_sorting_by_d_puts_unmeasured_tasks_last_both_ways(tui, synthetic_db: Path) -> None:
    async def flow(app: DepthApp, pilot) -> None:
        await pilot.press("2")
        await tui.settle(pilot)
        screen = app.screen
        assert isinstance(screen, TasksScreen)
        d_of = {r.id: r.d for r in screen._rows}
        assert None in d_of.values() and any(v is not None for v in d_of.values())
        for reverse in (False, True):
            screen.sort_key, screen.reverse = "d", reverse
            screen._rebuild()
            await pilot.pause()
            shown = [d_of[i] for i in screen.visible_ids()]
            known = [d for d in shown if d is not None]
            assert shown == known + [None] * (len(shown) - len(known)), (reverse, shown)
            assert known == sorted(known, reverse=reverse)

    drive(tui, synthetic_db, flow)


def test_submit_is_in_view_at_100_by_30(tui, tui_db: Path) -> None:
    conn = open_reader(tui_db)
    task = conn.execute("SELECT id FROM tasks ORDER BY id LIMIT 1").fetchone()[0]
    conn.close()

    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(Launch((task,)))
        await tui.settle(pilot)
        form = app.screen
        assert isinstance(form, LaunchScreen)
        form.query_one("#mode", Select).value = "episodes"  # the longest form
        await pilot.pause()
        submit = form.query_one("#submit")
        region = submit.region
        assert region.height >= 1 and region.bottom <= 30 and region.right <= 100, region
        assert "Submit job" in tui.text(app)

    drive(tui, tui_db, flow, size=(100, 30))


def test_compare_keeps_fault_bench_clean_runs_apart_from_free_runs(tui, synthetic_db: Path) -> None:
    conn = open_reader(synthetic_db)
    task, model, budget = conn.execute(
        "SELECT b.task_id, b.agent, b.budget FROM episodes b JOIN episodes f ON "
        "f.task_id = b.task_id AND f.agent = b.agent AND f.budget = b.budget "
        "AND f.mode = 'free' AND f.cap IS NULL AND f.fault_family = 'clean' "
        "WHERE b.mode = 'episodes' AND b.fault_family = 'clean' AND b.cap IS NULL LIMIT 1"
    ).fetchone()
    modes = dict(
        conn.execute("SELECT id, mode FROM episodes WHERE task_id = ?", (task,)).fetchall()
    )
    conn.close()

    async def flow(app: DepthApp, pilot) -> None:
        app.push_screen(CompareScreen(task))
        await tui.settle(pilot)
        screen = app.screen
        if model not in (screen.left, screen.right):
            screen.query_one("#compare-left", Select).value = model
            assert await tui.until(pilot, lambda: screen.left == model)
            await tui.settle(pilot)
        side = 0 if screen.left == model else 1
        c = screen.comparison
        rows = {r.condition.label(c.several_others): r for r in c.rows}
        other = f" · {c.rows[0].condition.other}" if c.several_others else ""
        free = rows[f"uncapped · budget {budget}{other}"]
        bench = rows[f"uncapped · budget {budget} · clean (fault bench){other}"]
        free_runs = free.left if side == 0 else free.right
        bench_runs = bench.left if side == 0 else bench.right
        assert free_runs and {modes[r.episode_id] for r in free_runs} == {"free"}
        assert bench_runs and {modes[r.episode_id] for r in bench_runs} == {"episodes"}
        table = screen.query_one("#compare-table", DataTable)
        labels = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert f"uncapped · budget {budget} · clean (fault bench){other}" in labels

    drive(tui, synthetic_db, flow)


def test_a_new_label_and_note_are_shown_whole_in_triage(tui, synthetic_db: Path) -> None:
    async def flow(app: DepthApp, pilot) -> None:
        await pilot.press("3")
        await tui.settle(pilot)
        screen = app.screen
        assert isinstance(screen, TriageScreen)
        item = screen._current()
        assert item is not None and not item.label
        await pilot.press("e")
        await pilot.pause()
        await pilot.press(*"deleted the report", "enter")
        await pilot.pause()
        await pilot.press("up")  # (labelling moves the cursor on)
        await pilot.pause()
        line = next(
            line
            for line in tui.text(app).splitlines()
            if line.lstrip().startswith(str(item.episode_id))
        )
        assert "needs a look" in line and "deleted the report" in line, line

    drive(tui, synthetic_db, flow, size=(160, 45))


def test_turn_labels_use_a_wide_terminal(tui, synthetic_db: Path) -> None:
    conn = open_reader(synthetic_db)
    episode, idx, text = conn.execute(
        "SELECT episode_id, idx, text FROM turns WHERE length(text) > 60 "
        "AND text NOT LIKE '%' || char(27) || '%' ORDER BY episode_id, idx LIMIT 1"
    ).fetchone()
    conn.close()
    words = " ".join(text.split())[:55]

    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(OpenEpisode(episode))
        await tui.settle(pilot)
        table = app.screen.query_one("#turn-list", DataTable)
        label = str(table.get_cell_at(Coordinate(idx - 1, 0)))
        assert words in label, (label, words)
        assert words in tui.text(app)

    drive(tui, synthetic_db, flow, size=(220, 60))


def test_the_launch_form_checkboxes_say_on_or_off(tui, tui_db: Path) -> None:
    conn = open_reader(tui_db)
    task = conn.execute("SELECT id FROM tasks ORDER BY id LIMIT 1").fetchone()[0]
    conn.close()

    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(Launch((task,)))
        await tui.settle(pilot)
        form = app.screen
        box = form.query_one("#retry-errors", Checkbox)
        assert str(box.label) == "--retry-errors (off)"
        box.value = True
        await pilot.pause()
        assert str(box.label) == "--retry-errors (on)"
        assert "--retry-errors (on)" in tui.text(app)
        assert "--retry-errors" in str(form.query_one("#cli-preview", Static).render())

    drive(tui, tui_db, flow)
