"""Real tasks graded as their harness grades them (issue 25), through the real CLI, images,
containers and verifiers: a task's own conftest.py, the services its image's ENTRYPOINT starts,
several reward keys, planted files in a folder the tests list, and what check, validate and
episodes say and exit with. The fixtures are tests/fixtures/realtasks25 (its README).

One check of the folder, one validate of two of its tasks and one episodes run happen once for
the module; each test reads what they said."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from devtools.scripted_server import ScriptedServer, text
from engine.sandbox.images import remove_task_images
from engine.tasks.loader import load_tasks
from store.db import Store
from tests.conftest import ROOT
from tests.fixtures_measure import endless, write_models

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FIXTURES = ROOT / "tests" / "fixtures" / "realtasks25"


def depthtui(db: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "depthtui", *argv, "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
        env={**os.environ, "COLUMNS": "500"},
    )


def line_of(stderr: str, task: str) -> str:
    """The progress line that ended a task's unit (rich wraps nothing at 500 columns)."""
    found = [ln for ln in stderr.splitlines() if f" realtasks25/{task}:" in ln]
    assert found, stderr[-3000:]
    return found[-1]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("realtasks25")
    db = tmp / "store.db"
    try:
        check = depthtui(db, "check", str(FIXTURES), "--workers", "2", "--json")
        validate = depthtui(
            db,
            "validate",
            str(FIXTURES / "inbox-listing"),
            str(FIXTURES / "agent-code-noop"),
            "--workers",
            "2",
            "--json",
        )
        with ScriptedServer(endless(lambda body: text("done")), models=("m-idle",)) as server:
            models = write_models(tmp / "models.toml", server, {"idle": "m-idle"})
            episodes = depthtui(
                db,
                "episodes",
                "realtasks25/agent-code-noop",
                "--model",
                "idle",
                "--models",
                str(models),
            )
        yield {"db": db, "check": check, "validate": validate, "episodes": episodes}
    finally:
        tasks, _ = load_tasks([FIXTURES])
        client = docker.from_env()
        for task in tasks:
            remove_task_images(client, task)
        client.close()


def check_row(runs: dict, task: str) -> dict:
    rows = {r["task"]: r for r in json.loads(runs["check"].stdout)}
    return rows[f"realtasks25/{task}"]


def segment(runs: dict, task: str, agent: str, mode: str = "check") -> dict:
    with Store(runs["db"]) as store:
        sql = (
            "SELECT s.* FROM segment_runs s JOIN episodes e ON e.id = s.episode_id "
            "WHERE e.task_id = ? AND e.agent = ? AND e.mode = ? "
            "ORDER BY e.id DESC, s.idx DESC LIMIT 1"
        )
        row = store.query(sql, (f"realtasks25/{task}", agent, mode))
    assert row, f"no {mode} {agent} run of {task}"
    return dict(row[0])


def test_a_tasks_own_conftest_fixture_is_loaded(runs) -> None:
    # 25.1: tests/conftest.py gives the fixture; the reference also leaves conftest.py files
    # of its own in /app and / that would empty the run: they are not loaded.
    row = check_row(runs, "conftest-fixture")
    assert row["ok"] and row["reference_passed"] is True and row["noop_failed"] is True, row
    oracle = segment(runs, "conftest-fixture", "oracle")
    assert (oracle["tests_passed"], oracle["tests_total"]) == (2, 2), oracle


def test_tests_reach_the_services_the_entrypoint_starts(runs) -> None:
    # 25.2: test.sh asks the service the ENTRYPOINT started, by the name it put in /etc/hosts.
    row = check_row(runs, "service-at-grading")
    assert row["ok"] and row["reference_passed"] is True and row["noop_failed"] is True, row
    assert (
        "quota of 'grace': 2048" in segment(runs, "service-at-grading", "oracle")["verifier_output"]
    )
    # Said at import: which tasks are graded beside their entrypoint's services.
    imported = depthtui(runs["db"], "tasks", "import", str(FIXTURES), "--json")
    assert json.loads(imported.stdout)["entrypoint_services"] == ["realtasks25/service-at-grading"]


def test_several_reward_keys_pass_when_every_key_is_full_and_say_which_decided(runs) -> None:
    # 25.3: {"correctness": 1.0, "performance": 1.0} and no min_reward.
    row = check_row(runs, "multi-reward")
    assert row["ok"] and row["reference_passed"] is True and row["noop_failed"] is True, row
    oracle = segment(runs, "multi-reward", "oracle")
    assert json.loads(oracle["rewards_json"]) == {"correctness": 1.0, "performance": 1.0}
    assert oracle["verifier_output"].endswith(
        "[depthtui] passed: no min_reward and no 'reward' key: every key must be at least 1; "
        "'correctness' 1, 'performance' 1"
    )
    nop = segment(runs, "multi-reward", "nop")
    assert nop["verifier_output"].endswith("'correctness' is 0 < 1"), nop["verifier_output"]


def test_check_marks_a_task_that_does_not_check_out(runs) -> None:
    # 25.6: once "✓ realtasks25/agent-code-noop: 2 run, 0 reused" and the JSON said not ok.
    assert runs["check"].returncode == 1
    line = line_of(runs["check"].stderr, "agent-code-noop")
    assert line.startswith(
        "✗ realtasks25/agent-code-noop: 2 run, 0 reused; does not check out: "
    ), line
    assert "doing nothing passes" in line
    assert line_of(runs["check"].stderr, "multi-reward").startswith("✓ ")


def test_validate_moves_planted_files_out_of_a_folder_the_tests_list(runs) -> None:
    # 25.4: planted files inside inbox/ made the reference fail (the tests list inbox/).
    rows = {r["task"]: r for r in json.loads(runs["validate"].stdout)}
    row = rows["realtasks25/inbox-listing"]
    assert row["valid"] is True, row["reasons"]
    [note] = row["notes"]
    assert note.startswith("planted files /home/user/inbox/"), note
    assert "(--planted sibling)" in note
    with Store(runs["db"]) as store:
        [contract] = store.query(
            "SELECT detail_json FROM contracts WHERE task_id = 'realtasks25/inbox-listing'"
        )
    planted = json.loads(contract["detail_json"])["planted"]
    assert planted["level"] == "sibling"
    assert planted["moved"] and all(p.startswith("/home/user/inbox/") for p in planted["moved"])
    assert all(p in note for p in planted["moved"])
    line = line_of(runs["validate"].stderr, "inbox-listing")
    assert line.startswith("✓ ") and "note: planted files /home/user/inbox/" in line, line


def test_validate_exits_1_and_marks_an_invalid_task(runs) -> None:
    # 25.6: once exit 0 with "1/2 task(s) valid" and ✓ beside the invalid task.
    assert runs["validate"].returncode == 1, runs["validate"].stderr[-2000:]
    line = line_of(runs["validate"].stderr, "agent-code-noop")
    assert line.startswith("✗ realtasks25/agent-code-noop: 0 run, 0 reused; invalid: "), line
    assert "agent-written code" in line


def test_episodes_says_why_it_skipped_a_task(runs) -> None:
    # 25.6: once "✓ realtasks25/agent-code-noop: 0 run, 0 reused" and nothing else.
    line = line_of(runs["episodes"].stderr, "agent-code-noop")
    assert line.startswith(
        "– realtasks25/agent-code-noop: 0 run, 0 reused; skipped: invalid task: the tests "
        "import or run agent-written code"
    ), line
