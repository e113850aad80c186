"""`depthtui check` on real-world-shaped tasks, good and broken, through the real CLI, runner,
images, containers and verifiers (tests/fixtures/realworld; its README says what each holds).

One check of the whole fixture tree runs once for the module (workers=2); each test reads what
it says about one task. Broken folders are reported by name and skipped, broken tasks get their
own clear verdict, and every other task still runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from engine.sandbox.images import remove_task_images
from engine.tasks.loader import load_tasks
from store.db import Store
from tests.conftest import ROOT

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REALWORLD = ROOT / "tests" / "fixtures" / "realworld"
GOOD = [
    "harbor/status-counts",  # TB2 shape: ubuntu:24.04 + apt jq, uv preamble, docker_image
    "harbor/sensor-summary",  # python:3.13-slim base; solve.sh calls `python`; reward.json
    "harbor/inventory-migration",  # [[steps]], workdir/setup.sh, min_reward, agent user
    "harbor/legacy-config",  # version/memory/storage spellings, unknown keys, pip preamble
    "harbor/notes-index",  # adapter compose file: ${CONTEXT_DIR}, ${MAIN_IMAGE_NAME}, env
    "endless/task_000000_3f9c1a7e",  # Endless Harbor layout, files made by RUN printf
    "endless/task_000000_7c1e5a92",  # Endless Harbor layout, heredoc Dockerfile
    "endless/task_000000_8b2d4e60",  # Endless generator output: task.json + container.def
]


class Run:
    def __init__(self, done: subprocess.CompletedProcess, db: Path) -> None:
        self.code = done.returncode
        self.stderr = " ".join(done.stderr.split())  # undo rich's wrapping
        self.rows = {r["task"]: r for r in json.loads(done.stdout)}
        self.db = db

    def problems(self, task: str) -> str:
        return " | ".join(self.rows[task]["problems"])

    def episodes(self, task: str) -> list[dict]:
        with Store(self.db) as store:
            sql = "SELECT agent, error_kind FROM episodes WHERE task_id = ? ORDER BY id"
            return [dict(r) for r in store.query(sql, (task,))]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    db = tmp_path_factory.mktemp("realworld") / "check.db"
    argv = ["check", str(REALWORLD), "--workers", "2", "--json", "--db", str(db)]
    done = subprocess.run(
        [sys.executable, "-m", "depthtui", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
        env={**os.environ, "COLUMNS": "500"},  # long paths on one line
    )
    try:
        yield Run(done, db)
    finally:
        tasks, _ = load_tasks([REALWORLD])
        client = docker.from_env()
        for task in tasks:
            remove_task_images(client, task)
        client.close()


def test_good_tasks_check_out(run: Run) -> None:
    for task in GOOD:
        row = run.rows[task]
        assert row["ok"], (task, row["problems"], run.stderr[-2000:])
        assert row["reference_passed"] is True and row["noop_failed"] is True, row
    assert run.rows["harbor/inventory-migration"]["segments"] == 2


def test_broken_folders_are_named_and_the_rest_still_run(run: Run) -> None:
    # The job failed (some tasks hit errors) but every loadable task has its verdict.
    assert run.code == 1
    assert set(GOOD) <= set(run.rows)
    assert len(run.rows) == 15
    expected = {
        "broken/no-tests/tests": "missing: expected tests/test.sh (Harbor)",
        "broken/step-without-instruction/steps/apply/instruction.md": "field 'steps[1]'",
        "broken/task_000000_e5e5e5e5/container.def": "the definition is empty",
    }
    for path, why in expected.items():
        assert f"{REALWORLD / path}" in run.stderr and why in run.stderr, path
        assert path.split("/")[1] not in {t.split("/")[1] for t in run.rows}


def test_an_image_that_holds_the_answer_is_caught(run: Run) -> None:
    row = run.rows["broken/task_000000_0bad0b0e"]
    assert row["reference_passed"] is True and row["noop_failed"] is False
    assert not row["ok"] and "doing nothing passes" in row["problems"]


def test_a_reference_that_fails_is_caught(run: Run) -> None:
    row = run.rows["broken/wrong-reference"]
    assert row["problems"] == ["the reference solution does not pass"]


def test_a_task_without_solve_sh_is_said_to_have_none(run: Run) -> None:
    row = run.rows["broken/task_000000_50150150"]
    assert row["W"] is None and row["reference_passed"] is None and row["noop_failed"] is True
    assert "no reference solution" in run.problems("broken/task_000000_50150150")
    # Nothing was run for a reference that does not exist.
    assert [e["agent"] for e in run.episodes("broken/task_000000_50150150")] == ["nop"]


def test_tests_that_need_the_network_are_a_clear_verifier_error(run: Run) -> None:
    text = run.problems("broken/needs-network")
    assert "reference and no-op runs: verifier error: needs_network" in text
    assert "test.sh line 9" in text and "requests" in text
    # Decided from the task's files alone: not tried again.
    assert [e["agent"] for e in run.episodes("broken/needs-network")] == ["oracle", "nop"]


def test_tests_importing_a_module_the_toolchain_lacks(run: Run) -> None:
    text = run.problems("broken/imports-yaml")
    assert "missing_module" in text and "import yaml" in text


def test_a_test_sh_that_writes_no_reward(run: Run) -> None:
    text = run.problems("broken/no-reward")
    assert "no_reward" in text and "reward.txt" in text


def test_a_dockerfile_that_does_not_build_gives_its_log_tail(run: Run) -> None:
    text = run.problems("broken/build-fails")
    assert text.startswith("reference and no-op runs: build error: building the image of")
    assert "apt-get install -y jq' returned a non-zero code: 100" in text
    assert "\x1b[" not in text  # the builder's colour codes are gone
    log = Path(text.split("(log: ")[1].split(")")[0])
    assert "Unable to locate package jq" in log.read_text()
    # The unit's own line carries the log tail.
    assert "Unable to locate package jq" in run.stderr


def test_substituted_base_images_are_warned_about(run: Run) -> None:
    for task, base in (
        ("harbor/status-counts", "ubuntu:24.04"),
        ("harbor/sensor-summary", "python:3.13-slim-bookworm"),
        ("endless/task_000000_8b2d4e60", "ubuntu:22.04"),
    ):
        warning = f"warning: {task}: FROM {base} cannot be had on this engine"
        assert run.stderr.count(warning) == 1, task  # once, not once per episode
