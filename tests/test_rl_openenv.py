"""`depthtui env serve` (engine/rl/server.py) as a user runs it: the real CLI on loopback, real
Docker, a real SQLite store. OpenEnv's HTTP contract over plain HTTP, and OpenEnv's own client
(openenv-core's GenericEnvClient, over /ws) when openenv-core is importable by the test's
Python or by $DEPTHTUI_OPENENV_PYTHON (a separate venv: openenv-core pulls gradio and more)."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]

DEPTHTUI = str(Path(sys.executable).with_name("depthtui"))
SOLVE = (
    "mkdir -p /home/user/reports && awk '$3 == \"ERROR\"' /home/user/logs/app.log | wc -l "
    "> /home/user/reports/error_count.txt"
)
CLIENT = """
import json, sys
from openenv.core import GenericEnvClient
with GenericEnvClient(base_url=sys.argv[1]).sync() as env:
    first = env.reset(task="demo/error-count", seed=0)
    ran = env.step({"command": sys.argv[2]})
    state = env.state()
    graded = env.step({"finish": True})
print(json.dumps({"first": [first.observation, first.reward, first.done],
                  "ran": [ran.observation, ran.reward, ran.done], "state": state,
                  "graded": [graded.observation, graded.reward, graded.done]}))
"""


def openenv_python() -> str | None:
    configured = os.environ.get("DEPTHTUI_OPENENV_PYTHON")
    candidates = [configured] if configured else [sys.executable, "/tmp/rl-oe/bin/python"]
    for python in candidates:
        if python and Path(python).exists():
            probe = subprocess.run(
                [python, "-c", "import openenv.core"], capture_output=True, env=_clean_env()
            )
            if probe.returncode == 0:
                return python
    return None


def _clean_env() -> dict[str, str]:
    # The other venv must import its own packages, not this checkout's PYTHONPATH.
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    db = tmp_path_factory.mktemp("serve") / "depthtui.db"
    proc = subprocess.Popen(
        [DEPTHTUI, "env", "serve", "tasks/demo/error-count", "--port", "0", "--planted", "none",
         "--budget", "5", "--db", str(db)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    line = proc.stdout.readline()
    match = re.search(r"on (http://[\d.]+:\d+)", line)
    if match is None:
        proc.kill()
        raise AssertionError(f"no address in {line!r}: {proc.stderr.read()[-2000:]}")
    yield match.group(1), db, proc
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=120)


def call(url: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url + path, data=data, method="GET" if body is None else "POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_http_contract_reset_step_state(served):
    url, db, _ = served
    assert call(url, "/health") == (200, {"status": "healthy"})
    status, schema = call(url, "/schema")
    assert status == 200 and set(schema) == {"action", "observation", "state"}
    status, first = call(url, "/reset", {"seed": 3, "episode_id": "mine"})
    assert status == 200 and first["done"] is False and first["reward"] is None
    assert "error_count.txt" in first["observation"]["output"]
    assert first["observation"]["remaining_budget"] == 5
    status, ran = call(url, "/step", {"action": {"command": SOLVE}})
    assert ran["observation"]["output"].endswith("[exit code 0]; 4 command(s) left")
    assert ran["observation"]["remaining_budget"] == 4 and ran["done"] is False
    assert call(url, "/state")[1]["episode_id"] == "mine"
    assert call(url, "/state")[1]["step_count"] == 1
    assert call(url, "/step", {"action": {"cmd": "ls"}})[0] == 422  # named field, not run
    status, graded = call(url, "/step", {"action": {"finish": True}})
    assert (graded["done"], graded["reward"]) == (True, 1.0)
    eid = graded["observation"]["episode"]
    conn = sqlite3.connect(db)
    row = conn.execute("SELECT mode, reward, turns FROM episodes WHERE id = ?", (eid,)).fetchone()
    conn.close()
    assert row == ("rl", 1.0, 1)


def test_openenv_client_resets_and_steps(served):
    python = openenv_python()
    if python is None:
        pytest.skip("openenv-core is not installed (pip install openenv-core in some venv)")
    url, _, _ = served
    out = subprocess.run(
        [python, "-c", CLIENT, url, SOLVE], capture_output=True, text=True, timeout=600,
        env=_clean_env(),
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert "error_count.txt" in got["first"][0]["output"] and got["first"][2] is False
    assert got["ran"][0]["output"].startswith("[exit code 0]") and got["ran"][2] is False
    assert got["state"]["step_count"] == 1
    assert got["graded"][1:] == [1.0, True]
