"""`depthtui jobs ...` and `depthtui engine status` on a real store file."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from depthtui.commands import engine as engine_cmd
from depthtui.commands import jobs as jobs_cmd
from engine.jobs.runner import run_job
from store.db import Store
from store.queue import claim_episode, claim_job, register_engine
from tests.fixtures_jobs import resolve, submit


@pytest.fixture
def cli() -> typer.Typer:
    app = typer.Typer()
    engine_cmd.register(app)
    jobs_cmd.register(app)
    return app


def invoke(app: typer.Typer, *args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def flat(text: str) -> str:
    """Text with rich's line wrapping undone (the test terminal is 80 columns)."""
    return " ".join(text.split())


def test_list_and_show_describe_jobs(cli, db_path: Path) -> None:
    with Store(db_path) as store:
        finished = submit(store, {"units": ["a", "b"], "episodes": 2, "cost": 0.5})
        job = claim_job(store, finished, "h:1")
        assert run_job(store, job, "h:1", workers=1, resolve=resolve).status == "done"
        queued = submit(store, {"units": ["c"]})
    db = str(db_path)
    out = invoke(cli, "jobs", "list", "--db", db)
    assert out.exit_code == 0
    assert "queued" in out.stdout and "done" in out.stdout and "$2.0000" in out.stdout
    doc = json.loads(invoke(cli, "jobs", "list", "--json", "--db", db).stdout)
    assert [(j["id"], j["status"]) for j in doc] == [(queued, "queued"), (finished, "done")]
    active = json.loads(invoke(cli, "jobs", "list", "--active", "--json", "--db", db).stdout)
    assert [j["id"] for j in active] == [queued]

    shown = invoke(cli, "jobs", "show", str(finished), "--db", db)
    assert shown.exit_code == 0
    assert "toy a b" in shown.stdout  # the equivalent command
    assert "4 (4 done, 4 passed, 0 with errors, 0 running, 0 interrupted)" in flat(shown.stdout)
    assert '"units": [' in shown.stdout
    doc = json.loads(invoke(cli, "jobs", "show", str(finished), "--json", "--db", db).stdout)
    assert doc["status"] == "done" and doc["progress_done"] == 2 and doc["cost_usd"] == 2.0
    assert doc["episodes"]["done"] == 4 and doc["params"]["units"] == ["a", "b"]

    missing = invoke(cli, "jobs", "show", "99", "--db", db)
    assert missing.exit_code == 1 and "there is no job 99" in flat(missing.stderr)


def test_cancel_pause_resume(cli, db_path: Path) -> None:
    db = str(db_path)
    with Store(db_path) as store:
        job_id = submit(store, {"units": ["a"]})
        running = submit(store, {"units": ["b"]})
        claim_job(store, running, "h:1")
    assert "is now paused" in invoke(cli, "jobs", "pause", str(job_id), "--db", db).stdout
    assert "is now queued" in invoke(cli, "jobs", "resume", str(job_id), "--db", db).stdout
    again = invoke(cli, "jobs", "resume", str(job_id), "--db", db)
    assert again.exit_code == 1 and f"job {job_id} is queued, not paused" in flat(again.stderr)
    assert "is now cancelled" in invoke(cli, "jobs", "cancel", str(job_id), "--db", db).stdout
    twice = invoke(cli, "jobs", "cancel", str(job_id), "--db", db)
    assert twice.exit_code == 1 and "already cancelled" in flat(twice.stderr)
    out = invoke(cli, "jobs", "cancel", str(running), "--db", db)
    assert "cancel requested; its engine stops it within seconds" in flat(out.stdout)
    out = invoke(cli, "jobs", "pause", str(running), "--db", db)
    assert "pause requested" in out.stdout


def test_a_running_job_whose_owner_died_is_flagged(cli, db_path: Path) -> None:
    db = str(db_path)
    with Store(db_path) as store:
        job_id = submit(store, {"units": ["a"]})
        claim_job(store, job_id, "localhost-that-is-not-us:1")
        fields = {"job_id": job_id, "task_id": "a", "task_hash": "h", "mode": "check", "agent": "x"}
        claim_episode(store, "k", "localhost-that-is-not-us:1", fields)
        dead = submit(store, {"units": ["b"]})
        claim_job(store, dead, f"{socket.gethostname()}:999999999")
    doc = json.loads(invoke(cli, "jobs", "show", str(job_id), "--json", "--db", db).stdout)
    # Another host's owner with a fresh heartbeat counts as alive.
    assert doc["owner_alive"] is True and doc["episodes"]["running"] == 1
    doc = json.loads(invoke(cli, "jobs", "show", str(dead), "--json", "--db", db).stdout)
    assert doc["owner_alive"] is False
    shown = invoke(cli, "jobs", "show", str(dead), "--db", db)
    assert "owner dead: the next engine to start takes it over" in flat(shown.stdout)
    listed = json.loads(invoke(cli, "jobs", "list", "--json", "--db", db).stdout)
    assert [j["owner_alive"] for j in listed] == [False, True]


def test_engine_status(cli, db_path: Path) -> None:
    db = str(db_path)
    with Store(db_path) as store:
        submit(store, {"units": ["a"]})
        register_engine(store, f"{socket.gethostname()}:{os.getpid()}", "h", os.getpid(), 2, "x")
        register_engine(store, f"{socket.gethostname()}:999999999", "h", 999999999, 1, "y")
    doc = json.loads(invoke(cli, "engine", "status", "--json", "--db", db).stdout)
    alive = {e["pid"]: e["alive"] for e in doc["engines"]}
    assert alive == {os.getpid(): True, 999999999: False}
    assert doc["jobs"] == {"queued": 1}
    text = invoke(cli, "engine", "status", "--db", db).stdout
    assert str(os.getpid()) in text and "jobs: 1 queued" in flat(text)
    empty = invoke(cli, "engine", "status", "--db", str(db_path.with_name("none.db")))
    assert empty.exit_code == 1 and "no store here yet" in flat(empty.stderr)
