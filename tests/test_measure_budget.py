"""Budget controls end to end: `--max-cost` and `--stop-file` stop new runs (a run in flight
finishes) and the job's message says why; a priced model's cost accrues into jobs.cost_usd.

`depthtui free` on demo/error-count with a scripted model on loopback: turn 1 runs the
reference commands, turn 2 says it is done. Every reply reports 1,000 prompt and 500 completion
tokens; the registry prices them at $10 and $20 per million, so a turn costs
(1000 * 10 + 500 * 20) / 1e6 = $0.02 and an episode (2 turns) $0.04.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from devtools.scripted_server import ScriptedReply, ScriptedServer, calls, text
from tests.conftest import DEMO
from tests.fixtures_measure import (
    cleanup,
    endless,
    job,
    leftovers,
    reply_number,
    rows,
    run_cli,
    write_models,
)

USAGE = {"prompt_tokens": 1000, "completion_tokens": 500, "total_tokens": 1500}
SOLVE = (
    "mkdir -p /home/user/reports",
    "awk '$3 == \"ERROR\"' /home/user/logs/app.log | wc -l > /home/user/reports/error_count.txt",
)
TURN_USD = 0.02
EPISODE_USD = 2 * TURN_USD


class Solver:
    """Solves error-count in one turn, then says it is done. When armed with a path, its first
    reply creates that file (a user dropping the stop file while a run is in flight)."""

    def __init__(self) -> None:
        self.stop_file: Path | None = None
        self._lock = threading.Lock()

    def arm(self, path: Path) -> None:
        self.stop_file = path

    def __call__(self, body: dict[str, Any]) -> ScriptedReply:
        with self._lock:
            if self.stop_file is not None:
                self.stop_file.touch()
                self.stop_file = None
        if reply_number(body) == 1:
            return calls(*SOLVE, usage=USAGE)
        return text("done", usage=USAGE)


@pytest.fixture
def setup(tmp_path: Path):
    owners: list[str] = []
    solver = Solver()
    with ScriptedServer(endless(solver), models=("model-p",)) as server:
        models = write_models(tmp_path / "models.toml", server, {"priced": "model-p"}, (10, 20))
        args = [
            "free",
            str(DEMO / "error-count"),
            "--model",
            "priced",
            "--models",
            str(models),
        ]
        try:
            yield {
                "db": tmp_path / "depthtui.db",
                "args": args,
                "server": server,
                "solver": solver,
                "owners": owners,
                "tmp": tmp_path,
            }
        finally:
            cleanup(owners)


def test_max_cost_stops_new_runs_and_says_why(setup) -> None:
    db = setup["db"]
    result = run_cli(
        [*setup["args"], "--attempts", "3", "--max-cost", "0.05"], db, owners=setup["owners"]
    )
    # After run 1 $0.04 is spent (under $0.05), so run 2 starts; after it $0.08 is spent and
    # run 3 never starts.
    assert result.returncode == 1, result.stderr[-3000:]
    eps = rows(db, "SELECT attempt, status, passed, turns, cost_usd FROM episodes ORDER BY id")
    # One command turn each (the closing reply is recorded, not counted).
    assert [(e["attempt"], e["status"], e["passed"], e["turns"]) for e in eps] == [
        (0, "done", 1, 1),
        (1, "done", 1, 1),
    ]
    assert all(e["cost_usd"] == pytest.approx(EPISODE_USD) for e in eps)
    assert len(setup["server"].chat_requests) == 4
    j = job(db)
    assert j["status"] == "paused"
    assert j["cost_usd"] == pytest.approx(2 * EPISODE_USD)
    assert j["message"].startswith("stopped: budget: spent $0.0800 of --max-cost $0.0500; ")
    assert "2 episode(s) run, 0 reused, $0.0800" in j["message"]
    assert "budget: spent $0.0800 of --max-cost $0.0500" in result.stderr
    # The report counts the money per model.
    report = run_cli(["report", "--json"], db).json()
    assert [(m["model"], m["cost_usd"]) for m in report["models"]] == [
        ("priced", pytest.approx(2 * EPISODE_USD))
    ]
    assert leftovers(setup["owners"]) == []


def test_reserve_keeps_room_for_a_run_in_flight(setup) -> None:
    db = setup["db"]
    args = [*setup["args"], "--attempts", "3", "--max-cost", "0.1", "--reserve", "0.03"]
    result = run_cli(args, db, owners=setup["owners"])
    # After run 1, $0.06 of $0.10 is left (more than the $0.03 reserve): run 2 starts. After it
    # $0.02 is left, under the reserve: run 3 never starts.
    assert result.returncode == 1, result.stderr[-3000:]
    assert len(rows(db, "SELECT id FROM episodes WHERE status = 'done'")) == 2
    j = job(db)
    assert j["cost_usd"] == pytest.approx(2 * EPISODE_USD)
    assert "budget: spent $0.0800 of --max-cost $0.1000 (reserve $0.0300)" in j["message"]


def test_stop_file_stops_new_runs_and_a_rerun_goes_on(setup) -> None:
    db, server, solver = setup["db"], setup["server"], setup["solver"]
    stop = setup["tmp"] / "STOP"
    args = [*setup["args"], "--attempts", "2", "--stop-file", str(stop)]

    # A stop file that is already there: nothing starts.
    stop.touch()
    before = run_cli(args, db, owners=setup["owners"])
    assert before.returncode == 1
    assert rows(db, "SELECT id FROM episodes") == []
    assert server.chat_requests == []
    first_job = job(db)
    assert first_job["status"] == "paused"
    assert first_job["message"].startswith(f"stopped: stop file {stop} exists; ")
    stop.unlink()

    # The stop file appears while run 1 is in flight: run 1 finishes, run 2 never starts.
    solver.arm(stop)
    during = run_cli(args, db, owners=setup["owners"])
    assert during.returncode == 1, during.stderr[-3000:]
    assert stop.exists()
    eps = rows(db, "SELECT attempt, status, passed, turns FROM episodes ORDER BY id")
    assert [(e["attempt"], e["status"], e["passed"], e["turns"]) for e in eps] == [
        (0, "done", 1, 1)
    ]
    j = job(db)
    assert j["status"] == "paused"
    assert j["message"].startswith(f"stopped: stop file {stop} exists; ")
    assert "1 episode(s) run, 0 reused" in j["message"]
    assert f"jobs resume {j['id']}" in j["message"]
    assert j["cost_usd"] == pytest.approx(EPISODE_USD)

    # Without the file, the same command goes on: run 1 is reused, run 2 runs.
    stop.unlink()
    after = run_cli(args, db, owners=setup["owners"])
    assert after.returncode == 0, after.stderr[-3000:]
    eps = rows(db, "SELECT attempt, status FROM episodes ORDER BY id")
    assert [(e["attempt"], e["status"]) for e in eps] == [(0, "done"), (1, "done")]
    last = job(db)
    assert last["status"] == "done"
    assert "1 episode(s) run, 1 reused" in last["message"]
    assert last["cost_usd"] == pytest.approx(EPISODE_USD)  # only what this job spent
    assert len(server.chat_requests) == 4
    assert leftovers(setup["owners"]) == []
