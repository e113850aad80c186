"""`depthtui validate` on a Terminal-Bench-shaped Harbor task (real CLI, Docker and verifier):
its test.sh starts with the usual uv network preamble (`source $HOME/.local/bin/env`), which the
verifier drops before running it, so the audit must not count it as agent-written code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from engine.sandbox.images import remove_task_images
from engine.tasks.loader import load_task
from tests.conftest import ROOT

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TASK = ROOT / "tests" / "fixtures" / "realworld" / "harbor" / "notes-index"


def test_a_task_with_the_uv_preamble_validates(tmp_path: Path) -> None:
    argv = ["validate", str(TASK), "--json", "--db", str(tmp_path / "validate.db")]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "depthtui", *argv],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=600,
            env={**os.environ, "COLUMNS": "500"},
        )
    finally:
        client = docker.from_env()
        remove_task_images(client, load_task(TASK))
        client.close()
    assert done.returncode == 0, done.stderr[-3000:]
    [row] = json.loads(done.stdout)
    assert row["task"] == "harbor/notes-index"
    assert row["valid"] is True, row["reasons"]
    assert row["reasons"] == [] and row["flags"] == []
    # No input under the agent's home is named in the instruction: no fault can target one.
    assert row["fault_families"] == []
