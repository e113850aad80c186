"""`check` and `validate` say what went wrong (docs/outcomes.md), through the real CLI, Docker
and verifiers, on tests/fixtures/outcomes-check (its README says what each task holds) beside
one task that checks out:

- a run that errored shows as its error (`reference_passed`/`noop_failed` null plus the error),
  in `--json` and in the table;
- a task whose own test file does not collect is task broken: one try per run, no retries;
- `validate` on a task without solve.sh says so and runs nothing;
- `check` exits 1 when any task does not check out, 0 when all do.
"""

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
from tests.conftest import ROOT
from tests.fixtures_measure import rows

pytestmark = [pytest.mark.docker, pytest.mark.slow]
# The trusted toolchain, built when missing or older than engine/verify/runner.py.
pytest_plugins = ["tests.fixtures_verify"]

FIXTURES = ROOT / "tests" / "fixtures" / "outcomes-check"
GOOD = ROOT / "tests" / "fixtures" / "outcomes" / "fifo-output"
BROKEN, NO_REF, BUILD = (
    f"outcomes-check/{n}" for n in ("collects-not", "no-reference", "build-fails")
)


def depthtui(*args: str, db: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "depthtui", *args, "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
        env={**os.environ, "COLUMNS": "400"},
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, toolchain):
    db = tmp_path_factory.mktemp("outcomes-check") / "depthtui.db"
    try:
        checked = depthtui("check", str(FIXTURES), str(GOOD), "--workers", "2", "--json", db=db)
        # The table of the same (finished) job: every run is reused.
        table = depthtui("check", str(FIXTURES), db=db)
        good = depthtui("check", str(GOOD), db=db)
        validated = depthtui("validate", str(FIXTURES / "no-reference"), "--json", db=db)
        broken = depthtui("validate", str(FIXTURES / "collects-not"), "--json", db=db)
        yield {
            "db": db,
            "check": checked,
            "rows": {r["task"]: r for r in json.loads(checked.stdout)},
            "table": " ".join(table.stdout.split()),
            "table_code": table.returncode,
            "good": good,
            "validate": validated,
            "validate_broken": broken,
        }
    finally:
        tasks, _ = load_tasks([FIXTURES, GOOD])
        client = docker.from_env()
        for task in tasks:
            remove_task_images(client, task)
        client.close()


def agents(db: Path, task: str, mode: str = "check") -> list[str]:
    sql = "SELECT agent FROM episodes WHERE task_id = ? AND mode = ? ORDER BY id"
    return [r["agent"] for r in rows(db, sql, (task, mode))]


def test_check_exits_non_zero_when_a_task_does_not_check_out(runs) -> None:
    assert runs["check"].returncode == 1, runs["check"].stderr[-2000:]
    assert runs["table_code"] == 1
    assert runs["good"].returncode == 0, runs["good"].stderr[-2000:]
    assert runs["rows"]["outcomes/fifo-output"]["ok"] is True


def test_a_task_whose_tests_do_not_collect_is_task_broken_and_not_retried(runs) -> None:
    row = runs["rows"][BROKEN]
    assert row["reference_passed"] is None and row["noop_failed"] is None, row
    assert row["reference_outcome"] == row["noop_outcome"] == "task_broken"
    assert "NameError" in row["reference_error"] and row["reference_error"].startswith(
        "task broken: verifier error: collection_error"
    )
    assert any("(task broken: not retried)" in p for p in row["problems"]), row["problems"]
    assert agents(runs["db"], BROKEN) == ["oracle", "nop"]  # one try each


def test_an_infrastructure_error_shows_as_its_error_and_a_sure_failure_is_not_retried(runs) -> None:
    row = runs["rows"][BUILD]
    assert row["reference_passed"] is None and row["noop_failed"] is None, row
    assert row["reference_outcome"] == "infra_error"
    assert row["reference_error"].startswith("infra error: build error: building the image")
    assert "returned a non-zero code" in row["reference_error"]
    # `RUN false` fails the same way every time: one try per run, not three (docs/builds.md).
    assert agents(runs["db"], BUILD) == ["oracle", "nop"]
    assert "(infrastructure: not retried, it fails the same way)" in " ".join(row["problems"])


def test_the_table_shows_errors_not_verdicts(runs) -> None:
    table = runs["table"]
    assert "task broken" in table and "infra error" in table, table[-3000:]
    assert "reference and no-op runs: verifier error: collection_error" in table
    # The errored runs are not shown as "fails"/"PASSES".
    broken_line = table[table.index("collects-not") :][:200]
    assert "fails" not in broken_line.split("reference and no-op")[0], broken_line


def test_validate_without_a_reference_says_so_and_runs_nothing(runs) -> None:
    # Not validated is not valid: the command fails, as check does (issue 25).
    assert runs["validate"].returncode == 1, runs["validate"].stderr[-2000:]
    [row] = json.loads(runs["validate"].stdout)
    assert row["valid"] is None
    assert row["reasons"] == [
        "no reference solution (solve.sh is missing), so it cannot be validated"
    ]
    assert agents(runs["db"], NO_REF, "validate") == []


def test_validate_calls_a_broken_task_broken_after_one_run(runs) -> None:
    assert runs["validate_broken"].returncode == 1, runs["validate_broken"].stderr[-2000:]
    [row] = json.loads(runs["validate_broken"].stdout)
    assert row["valid"] is False
    assert row["reasons"][0].startswith("task broken: verifier: collection_error"), row
    assert agents(runs["db"], BROKEN, "validate") == ["nop"]
