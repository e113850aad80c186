"""`depthtui check` on third-party-shaped tasks (tests/fixtures/realtasks, one folder per shape;
its README says what each holds) through the real CLI, runner, images, containers and verifiers.

One check of the whole tree runs once for the module; each test reads what it says of one task."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from engine.sandbox.images import build_image, remove_task_images
from engine.tasks.loader import load_task, load_tasks
from store.db import Store
from tests.conftest import ROOT
from tests.fixtures_sandbox import TEST_LABELS

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REALTASKS = ROOT / "tests" / "fixtures" / "realtasks"


class Run:
    def __init__(self, done: subprocess.CompletedProcess, db: Path) -> None:
        self.code = done.returncode
        self.stderr = " ".join(done.stderr.split())  # undo rich's wrapping
        self.rows = {r["task"].split("/", 1)[1]: r for r in json.loads(done.stdout)}
        self.db = db

    def problems(self, task: str) -> str:
        return " | ".join(self.rows[task]["problems"])

    def episodes(self, task: str) -> list[dict]:
        with Store(self.db) as store:
            sql = "SELECT * FROM episodes WHERE task_id LIKE ? ORDER BY id"
            return [dict(r) for r in store.query(sql, (f"%/{task}",))]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    db = tmp_path_factory.mktemp("realtasks") / "check.db"
    argv = ["check", str(REALTASKS), "--workers", "2", "--json", "--db", str(db)]
    done = subprocess.run(
        [sys.executable, "-m", "depthtui", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
        env={**os.environ, "COLUMNS": "500"},
    )
    try:
        yield Run(done, db)
    finally:
        tasks, _ = load_tasks([REALTASKS])
        client = docker.from_env()
        for task in tasks:
            remove_task_images(client, task)
        client.close()


def test_every_heredoc_form_builds_and_checks_out(run: Run) -> None:
    row = run.rows["heredoc-forms"]
    assert row["ok"] and row["reference_passed"] is True and row["noop_failed"] is True, row


def test_the_image_entrypoint_runs_before_the_agent(run: Run) -> None:
    # The reference reaches a service by a name that only the entrypoint sets up (/etc/hosts).
    row = run.rows["entrypoint-service"]
    assert row["ok"] and row["reference_passed"] is True and row["noop_failed"] is True, row


def test_an_entrypoint_that_exits_is_named(run: Run) -> None:
    row = run.rows["entrypoint-exits"]
    assert not row["ok"]
    text = run.problems("entrypoint-exits")
    assert "ENTRYPOINT /usr/local/bin/entrypoint.sh exited with code 3" in text, text
    assert "license server unreachable" in text, text
    assert {e["error_kind"] for e in run.episodes("entrypoint-exits")} == {"entrypoint"}


def test_endless_native_homes_belong_to_the_agent(run: Run) -> None:
    # The reference writes into folders %post made as root: it passes only if they are the
    # agent's, as Endless Terminals' runner gives them.
    row = run.rows["task_000000_4e57ed01"]
    assert row["ok"] and row["reference_passed"] is True and row["noop_failed"] is True, row


def test_what_post_makes_under_the_home_is_the_agents_unless_it_chowns_it(tmp_path: Path) -> None:
    task = load_task(REALTASKS / "task_000000_4e57ed01")
    client = docker.from_env()
    try:
        tag = build_image(task, tmp_path, labels=TEST_LABELS, client=client).tag
        out = subprocess.run(
            [
                "docker",
                "run",
                "--rm",
                "--network",
                "none",
                "--label",
                "depthtui.test=1",
                tag,
                "sh",
                "-c",
                "cd /home/user && find projects | sort | xargs stat -c '%u %a %n'",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    finally:
        remove_task_images(client, task)
        client.close()
    assert out.splitlines() == [
        "1000 755 projects",
        "0 444 projects/POLICY.txt",  # %post chowned it itself: the task's choice
        "1000 755 projects/site",
        "1000 755 projects/site/assets",
        "1000 755 projects/site/assets/img",
        "1000 644 projects/site/assets/img/.keep",
        "1000 644 projects/site/assets/manifest.txt",
        "1000 755 projects/site/logs",
    ]
