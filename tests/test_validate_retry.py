"""`validate --retry-errors` reruns a stored errored run however often it errored before (issue 29
point 6): through the real CLI, Docker and verifier, on a copy of
tests/fixtures/outcomes-check/collects-not (its nop run, once it runs, is task broken: one cheap
episode and a stored contract). The infrastructure error is a condition made and then removed:
DEPTHTUI_TOOLCHAIN pointing at a folder with no verifier toolchain."""

from __future__ import annotations

import json
import os
import shutil
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
pytest_plugins = ["tests.fixtures_verify"]

SOURCE = ROOT / "tests" / "fixtures" / "outcomes-check" / "collects-not"
TASK = "retry-errors/collects-not"
ERRED = ("done", "infra_error")


def validate(db: Path, task: Path, *extra: str, toolchain: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "depthtui",
            "validate",
            str(task),
            "--json",
            "--db",
            str(db),
            *extra,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env={**os.environ, "COLUMNS": "400", "DEPTHTUI_TOOLCHAIN": toolchain},
    )


def nop_runs(db: Path) -> list[tuple[str, str | None]]:
    sql = "SELECT status, outcome FROM episodes WHERE task_id = ? AND agent = 'nop' ORDER BY id"
    return [(r["status"], r["outcome"]) for r in rows(db, sql, (TASK,))]


def test_retry_errors_reruns_a_run_that_errored_again_under_retry_errors(
    tmp_path: Path, toolchain
) -> None:
    task = tmp_path / "retry-errors" / "collects-not"
    shutil.copytree(SOURCE, task)
    db = tmp_path / "depthtui.db"
    missing = str(tmp_path / "no-toolchain")
    try:
        first = validate(db, task, toolchain=missing)
        assert first.returncode == 1
        assert nop_runs(db) == [ERRED] * 3, first.stderr[-2000:]
        # --retry-errors while the cause is still there: one more try, which errs again.
        again = validate(db, task, "--retry-errors", toolchain=missing)
        assert again.returncode == 1
        assert nop_runs(db) == [ERRED] * 4, again.stderr[-2000:]
        # The cause removed: --retry-errors runs it once more (it reused the fourth errored try
        # and "failed after 0.1 s" with the old error before).
        fixed = validate(db, task, "--retry-errors", toolchain=str(toolchain.path))
        stderr = " ".join(fixed.stderr.split())
        assert "no trusted verifier toolchain" not in stderr, stderr[-2000:]
        assert nop_runs(db) == [ERRED] * 4 + [("done", "task_broken")], stderr[-2000:]
        [row] = json.loads(fixed.stdout)
        assert row["valid"] is False
        assert row["reasons"][0].startswith("task broken: verifier: collection_error"), row
    finally:
        tasks, _ = load_tasks([task])
        client = docker.from_env()
        for one in tasks:
            assert one.id == TASK
            remove_task_images(client, one)
        client.close()
