"""Each screen's main flow, driven through Textual's Pilot on a real SQLite file.

The store is `tui_db` (tests/fixtures_tui.py): the synthetic store, or a copy of any store named
by $DEPTHTUI_TUI_STORE. The tests find what they need through the store's own queries, so they
hold on either.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable
from pathlib import Path

from rich.console import Console
from textual.coordinate import Coordinate
from textual.widgets import Collapsible, DataTable, Input, Select, SelectionList, Static

from depthtui.app import DepthApp
from depthtui.screens.dashboard import DashboardScreen
from depthtui.screens.episode import EpisodeScreen
from depthtui.screens.figures import load_task_lines
from depthtui.screens.help import HelpScreen
from depthtui.screens.jobs import JobsScreen
from depthtui.screens.launch import LaunchScreen
from depthtui.screens.output import OutputScreen
from depthtui.screens.reports import ReportsScreen
from depthtui.screens.search import SearchScreen, find
from depthtui.screens.task_detail import TaskDetailScreen
from depthtui.screens.tasks import TasksScreen
from depthtui.screens.triage import TriageScreen
from depthtui.widgets.ladder_grid import LadderGridView
from depthtui.widgets.messages import OpenEpisode, OpenTask
from depthtui.widgets.plot import depth_points
from depthtui.widgets.turn_view import TurnView
from engine.analysis.report import build_report
from engine.jobs.params import LadderParams, read_params
from store import jobs, queue, triage, views
from store.db import Store, open_reader

pytest_plugins = ["tests.fixtures_tui"]


def drive(tui, db: Path, flow: Callable[[DepthApp, object], Awaitable[None]]) -> None:
    """Run `flow(app, pilot)` against a fresh app on `db`, polling the store every 0.1 s."""

    async def main() -> None:
        app = DepthApp(db, poll_seconds=0.1, start_engine=False)
        async with app.run_test(size=tui.size) as pilot:
            await tui.settle(pilot)
            await flow(app, pilot)

    asyncio.run(main())


def reader(db: Path):
    return open_reader(db)


async def type_into(pilot, widget: Input, text: str) -> None:
    widget.focus()
    await pilot.pause()
    widget.value = ""
    await pilot.press(*[{" ": "space"}.get(ch, ch) for ch in text])


# --------------------------------------------------------------------------- dashboard


def test_dashboard_shows_datasets_figures_and_active_jobs(tui, tui_db: Path) -> None:
    conn = reader(tui_db)
    datasets = views.datasets(conn)
    active = jobs.list_jobs(conn, active_only=True)
    report = build_report(conn)

    async def flow(app: DepthApp, pilot) -> None:
        assert isinstance(app.screen, DashboardScreen)
        table = app.screen.query_one("#datasets", DataTable)
        assert [str(k.value) for k in table.rows] == [d.dataset for d in datasets]
        text = tui.text(app)
        assert f"{len(report['tasks']):,}" in text and "median D" in text
        assert "safe success" in text.lower()
        for m in report["models"]:
            assert m["model"] in text
        running = app.screen.query_one("#running-jobs", DataTable)
        assert {str(k.value) for k in running.rows} == ({str(j.id) for j in active} or {"none"})
        # enter on a dataset shows its tasks
        table.focus()
        table.move_cursor(row=len(datasets) - 1)
        await pilot.press("enter")
        await tui.settle(pilot)
        assert isinstance(app.screen, TasksScreen)
        wanted = datasets[-1].dataset
        assert await tui.until(
            pilot, lambda: app.screen.query_one("#dataset-select", Select).value == wanted
        )
        await tui.settle(pilot)
        ids = app.screen.visible_ids()
        assert ids and all(
            i in {r.id for r in load_task_lines(conn) if r.dataset == wanted} for i in ids
        )

    drive(tui, tui_db, flow)


# --------------------------------------------------------------------------- tasks


def test_tasks_filter_sort_and_open(tui, tui_db: Path) -> None:
    conn = reader(tui_db)
    rows = load_task_lines(conn)
    shallow = sorted(r.id for r in rows if r.d is not None and r.d <= 3)

    async def flow(app: DepthApp, pilot) -> None:
        await pilot.press("2")
        await tui.settle(pilot)
        screen = app.screen
        assert isinstance(screen, TasksScreen)
        assert sorted(screen.visible_ids()) == sorted(r.id for r in rows)
        await type_into(pilot, screen.query_one("#task-filter", Input), "d<=3")
        await pilot.pause()
        assert sorted(screen.visible_ids()) == shallow
        # a malformed filter says what is wrong and keeps the last good list
        await type_into(pilot, screen.query_one("#task-filter", Input), "w>lots")
        await pilot.pause()
        assert "filter 'w>lots': expected a whole number after 'w>'" in tui.text(app)
        await type_into(pilot, screen.query_one("#task-filter", Input), "")
        await pilot.pause()
        # sort by W, largest first
        table = screen.query_one("#tasks", DataTable)
        table.focus()
        screen.sort_key, screen.reverse = "work", True
        screen._rebuild()
        await pilot.pause()
        works = [r.work or 0 for r in sorted(rows, key=lambda r: r.id)]
        shown = [next(r.work or 0 for r in rows if r.id == i) for i in screen.visible_ids()]
        assert shown == sorted(works, reverse=True)
        table.move_cursor(row=0)
        await pilot.press("j", "j", "k")  # vi keys move the cursor too
        assert table.cursor_row == 1
        table.move_cursor(row=0)
        await pilot.press("enter")
        await tui.settle(pilot)
        assert isinstance(app.screen, TaskDetailScreen)
        assert app.screen.task_id == screen.visible_ids()[0]
        await pilot.press("escape")
        assert app.screen is screen

    drive(tui, tui_db, flow)


# --------------------------------------------------------------------------- task detail


def _ladder_task(conn) -> tuple[str, views.LadderGrid]:
    for row in load_task_lines(conn):
        grid = views.ladder(conn, row.id)
        if any(cap is not None for (_m, cap) in grid.cells):
            return row.id, grid
    raise AssertionError("the store holds no ladder run")


def test_task_detail_ladder_grid_opens_the_cell_run(tui, tui_db: Path) -> None:
    conn = reader(tui_db)
    task_id, grid = _ladder_task(conn)
    detail = views.task_detail(conn, task_id)

    async def flow(app: DepthApp, pilot) -> None:
        await pilot.press("2")
        await tui.settle(pilot)
        await type_into(pilot, app.screen.query_one("#task-filter", Input), task_id)
        app.screen.query_one("#tasks", DataTable).focus()
        await pilot.press("enter")
        await tui.settle(pilot)
        screen = app.screen
        assert isinstance(screen, TaskDetailScreen)
        view = screen.query_one(LadderGridView)
        assert [str(k.value) for k in view.rows] == list(grid.models)
        header = [str(c.label) for c in view.ordered_columns]
        assert header == ["model", "1", "2", "3", "5", "10", "20", "40", "80", "free", "D"]
        text = tui.text(app)
        assert task_id in text and f"W {detail.work}" in text
        # move to a capped cell with runs and press enter: its latest run opens
        target = next(
            (r, c)
            for r in range(len(grid.models))
            for c in range(1, len(grid.caps))
            if view.runs_at(r, c)
        )
        episode_id = view.runs_at(*target)[-1]
        view.focus()
        view.move_cursor(row=target[0], column=target[1])
        await pilot.press("enter")
        await tui.settle(pilot)
        assert isinstance(app.screen, EpisodeScreen)
        assert app.screen.episode_id == episode_id
        await pilot.press("escape")
        assert app.screen is screen
        # ] walks the other tabs, which render the task's own files (setting `active` from
        # outside does not switch: the focus left in the ladder tab switches it straight back)
        for tab in ("tab-instruction", "tab-solution", "tab-tests", "tab-contract"):
            await pilot.press("right_square_bracket")
            assert screen.query_one("#task-tabs").active == tab
        console = Console(width=120, file=io.StringIO(), record=True)
        console.print(screen.query_one("#solution", Static).content)
        heading = "solve.sh" if len(detail.segments) == 1 else "segment 1: "
        assert heading in console.export_text()

    drive(tui, tui_db, flow)


def test_the_grid_shows_free_runs_explains_its_marks_and_a_cell_opens_its_runs(
    tui, synthetic_db: Path, landmarks
) -> None:
    task_id = landmarks.ladder_task
    conn = reader(synthetic_db)
    grid = views.ladder(conn, task_id)
    first = grid.models[0]
    # the README's order: `free` made uncapped runs, then `ladder` reused them
    free_ids = [
        r[0]
        for r in conn.execute(
            "SELECT id FROM episodes WHERE task_id = ? AND mode = 'free' AND cap IS NULL "
            "AND agent = ? ORDER BY id",
            (task_id, first),
        )
    ]
    assert free_ids
    uncapped = [run.episode_id for run in grid.cells[(first, None)]]
    assert set(free_ids) <= set(uncapped) and uncapped == sorted(uncapped)

    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(OpenTask(task_id))
        await tui.settle(pilot)
        screen = app.screen
        view = screen.query_one(LadderGridView)
        free_column = len(grid.caps)  # model, the caps, then free
        assert len(str(view.get_cell_at(Coordinate(0, free_column)))) == len(uncapped)
        notes = str(screen.query_one("#ladder-notes", Static).render())
        later = grid.models[1]
        best = grid.estimates[first].estimate
        assert f"{later}: · at cap {best} and above means not tried" in notes
        # a cell opens its latest run; H/L walk that cell's runs only
        view.focus()
        view.move_cursor(row=0, column=free_column)
        await pilot.press("enter")
        await tui.settle(pilot)
        replay = app.screen
        assert isinstance(replay, EpisodeScreen)
        assert replay.episode_id == uncapped[-1] and replay.context == tuple(uncapped)
        await pilot.press("escape")
        await tui.settle(pilot)
        # a reload updates the rows in place: never emptied, never relabelled
        keys = [str(k.value) for k in view.rows]
        cleared: list[bool] = []
        empty_table = view.clear
        view.clear = lambda columns=False: (cleared.append(columns), empty_table(columns))[1]
        with Store(synthetic_db) as store:  # another connection commits: the grid reloads
            triage.set_label(store, uncapped[-1], triage.QUEUES[0], "needs_look")
        assert await tui.until(pilot, lambda: screen.loaded_version == app.version > 0)
        await pilot.pause(0.3)  # (exclusive loads cancel each other: no settle on workers)
        assert [str(k.value) for k in view.rows] == keys == list(grid.models)
        assert cleared == []  # (the grid once rebuilt itself: a moment with no rows, "model")

    drive(tui, synthetic_db, flow)


# --------------------------------------------------------------------------- episode replay


def test_replay_steps_through_turns_episodes_output_and_verdict(tui, tui_db: Path) -> None:
    conn = reader(tui_db)
    longest = views.find_episodes(conn, min_turns=3, limit=1)[0]
    info = views.episode(conn, longest)
    siblings = views.task_episode_ids(conn, info.task_id)

    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(OpenEpisode(longest))
        await tui.settle(pilot)
        screen = app.screen
        assert isinstance(screen, EpisodeScreen) and screen.turn == 1
        turns = screen.query_one("#turn-list", DataTable)
        assert turns.row_count == info.turns
        await pilot.press("l", "l")
        assert screen.turn == 3 and turns.cursor_row == 2
        await pilot.press("h")
        assert screen.turn == 2
        await pilot.press("G")
        assert screen.turn == info.turns
        assert screen.query_one("#turn-verdict").display  # the verdict closes the last turn
        text = tui.text(app)
        assert "Verdict" in text or screen.query_one(TurnView).max_scroll_y > 0
        view = screen.query_one(TurnView)
        before = view.scroll_y
        await pilot.press("j", "j")
        assert view.scroll_y >= before
        await pilot.press("g")
        assert screen.turn == 1
        # reasoning is folded until asked for
        reasoning = screen.query_one("#reasoning", Collapsible)
        assert reasoning.collapsed
        await pilot.press("r")
        assert not reasoning.collapsed
        words = screen.detail.reasoning.split("\n", 1)[0][:15]
        assert words in tui.text(app)  # drawn once opened
        # o opens the full output of the selected call, esc comes back
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, OutputScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen and screen.turn == 1
        # the mouse: a click on a turn in the list shows that turn
        await pilot.click("#turn-list", offset=(8, 2))
        await pilot.pause()
        assert screen.turn == 3
        await pilot.press("g")
        # H/L walk the task's other episodes
        position = siblings.index(longest)
        await pilot.press("L" if position + 1 < len(siblings) else "H")
        expected = (
            siblings[position + 1] if position + 1 < len(siblings) else siblings[position - 1]
        )
        assert screen.episode_id == expected and screen.turn == 1
        # clicking a turn in the list shows it
        other = views.episode(conn, expected)
        if other.turns >= 2:
            turns = screen.query_one("#turn-list", DataTable)
            turns.move_cursor(row=1)
            await pilot.pause()
            assert screen.turn == 2

    drive(tui, tui_db, flow)


def test_a_kept_episode_screen_shows_the_next_episode_from_its_start(tui, tui_db: Path) -> None:
    conn = reader(tui_db)
    first, second = views.find_episodes(conn, min_turns=3, limit=2)
    infos = {e: views.episode(conn, e) for e in (first, second)}

    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(OpenEpisode(first))
        await tui.settle(pilot)
        screen = app.screen
        assert isinstance(screen, EpisodeScreen)
        await pilot.press("G")
        assert screen.turn == infos[first].turns
        await pilot.press("escape")
        await tui.settle(pilot)
        assert not isinstance(app.screen, EpisodeScreen)
        # the same screen object comes back, pointed at the other episode, at its first turn
        app.post_message(OpenEpisode(second))
        await tui.settle(pilot)
        assert app.screen is screen and screen.episode_id == second and screen.turn == 1
        assert screen.query_one("#turn-list", DataTable).row_count == infos[second].turns
        assert screen.query_one("#turn-list", DataTable).cursor_row == 0
        assert f"Episode {second}" in tui.text(app)
        await pilot.press("escape")
        await tui.settle(pilot)
        app.post_message(OpenEpisode(first, turn=2))
        await tui.settle(pilot)
        assert app.screen is screen and screen.episode_id == first and screen.turn == 2
        assert screen.query_one("#turn-list", DataTable).row_count == infos[first].turns

    drive(tui, tui_db, flow)


def test_replay_marks_collateral_and_shows_the_oracle_diff(tui, tui_db: Path) -> None:
    conn = reader(tui_db)
    item = triage.queue_items(conn, "collateral")[0]
    marks = views.turn_marks(conn, item.episode_id)
    turn = next((m.idx for m in marks if m.collateral), None)
    events = views.turn_detail(conn, item.episode_id, turn).events if turn else ()
    event = next((e for e in events if e.collateral), None)

    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(OpenEpisode(item.episode_id))
        await tui.settle(pilot)
        screen = app.screen
        row = screen.query_one("#turn-list", DataTable).get_row_at(turn - 1)
        assert "■" in str(row[0])
        screen.show_turn(turn)
        await pilot.pause()
        text = tui.text(app)
        assert "COLLATERAL" in text and event.kind in text
        assert event.path.rsplit("/", 1)[-1][:20] in text

    if turn is not None and event is not None:
        drive(tui, tui_db, flow)
    else:  # a store whose collateral latched only at the final check
        assert views.episode(conn, item.episode_id).collateral


# --------------------------------------------------------------------------- search


def test_search_finds_a_command_and_opens_its_turn(tui, tui_db: Path) -> None:
    conn = reader(tui_db)
    episode_id = views.find_episodes(conn, min_turns=2, limit=1)[0]
    command = views.turn_detail(conn, episode_id, 1).calls[0].command
    word = next(w for w in command.split() if w.isalnum())
    hits = find(conn, word)

    async def flow(app: DepthApp, pilot) -> None:
        await pilot.press("slash")
        await tui.settle(pilot)
        screen = app.screen
        assert isinstance(screen, SearchScreen)
        # metacharacters and FTS operators are searched for, never parsed
        await type_into(pilot, screen.query_one("#search-input", Input), '"rm -rf" OR (')
        await pilot.press("enter")
        await tui.settle(pilot)
        assert "hits" in tui.text(app)
        await type_into(pilot, screen.query_one("#search-input", Input), word)
        await pilot.press("enter")
        await tui.settle(pilot)
        table = screen.query_one("#hits", DataTable)
        assert table.row_count == len(hits) > 0
        await pilot.press("enter")
        await tui.settle(pilot)
        replay = app.screen
        assert isinstance(replay, EpisodeScreen)
        first = screen.hits[0]
        assert (replay.episode_id, replay.turn) == (first.episode_id, first.turn_idx)
        assert await tui.until(pilot, lambda: bool(replay.hits))
        assert first.turn_idx in replay.hits
        more = [h for h in replay.hits if h > replay.turn]
        await pilot.press("n")
        assert replay.turn == (more[0] if more else first.turn_idx)
        if more:
            await pilot.press("N")
            assert replay.turn == first.turn_idx

    drive(tui, tui_db, flow)


# --------------------------------------------------------------------------- triage


def test_triage_labels_and_notes_survive_a_restart(tui, tui_db: Path) -> None:
    conn = reader(tui_db)
    collateral = triage.queue_items(conn, "collateral")
    suspects = triage.queue_items(conn, "false_positive")
    conn.close()

    async def label(app: DepthApp, pilot) -> None:
        await pilot.press("3")
        await tui.settle(pilot)
        screen = app.screen
        assert isinstance(screen, TriageScreen)
        table = screen.query_one("#triage", DataTable)
        assert [int(str(k.value)) for k in table.rows] == [i.episode_id for i in collateral]
        table.move_cursor(row=0)
        await pilot.press("r")  # real; the cursor moves on to the next one
        await pilot.press("e")
        await pilot.pause()
        await pilot.press(*"looks", "space", *"fine", "enter")
        await pilot.pause()
        await pilot.press("right_square_bracket")  # the false-positive queue
        await tui.settle(pilot)
        assert screen.queue == "false_positive"
        assert table.row_count == len(suspects)
        table.move_cursor(row=0)
        await pilot.press("p")

    drive(tui, tui_db, label)
    with Store(tui_db) as store:
        labels = {(x.episode_id, x.queue): (x.label, x.note) for x in triage.list_labels(store)}
    expected = {(collateral[0].episode_id, "collateral"): ("real", "")}
    if len(collateral) > 1:
        expected[(collateral[1].episode_id, "collateral")] = ("needs_look", "looks fine")
    else:
        expected[(collateral[0].episode_id, "collateral")] = ("real", "looks fine")
    expected[(suspects[0].episode_id, "false_positive")] = ("false_positive", "")
    assert labels == expected

    async def reopen(app: DepthApp, pilot) -> None:
        await pilot.press("3")
        await tui.settle(pilot)
        table = app.screen.query_one("#triage", DataTable)
        for (episode_id, queue_name), (label, note) in expected.items():
            if queue_name == "collateral":
                cells = table.get_row(str(episode_id))
                assert str(cells[1]) == {"real": "real", "needs_look": "needs a look"}[label]
                assert str(cells[-1]) == note

    drive(tui, tui_db, reopen)


# --------------------------------------------------------------------------- launch and jobs


MODELS_TOML = """
[models."{a}"]
base_url = "http://127.0.0.1:9/v1"
model = "{a}"

[models."{b}"]
base_url = "http://127.0.0.1:9/v1"
model = "{b}"
"""


def test_launch_form_submits_the_job_it_shows(tui, tui_db: Path, tmp_path: Path) -> None:
    conn = reader(tui_db)
    shallow = [r.id for r in load_task_lines(conn) if r.d is not None and r.d <= 3]
    shallow.sort()
    models = [*views.known_models(conn), "model-a", "model-b"][:2]
    models_file = tmp_path / "models.toml"
    models_file.write_text(MODELS_TOML.format(a=models[0], b=models[1]))
    expected = LadderParams(
        tasks=tuple(shallow),
        models=tuple(models),
        caps=(1, 2, 3, 5, 10, 20, 40),
        fault="perm_denied",
        workers=3,
        max_cost=2.5,
        reserve=0.5,
        models_file=str(models_file.resolve()),
    )

    async def flow(app: DepthApp, pilot) -> None:
        await pilot.press("2")
        await tui.settle(pilot)
        await type_into(pilot, app.screen.query_one("#task-filter", Input), "d<=3")
        app.screen.query_one("#tasks", DataTable).focus()
        await pilot.press("r")
        await pilot.pause()
        form = app.screen
        assert isinstance(form, LaunchScreen)
        assert sorted(form.task_ids) == shallow
        form.query_one("#mode", Select).value = "ladder"
        await pilot.pause()
        form.query_one("#models-file", Input).value = str(models_file)
        await pilot.pause()
        choices = form.query_one("#models", SelectionList)
        # models are picked from the registry the job will use, never typed
        offered = [str(choices.get_option_at_index(i).prompt) for i in range(choices.option_count)]
        assert offered == ["oracle", "nop", "replay", *models]
        for m in models:
            choices.select(m)
        form.query_one("#caps", SelectionList).deselect(80)
        form.query_one("#fault", Select).value = "perm_denied"  # recovery depth
        await type_into(pilot, form.query_one("#workers", Input), "3")
        await type_into(pilot, form.query_one("#max-cost", Input), "2.5")
        await type_into(pilot, form.query_one("#reserve", Input), "0.5")
        await pilot.pause()
        preview = str(form.query_one("#cli-preview").render())
        # the parameter type's own rendering, in this store (--db), for the background engine
        assert preview == expected.cli(tui_db) + " --detach"
        assert preview.startswith(f"depthtui ladder {shallow[0]} ")
        for fragment in (
            f"--model {models[0]}", "--cap 1 --cap 2", "--cap 40", "--fault perm_denied",
            "--workers 3", "--max-cost 2.5", "--reserve 0.5", f"--models {models_file.resolve()}",
            f"--db {tui_db}",
        ):  # fmt: skip
            assert fragment in preview
        assert "--cap 80" not in preview and preview.endswith(" --detach")
        # a bad number blocks the submit and says why
        await type_into(pilot, form.query_one("#workers", Input), "0")
        await pilot.pause()
        problems = str(form.query_one("#launch-problems").render())
        assert "--workers: expected a whole number of at least 1, got '0'" in problems
        assert form.query_one("#submit").disabled
        # so does a models file that is not there (nothing can be picked from it)
        form.query_one("#models-file", Input).value = str(tmp_path / "missing.toml")
        await pilot.pause()
        assert "models file not found" in str(form.query_one("#models-note").render())
        assert "--model: ladder needs at least one model" in str(
            form.query_one("#launch-problems").render()
        )
        form.query_one("#models-file", Input).value = str(models_file)
        await pilot.pause()
        for m in models:
            form.query_one("#models", SelectionList).select(m)
        await type_into(pilot, form.query_one("#workers", Input), "3")
        await pilot.press("ctrl+s")
        await tui.settle(pilot)
        assert isinstance(app.screen, JobsScreen)
        await tui.settle(pilot)
        table = app.screen.query_one("#jobs", DataTable)
        newest = max(int(str(k.value)) for k in table.rows)
        # newest first, and the job just submitted is the one selected
        assert table.coordinate_to_cell_key((0, 0)).row_key.value == str(newest)
        assert table.cursor_row == 0

    drive(tui, tui_db, flow)
    with Store(tui_db) as store:
        job = jobs.list_jobs(store)[0]
    assert job.kind == "ladder" and job.status == "queued"
    assert job.params == expected.to_json()
    assert read_params(job.kind, job.params) == expected
    assert job.cli == expected.cli(tui_db) + " --detach"


def test_jobs_screen_cancels_pauses_and_resumes(tui, tui_db: Path) -> None:
    with Store(tui_db) as store:
        queued = jobs.submit_job(store, "check", {"tasks": ["x"]}, "depthtui check x --detach")
        running = jobs.submit_job(store, "free", {"tasks": ["y"]}, "depthtui free y --detach")
        assert queue.claim_job(store, running, "engine-host:42") is not None

    async def flow(app: DepthApp, pilot) -> None:
        await pilot.press("4")
        await tui.settle(pilot)
        screen = app.screen
        table = screen.query_one("#jobs", DataTable)
        table.move_cursor(row=table.get_row_index(str(running)))
        await pilot.press("p")
        assert "(pausing)" in tui.text(app)
        await pilot.press("u")
        await pilot.press("c")
        assert "(cancelling)" in tui.text(app)
        table.move_cursor(row=table.get_row_index(str(queued)))
        await pilot.press("c")
        await pilot.pause()
        assert screen.jobs[str(queued)].status == "cancelled"

    drive(tui, tui_db, flow)
    with Store(tui_db) as store:
        assert jobs.get_job(store, queued).status == "cancelled"
        r = jobs.get_job(store, running)
        assert r.status == "running" and r.cancel_requested and not r.pause_requested


# --------------------------------------------------------------------------- reports, help


def test_reports_draw_the_plots_and_help_lists_the_keys(tui, tui_db: Path) -> None:
    conn = reader(tui_db)
    points = depth_points(build_report(conn))

    async def flow(app: DepthApp, pilot) -> None:
        await pilot.press("5")
        await tui.settle(pilot)
        assert isinstance(app.screen, ReportsScreen)
        text = tui.text(app)
        assert "Depth D against work W" in text and "W (lines, log scale)" in text
        for dataset in {p.dataset for p in points}:
            assert dataset in text
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        text = tui.text(app)
        for term in ("W (work)", "N (turn count)", "D (depth)", "caps", "budget", "safe success"):
            assert term in text  # the glossary
        assert "implied by N" in text  # the grid's marks
        console = Console(width=120, file=io.StringIO(), record=True)
        console.print(app.screen.query_one("#help-keys", Static).content)
        keys = console.export_text()
        assert "Keys here" in keys and "Go to episode #" in keys and "Reports" in keys
        await pilot.press("question_mark")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)

    drive(tui, tui_db, flow)


# --------------------------------------------------------------------------- live updates


def test_live_rows_appear_without_moving_the_selection(tui, tui_db: Path) -> None:
    from devtools import synthetic

    async def flow(app: DepthApp, pilot) -> None:
        await pilot.press("2")
        await tui.settle(pilot)
        table = app.screen.query_one("#tasks", DataTable)
        table.focus()
        table.move_cursor(row=min(3, table.row_count - 1))
        await pilot.pause()
        key, row, scroll = (
            table.coordinate_to_cell_key(table.cursor_coordinate).row_key,
            table.cursor_row,
            table.scroll_y,
        )
        count = table.row_count
        # another connection (an engine, a CLI import) writes new tasks and runs
        with Store(app.db_path) as store:
            spec = synthetic.SyntheticSpec(
                datasets=("live-new",), tasks_per_dataset=2, hostile=False
            )
            synthetic.generate(store, spec)
        assert await tui.until(pilot, lambda: table.row_count == count + 2)
        assert table.coordinate_to_cell_key(table.cursor_coordinate).row_key == key
        assert (table.cursor_row, table.scroll_y) == (row, scroll)
        assert {str(k.value) for k in list(table.rows)[-2:]} == {
            "live-new/log-errors-001",
            "live-new/csv-merge-002",
        }

    drive(tui, tui_db, flow)


def test_live_replay_appends_turns_and_keeps_the_current_one(tui, tui_db: Path) -> None:
    from store import episodes as recorder

    with Store(tui_db) as store:
        task_id = load_task_lines(store.conn)[0].id
        episode_id = recorder.create_episode(
            store, run_key="live-1", task_id=task_id, task_hash="h", mode="free", agent="qwen3-8b"
        )
        for idx in (1, 2):
            call = {"idx": idx, "command": f"echo {idx}", "exit_code": 0}
            turn = {"idx": idx, "text": f"turn {idx}"}
            recorder.record_turn(store, episode_id, turn, [call], {idx: f"{idx}\n".encode()})

    async def flow(app: DepthApp, pilot) -> None:
        app.post_message(OpenEpisode(episode_id))
        await tui.settle(pilot)
        screen = app.screen
        assert "● live" in tui.text(app)
        await pilot.press("l")
        assert screen.turn == 2
        turns = screen.query_one("#turn-list", DataTable)
        await pilot.press("h")
        with Store(app.db_path) as store:
            recorder.record_turn(
                store, episode_id, {"idx": 3, "text": "turn 3"},
                [{"idx": 3, "command": "rm -rf /home/user/x", "exit_code": 1}],
            )  # fmt: skip
        assert await tui.until(pilot, lambda: turns.row_count == 3)
        assert screen.turn == 1 and turns.cursor_row == 0
        with Store(app.db_path) as store:
            recorder.record_turn(store, episode_id, {"idx": 4, "text": "turn 4"}, [])
        assert await tui.until(pilot, lambda: turns.row_count == 4)
        head = screen.query_one("#turn-head", Static)
        # the header of the turn on screen counts the turns recorded since (it once stayed
        # "Turn 1/3" while the user read an earlier turn)
        assert await tui.until(pilot, lambda: str(head.render()).startswith("Turn 1/4"))
        with Store(app.db_path) as store:
            recorder.finish_episode(store, episode_id, passed=0, end_reason="no_tool_call")
        assert await tui.until(pilot, lambda: "● live" not in tui.text(app))
        assert screen.turn == 1

    drive(tui, tui_db, flow)


def test_the_command_palette_offers_the_screen_keys(tui, tui_db: Path) -> None:
    async def flow(app: DepthApp, pilot) -> None:
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {"Dashboard", "Tasks", "Triage", "Jobs", "Reports", "Search", "Quit"} <= titles
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Triage")
        assert await tui.until(pilot, lambda: "Triage" in tui.text(app))
        await pilot.pause(0.3)
        await pilot.press("enter")
        assert await tui.until(pilot, lambda: isinstance(app.screen, TriageScreen))
        replay_keys = {
            c.title for c in app.get_system_commands(EpisodeScreen(1)) if c.help.startswith("key")
        }
        assert {"◀ Turn", "Turn ▶", "Full output", "Reasoning"} <= replay_keys

    drive(tui, tui_db, flow)
