"""The launch form is the command line: the job it stores is the one its equivalent command stores
when run in a shell, and both refuse the same bad parameters before anything is stored."""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import sys
from pathlib import Path

from textual.widgets import Input, Select, SelectionList

from depthtui.app import DepthApp
from depthtui.screens.jobs import JobsScreen
from depthtui.screens.launch import LaunchScreen
from depthtui.widgets.messages import Launch
from engine.jobs.params import (
    PARAMS,
    EpisodesParams,
    FreeParams,
    InvalidParams,
    LadderParams,
    ReplayParams,
    read_params,
)
from store import jobs
from store.db import Store, open_reader

pytest_plugins = ["tests.fixtures_tui"]

ROOT = Path(__file__).resolve().parents[1]
MODELS = """
[models.alpha]
base_url = "http://127.0.0.1:9/v1"
model = "alpha"

[models.beta]
base_url = "http://127.0.0.1:9/v1"
model = "beta"
"""


def _shell(command: str, cwd: Path) -> subprocess.CompletedProcess:
    """A command line run as a user runs it: split by the shell's rules, in a child process."""
    argv = shlex.split(command)
    assert argv[0] == "depthtui"
    env = {k: v for k, v in os.environ.items() if k not in ("DEPTHTUI_DB", "DEPTHTUI_MODELS")}
    env["PYTHONPATH"] = str(ROOT)
    env["COLUMNS"] = "200"
    return subprocess.run(
        [sys.executable, "-m", "depthtui", *argv[1:]],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def _first_task(db: Path) -> str:
    conn = open_reader(db)
    try:
        return conn.execute("SELECT id FROM tasks ORDER BY id LIMIT 1").fetchone()[0]
    finally:
        conn.close()


def test_a_job_from_the_form_equals_the_job_its_command_stores(
    tui, tui_db: Path, tmp_path: Path
) -> None:
    models_file = tmp_path / "models.toml"
    models_file.write_text(MODELS)
    stop = tmp_path / "stop"
    stop.touch()  # the shell's run stops before any episode: only what it stores matters
    task = _first_task(tui_db)
    shown: dict[str, str] = {}

    async def main() -> None:
        app = DepthApp(tui_db, poll_seconds=0.1, start_engine=False)
        async with app.run_test(size=tui.size) as pilot:
            await tui.settle(pilot)
            app.post_message(Launch((task,)))
            await pilot.pause()
            form = app.screen
            assert isinstance(form, LaunchScreen)
            form.query_one("#mode", Select).value = "episodes"
            await pilot.pause()
            form.query_one("#models-file", Input).value = str(models_file)
            await pilot.pause()
            form.query_one("#models", SelectionList).select("beta")
            faults = form.query_one("#faults", SelectionList)
            faults.select("perm_denied")
            form.query_one("#budget", Input).value = "5"
            form.query_one("#prompt", Input).value = "general, budget"
            form.query_one("#planted", Select).value = "sibling"
            form.query_one("#stop-file", Input).value = str(stop)
            await pilot.pause()
            assert str(form.query_one("#launch-problems").render()) == ""
            shown["cli"] = str(form.query_one("#cli-preview").render())
            await pilot.press("ctrl+s")
            await tui.settle(pilot)
            assert isinstance(app.screen, JobsScreen)

    asyncio.run(main())
    with Store(tui_db) as store:
        from_form = jobs.list_jobs(store)[0]
    command = shown["cli"]
    assert command.endswith(" --detach") and f"--db {tui_db}" in command
    assert f"--models {models_file}" in command
    # the same command in a shell, from another directory, run in the foreground
    run = _shell(command.removesuffix(" --detach"), cwd=tmp_path)
    with Store(tui_db) as store:
        from_shell = jobs.list_jobs(store)[0]
    assert from_shell.id == from_form.id + 1, run.stderr
    assert from_shell.kind == from_form.kind == "episodes"
    assert from_shell.params == from_form.params
    assert read_params("episodes", from_form.params) == EpisodesParams(
        tasks=(task,),
        models=("beta",),
        faults=("clean", "perm_denied"),
        budget=5,
        prompts=("general", "budget"),
        planted="sibling",
        stop_file=str(stop),
        models_file=str(models_file),
    )
    assert from_shell.cli == command.removesuffix(" --detach")
    assert "stop file" in (from_shell.message or "")  # it stopped before running anything


def test_an_unknown_model_is_refused_before_a_job_is_stored(tui_db: Path, tmp_path: Path) -> None:
    models_file = tmp_path / "models.toml"
    models_file.write_text(MODELS)
    task = _first_task(tui_db)
    with Store(tui_db) as store:
        before = len(jobs.list_jobs(store))
    run = _shell(
        f"depthtui free {task} --model model-zzz --models {models_file} --db {tui_db}", tmp_path
    )
    assert run.returncode == 1
    assert "--model: unknown model or agent 'model-zzz'" in run.stderr
    assert "known: oracle, nop, replay, alpha, beta" in " ".join(run.stderr.split())
    with Store(tui_db) as store:
        assert len(jobs.list_jobs(store)) == before  # nothing stored
    # the type says the same before anything is stored, whoever built it
    params = FreeParams(tasks=(task,), models=("model-zzz",), models_file=str(models_file))
    try:
        params.check()
    except InvalidParams as exc:
        assert exc.problems[0].startswith("--model: unknown model or agent 'model-zzz'")
    else:
        raise AssertionError("an unknown model passed the check")


def test_each_kind_reads_back_as_its_type_and_renders_its_command(tmp_path: Path) -> None:
    for kind, cls in PARAMS.items():
        params = cls(tasks=("demo/a",)) if kind != "replay" else ReplayParams(episodes=(4, 2))
        assert read_params(kind, params.to_json()) == params
        assert params.cli().startswith(f"depthtui {kind} ")
    ladder = LadderParams(
        tasks=("demo/a", "demo/b c"), models=("m1", "m2"), caps=(1, 3), fault="moved_input"
    )
    db = tmp_path / "other.db"
    assert ladder.cli(db) == (
        "depthtui ladder demo/a 'demo/b c' --model m1 --model m2 --cap 1 --cap 3 "
        f"--prompt general --fault moved_input --workers 1 --db {db}"
    )  # the default search is left out: the command stays one this CLI accepts
    assert "--search bisect" in LadderParams(tasks=("t",), search="bisect").cli()
    bad = EpisodesParams(
        tasks=(), models=(), faults=("dirty",), attempts=0, planted="nowhere", workers=0
    )
    problems = bad.problems()
    for expected in (
        "tasks: the job names no task",
        "--workers: expected at least 1, got 0",
        "--model: episodes needs at least one model from the registry",
        "--attempts: expected at least 1, got 0",
        "--planted 'nowhere': expected full or sibling",
    ):
        assert expected in problems
    assert any(p.startswith("--faults: unknown fault selection 'dirty'") for p in problems)
    # stored jobs from an older version keep reading: unknown keys are left out
    assert read_params("check", {"tasks": ["x"], "legacy": 1}).tasks == ("x",)
