"""`depthtui import harbor` on folders as Harbor 0.26 writes them (tests/fixtures/harbor-jobs):
a job folder of oracle and nop trials without trajectories, and single trial folders with ATIF
1.2 and 1.7 trajectories, into a real SQLite store through the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from store.db import Store
from tests.conftest import ROOT

JOBS = ROOT / "tests" / "fixtures" / "harbor-jobs"
JOB = JOBS / "2026-11-20__10-00-00"


def cli(db: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "depthtui", *argv, "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "COLUMNS": "300"},
    )


def rows(db: Path, sql: str, params: tuple = ()) -> list[dict]:
    with Store(db) as store:
        return [dict(r) for r in store.query(sql, params)]


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory):
    db = tmp_path_factory.mktemp("import") / "import.db"
    done = cli(db, "import", "harbor", str(JOBS), "--json")
    assert done.returncode == 0, done.stderr
    return db, json.loads(done.stdout)


def by_agent(db: Path) -> dict[str, dict]:
    return {e["agent"]: e for e in rows(db, "SELECT * FROM episodes ORDER BY id")}


def test_a_job_folder_and_single_trials_are_all_found(imported) -> None:
    db, doc = imported
    assert doc["errors"] == [] and doc["reused"] == [] and len(doc["imported"]) == 4
    # The job's own result.json and config.json are not trials.
    assert set(by_agent(db)) == {"oracle", "nop", "openai/gpt-test", "anthropic/claude-test"}


def test_trials_without_a_trajectory_keep_result_reward_timings_and_verifier_output(
    imported,
) -> None:
    db, _ = imported
    episodes = by_agent(db)
    oracle, nop = episodes["oracle"], episodes["nop"]
    assert (oracle["task_id"], oracle["mode"], oracle["turns"]) == (
        "imported/status-counts",
        "imported",
        0,
    )
    assert (oracle["reward"], oracle["passed"], nop["reward"], nop["passed"]) == (1.0, 1, 0.0, 0)
    assert oracle["error_kind"] is None and oracle["started_at"] == "2026-11-20T10:00:01.000Z"
    timings = json.loads(oracle["timings_json"])
    assert timings == {
        "trial": 8.35,
        "environment_setup": 3.5,
        "agent_setup": 0.1,
        "agent_execution": 1.5,
        "verifier": 3.25,
        "agent": 1.5,
    }
    [segment] = rows(db, "SELECT * FROM segment_runs WHERE episode_id = ?", (oracle["id"],))
    assert segment["verifier_output"] == "pytest: 1 passed\n" and segment["passed"] == 1
    assert json.loads(segment["rewards_json"]) == {"reward": 1.0}
    assert rows(db, "SELECT * FROM turns WHERE episode_id = ?", (oracle["id"],)) == []


def test_atif_1_2_and_1_7_trajectories_give_their_turns(imported) -> None:
    db, _ = imported
    episodes = by_agent(db)
    old, new = episodes["openai/gpt-test"], episodes["anthropic/claude-test"]
    # Two agent steps: one with the call, and the closing reply, which is no turn
    # (docs/work-and-turns.md).
    assert (old["turns"], old["prompt_tokens"], old["prompt_text"]) == (
        1,
        240,
        "You are a terminal agent.",
    )
    [call] = rows(db, "SELECT * FROM calls WHERE episode_id = ?", (old["id"],))
    assert (
        call["command"] == "head -3 /app/access.log"
        and '"GET / HTTP/1.1" 200' in call["observation"]
    )
    # 1.7: no session_id, content parts for messages and observations, extra on tool calls.
    [seg] = rows(db, "SELECT * FROM segment_runs WHERE episode_id = ?", (new["id"],))
    assert seg["user_message"] == (
        "Count the HTTP status codes in /app/access.log.\n[image: images/log.png]"
    )
    [turn] = rows(db, "SELECT * FROM turns WHERE episode_id = ?", (new["id"],))
    assert turn["text"] == "Reading the log." and turn["cached_tokens"] == 100
    [call] = rows(db, "SELECT * FROM calls WHERE episode_id = ?", (new["id"],))
    assert (call["command"], call["observation"]) == ("wc -l /app/access.log", "42 /app/access.log")
    assert new["error_kind"] == "imported_error"
    assert new["error_detail"] == ("AgentTimeoutError: Agent execution timed out after 300 seconds")


def test_a_single_trial_folder_imports_and_again_is_reused(imported, tmp_path: Path) -> None:
    db, _ = imported
    trial = JOB / "status-counts__Zp7mR2c"
    again = cli(db, "import", "harbor", str(trial), "--json")
    assert json.loads(again.stdout) == {
        "imported": [],
        "reused": [by_agent(db)["nop"]["id"]],
        "errors": [],
    }
    fresh = cli(tmp_path / "one.db", "import", "harbor", str(trial), "--json")
    assert len(json.loads(fresh.stdout)["imported"]) == 1


def test_a_folder_without_trials_and_a_bad_trajectory_are_named(tmp_path: Path) -> None:
    empty = tmp_path / "nothing"
    empty.mkdir()
    done = cli(tmp_path / "x.db", "import", "harbor", str(empty))
    assert done.returncode == 1
    assert f"{empty}: no trial folder" in " ".join(done.stderr.split())
    bad = tmp_path / "bad__1"
    (bad / "agent").mkdir(parents=True)
    (bad / "agent" / "trajectory.json").write_text('{"schema_version": "ATIF-v2.0", "steps": []}')
    done = cli(tmp_path / "x.db", "import", "harbor", str(bad), "--json")
    assert done.returncode == 1
    [error] = json.loads(done.stdout)["errors"]
    assert "schema_version 'ATIF-v2.0'; expected ATIF-v1.x" in error


def test_the_fixture_runs_validate_with_harbors_own_models() -> None:
    # Only where Harbor (Python >= 3.12) is installed: the fixtures are Harbor's shape.
    trial_result = pytest.importorskip("harbor.models.trial.result").TrialResult
    trajectory = pytest.importorskip("harbor.models.trajectories.trajectory").Trajectory
    job_result = pytest.importorskip("harbor.models.job.result").JobResult
    job_result.model_validate_json((JOB / "result.json").read_text())
    trials = [JOB / "status-counts__Ab3kQ9x", JOB / "status-counts__Zp7mR2c"]
    trials += [JOBS / "status-counts__Qw1eR5t", JOBS / "status-counts__Lm8nB4v"]
    for trial in trials:
        trial_result.model_validate_json((trial / "result.json").read_text())
        if (trial / "agent" / "trajectory.json").is_file():
            trajectory.model_validate_json((trial / "agent" / "trajectory.json").read_text())


def test_ctrf_per_test_results_come_in_as_rows_and_counts(imported) -> None:
    db, _ = imported
    episodes = by_agent(db)
    old, new = episodes["openai/gpt-test"], episodes["anthropic/claude-test"]
    assert (old["tests_passed"], old["tests_total"]) == (1, 1)
    assert (new["tests_passed"], new["tests_total"]) == (1, 2)
    tests = rows(db, "SELECT * FROM test_results WHERE episode_id = ? ORDER BY id", (new["id"],))
    assert [(t["nodeid"], t["outcome"], t["duration_s"]) for t in tests] == [
        ("test_outputs.py::test_report_exists", "passed", 0.004),
        ("test_outputs.py::test_counts_match", "failed", 0.012),
    ]
    assert tests[1]["message"] == "AssertionError: assert {'200': 3} == {'200': 40, '404': 2}"
    # A trial without ctrf.json has no per-test rows (and no counts).
    assert (episodes["oracle"]["tests_passed"], episodes["oracle"]["tests_total"]) == (None, None)


def test_an_imported_trial_goes_back_out_as_harbor_wrote_it(imported, tmp_path: Path) -> None:
    db, _ = imported
    done = cli(db, "export", "harbor", "--mode", "imported", "--out", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    job_dir = Path(json.loads(done.stdout)["job_dir"])
    originals = {
        json.loads((t / "result.json").read_text())["trial_name"]: t
        for t in [*JOB.glob("status-counts__*"), *JOBS.glob("status-counts__*")]
    }
    back = {}
    for trial in job_dir.glob("status-counts__*"):
        spec = rows(
            db,
            "SELECT spec_json FROM episodes WHERE id = ?",
            (int(trial.name.rsplit("__", 1)[1]),),
        )[0]
        back[Path(json.loads(spec["spec_json"])["imported_from"]).name] = trial
    assert set(back) == set(originals)
    phases = ("environment_setup", "agent_setup", "agent_execution", "verifier")
    for name, original in originals.items():
        a = json.loads((original / "result.json").read_text())
        b = json.loads((back[name] / "result.json").read_text())
        assert b["agent_info"] == a["agent_info"], name
        assert b["task_name"] == a["task_name"], name
        assert {p: b.get(p) for p in phases} == {p: a.get(p) for p in phases}, name
        assert (b["started_at"], b["finished_at"]) == (a["started_at"], a["finished_at"])
        # Harbor's own rewards, with no key of depthtui's making (no `segment-0.reward`).
        assert b["verifier_result"] == a["verifier_result"], name
        reward = (original / "verifier" / "reward.txt").read_text().strip()
        assert float((back[name] / "verifier" / "reward.txt").read_text()) == float(reward)
        ctrf = original / "verifier" / "ctrf.json"
        if ctrf.is_file():
            want = json.loads(ctrf.read_text())["results"]["tests"]
            got = json.loads((back[name] / "verifier" / "ctrf.json").read_text())
            assert [(t["name"], t["status"], t["duration"]) for t in got["results"]["tests"]] == [
                (t["name"], t["status"], t["duration"]) for t in want
            ]
        else:
            assert not (back[name] / "verifier" / "ctrf.json").exists()


def test_a_depthtui_json_not_in_its_format_is_named(tmp_path: Path) -> None:
    import shutil

    trial = tmp_path / "status-counts__Qw1eR5t"
    shutil.copytree(JOBS / "status-counts__Qw1eR5t", trial)
    (trial / "depthtui.json").write_text('{"format": "depthtui-episode-0", "episode": {}}')
    done = cli(tmp_path / "x.db", "import", "harbor", str(trial), "--json")
    assert done.returncode == 1
    [error] = json.loads(done.stdout)["errors"]
    assert error.endswith(
        "depthtui.json: format 'depthtui-episode-0'; expected 'depthtui-episode-1'"
    ), error
    # Nothing half-imported: the store holds no episode.
    assert rows(tmp_path / "x.db", "SELECT id FROM episodes") == []
