"""A real multi-segment run that stops at its first failed segment, and what is exported of it.

`depthtui free` runs demo/batch-pipeline (three segments: generate, check, assemble) with a
scripted model on loopback that does segment 1 right (runs the generator, records the batch id)
and segment 2 wrong (names a part that does not exist). Then: the episode, its segment_runs and
the model's requests; the Harbor job folder with its ATIF trajectory, field by field; an import
of that folder into a fresh store giving back the same turns; and training rows holding only the
passing segment.

Hand computation (engine/agents/loop.py: a turn is one model reply, the "done" reply counts):
segment 1 = turn 1 (mkdir + generator: calls 1-2) and turn 2 (done); segment 2 = turn 3 (ls: call
3), turn 4 (echo: call 4), turn 5 (done). Every reply reports 120 prompt tokens (20 cached), 30
completion tokens and $0.0015, so the episode totals 600 / 100 / 150 and $0.0075. The reward is
the mean over segments with a result (multi_step_reward_strategy = "mean"): (1 + 0) / 2 = 0.5.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import pytest

from devtools.scripted_server import ScriptedServer
from tests.conftest import DEMO
from tests.fixtures_measure import (
    SegmentPolicy,
    cleanup,
    endless,
    leftovers,
    rows,
    run_cli,
    user_messages,
    write_models,
)

TASK = "demo/batch-pipeline"
USAGE = {
    "prompt_tokens": 120,
    "completion_tokens": 30,
    "total_tokens": 150,
    "prompt_tokens_details": {"cached_tokens": 20},
}
COST = 0.0015
POLICY = SegmentPolicy(
    replies=[
        [
            (
                "mkdir -p /home/user/report",
                "/home/user/tools/new_batch.sh > /home/user/report/batch_id.txt",
            )
        ],
        [("ls /home/user/incoming/batch",), ("echo part-99.dat > /home/user/report/damaged.txt",)],
        [("echo this segment must never start",)],
    ],
    usage=USAGE,
    cost=COST,
)
SEGMENT_3 = (DEMO / "batch-pipeline" / "steps" / "assemble" / "instruction.md").read_text()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("segments")
    db = tmp / "depthtui.db"
    owners: list[str] = []
    with ScriptedServer(endless(POLICY), models=("model-s",)) as server:
        models = write_models(tmp / "models.toml", server, {"segs": "model-s"})
        args = ["free", str(DEMO / "batch-pipeline"), "--model", "segs", "--attempts", "1"]
        result = run_cli([*args, "--models", str(models), "--json"], db, owners=owners)
        try:
            assert result.returncode == 0, result.stderr[-3000:]
            episode = rows(db, "SELECT * FROM episodes")
            assert len(episode) == 1, episode
            yield {
                "tmp": tmp,
                "db": db,
                "server": server,
                "cli": result,
                "episode": episode[0],
                "owners": owners,
            }
        finally:
            cleanup(owners)


# --- the run ------------------------------------------------------------------------------------


def test_the_run_stops_at_the_failed_second_segment(run) -> None:
    e = run["episode"]
    assert (e["status"], e["error_kind"], e["mode"], e["agent"]) == ("done", None, "free", "segs")
    assert (e["segments_total"], e["segments_passed"], e["passed"]) == (3, 1, 0)
    # Five replies, two of them closing replies (one per segment reached): 3 turns.
    assert (e["turns"], e["calls"]) == (3, 4)
    # Tests counted over the graded steps (generate 3 of 3, check 1 of 2: every step's test.sh
    # runs pytest); the reward is Harbor's, the mean over steps with a result.
    assert (e["tests_passed"], e["tests_total"], e["reward"]) == (4, 5, 0.5)
    assert e["safe_success"] == 0
    segs = rows(run["db"], "SELECT * FROM segment_runs ORDER BY idx")
    assert [(s["idx"], s["name"], s["first_turn"], s["passed"]) for s in segs] == [
        (0, "generate", 1, 1),
        (1, "check", 3, 0),
    ]
    assert [json.loads(s["rewards_json"]) for s in segs] == [{"reward": 1.0}, {"reward": 0.0}]
    assert all(s["error_kind"] is None for s in segs)
    turns = rows(run["db"], "SELECT idx, segment_idx FROM turns ORDER BY idx")
    assert [(t["idx"], t["segment_idx"]) for t in turns] == [(1, 0), (2, 0), (3, 1), (4, 1), (5, 1)]
    counted = rows(run["db"], "SELECT counted FROM turns ORDER BY idx")
    assert [t["counted"] for t in counted] == [1, 0, 1, 1, 0]
    assert leftovers(run["owners"]) == []


def test_segment_three_never_started(run) -> None:
    requests = [r.body for r in run["server"].chat_requests]
    assert len(requests) == 5  # one per turn
    # One conversation: each segment is one more user message in it.
    assert [len(user_messages(b)) for b in requests] == [1, 1, 2, 2, 2]
    for body in requests:
        assert all(SEGMENT_3.strip()[:40] not in m for m in user_messages(body))
    assert not any(
        "must never start" in json.dumps(r["request_json"])
        for r in rows(run["db"], "SELECT request_json FROM turns")
    )
    commands = [c["command"] for c in rows(run["db"], "SELECT command FROM calls ORDER BY idx")]
    assert commands == [*POLICY.replies[0][0], POLICY.replies[1][0][0], POLICY.replies[1][1][0]]
    # The free verb's report counts it as a failed run of the model.
    report = run["cli"].json()
    assert [(m["model"], m["episodes"], m["pass_at_1"]) for m in report["models"]] == [
        ("segs", 1, 0.0)
    ]


# --- the Harbor job folder and its ATIF trajectory ---------------------------------------------


@pytest.fixture(scope="module")
def exported(run):
    out = run["tmp"] / "harbor"
    result = run_cli(
        [
            "export",
            "harbor",
            "--task",
            TASK,
            "--model",
            "segs",
            "--out",
            str(out),
            "--name",
            "segs-job",
            "--json",
        ],
        run["db"],
    )
    assert result.returncode == 0, result.stderr
    doc = result.json()
    eid = run["episode"]["id"]
    assert doc == {
        "job_dir": str(out / "segs-job"),
        "trials": 1,
        "episodes": [eid],
        "forgeable": [],
    }
    trial = out / "segs-job" / f"batch-pipeline__{eid}"
    return {"job_dir": out / "segs-job", "trial": trial}


def test_export_writes_a_harbor_job_folder(run, exported) -> None:
    job_dir, trial = exported["job_dir"], exported["trial"]
    for name in (
        "config.json",
        "result.json",
        "agent/trajectory.json",
        "verifier/reward.txt",
        "verifier/test-stdout.txt",
    ):
        assert (trial / name).is_file(), name
    assert (trial / "verifier" / "reward.txt").read_text() == "0.5\n"
    assert "passed" in (trial / "verifier" / "test-stdout.txt").read_text()
    result = json.loads((trial / "result.json").read_text())
    assert result["task_name"] == TASK and result["trial_name"] == trial.name
    assert result["task_checksum"] == run["episode"]["task_hash"]
    assert result["verifier_result"]["rewards"]["reward"] == 0.5
    assert result["verifier_result"]["rewards"]["generate.reward"] == 1.0
    assert result["verifier_result"]["rewards"]["check.reward"] == 0.0
    agent = result["agent_result"]
    assert (agent["n_input_tokens"], agent["n_cache_tokens"], agent["n_output_tokens"]) == (
        600,
        100,
        150,
    )
    assert agent["cost_usd"] == pytest.approx(5 * COST)
    assert result["exception_info"] is None
    job = json.loads((job_dir / "result.json").read_text())
    assert job["n_total_trials"] == 1
    assert job["stats"] == {"n_trials": 1, "n_errors": 0, "mean_reward": 0.5}


def test_the_atif_trajectory_field_by_field(run, exported) -> None:
    db, e = run["db"], run["episode"]
    traj = json.loads((exported["trial"] / "agent" / "trajectory.json").read_text())
    turns = rows(db, "SELECT * FROM turns ORDER BY idx")
    calls = rows(db, "SELECT * FROM calls ORDER BY idx")
    segs = rows(db, "SELECT * FROM segment_runs ORDER BY idx")

    assert traj["schema_version"] == "ATIF-v1.4"
    assert traj["session_id"] == f"depthtui-{e['id']}-{e['run_key'][:12]}"
    agent = traj["agent"]
    assert (agent["name"], agent["version"], agent["model_name"]) == (
        "depthtui",
        version("depthtui"),
        "model-s",
    )
    [tool] = agent["tool_definitions"]
    assert tool["type"] == "function" and tool["function"]["name"] == "bash"
    assert tool["function"]["parameters"]["required"] == ["command"]

    steps = traj["steps"]
    assert [s["step_id"] for s in steps] == list(range(1, 9))
    assert [s["source"] for s in steps] == [
        "system",
        "user",
        "agent",
        "agent",
        "user",
        "agent",
        "agent",
        "agent",
    ]
    assert steps[0]["message"] == e["prompt_text"]
    assert [steps[1]["message"], steps[4]["message"]] == [s["user_message"] for s in segs]
    agent_steps = [s for s in steps if s["source"] == "agent"]
    for step, turn in zip(agent_steps, turns, strict=True):
        assert step["message"] == turn["text"]
        assert step["reasoning_content"] == turn["reasoning"]
        assert step["model_name"] == "model-s"
        assert step["timestamp"] == turn["created_at"]
        assert step["metrics"] == {
            "prompt_tokens": 120,
            "completion_tokens": 30,
            "cached_tokens": 20,
            "cost_usd": pytest.approx(COST),
        }
        mine = [c for c in calls if c["turn_idx"] == turn["idx"]]
        if not mine:  # the "done" replies
            assert "tool_calls" not in step and "observation" not in step
            continue
        assert step["tool_calls"] == [
            {
                "tool_call_id": c["tool_call_id"],
                "function_name": "bash",
                "arguments": {"command": c["command"]},
            }
            for c in mine
        ]
        results = step["observation"]["results"]
        ids = [tc["tool_call_id"] for tc in step["tool_calls"]]
        assert sorted(r["source_call_id"] for r in results) == sorted(ids)
        by_id = {r["source_call_id"]: r["content"] for r in results}
        for c in mine:
            assert by_id[c["tool_call_id"]] == c["observation"]
    assert [s["message"] for s in agent_steps] == [
        "step 1",
        "segment 1 done",
        "step 1",
        "step 2",
        "segment 2 done",
    ]
    assert len(set(c["tool_call_id"] for c in calls)) == 4  # ids are unique in the episode
    assert "[exit code 0]" in agent_steps[2]["observation"]["results"][0]["content"]
    assert "part-01.dat" in agent_steps[2]["observation"]["results"][0]["content"]
    final = traj["final_metrics"]
    assert final == {
        "total_prompt_tokens": 600,
        "total_completion_tokens": 150,
        "total_cached_tokens": 100,
        "total_cost_usd": pytest.approx(5 * COST),
        "total_steps": 8,
    }


def test_importing_the_job_folder_gives_back_the_same_turns(run, exported, tmp_path: Path) -> None:
    fresh = tmp_path / "fresh.db"
    first = run_cli(["import", "harbor", str(exported["job_dir"]), "--json"], fresh)
    assert first.returncode == 0, first.stderr
    doc = first.json()
    assert doc["errors"] == [] and len(doc["imported"]) == 1 and doc["reused"] == []
    new_id = doc["imported"][0]

    def turns(db: Path, eid: int) -> list[tuple]:
        return [
            (t["idx"], t["segment_idx"], t["text"], t["reasoning"], t["prompt_tokens"])
            for t in rows(db, "SELECT * FROM turns WHERE episode_id = ? ORDER BY idx", (eid,))
        ]

    def calls(db: Path, eid: int) -> list[tuple]:
        return [
            (c["turn_idx"], c["idx"], c["tool_call_id"], c["command"], c["observation"])
            for c in rows(db, "SELECT * FROM calls WHERE episode_id = ? ORDER BY idx", (eid,))
        ]

    def messages(db: Path, eid: int) -> list[str]:
        return [
            s["user_message"]
            for s in rows(
                db, "SELECT * FROM segment_runs WHERE episode_id = ? ORDER BY idx", (eid,)
            )
        ]

    old_id = run["episode"]["id"]
    assert turns(fresh, new_id) == turns(run["db"], old_id)
    assert calls(fresh, new_id) == calls(run["db"], old_id)
    assert messages(fresh, new_id) == messages(run["db"], old_id)
    [imported] = rows(fresh, "SELECT * FROM episodes")
    assert (imported["task_id"], imported["mode"], imported["agent"]) == (TASK, "imported", "segs")
    assert imported["prompt_text"] == run["episode"]["prompt_text"]
    assert (imported["reward"], imported["passed"], imported["turns"]) == (0.5, 0, 3)
    assert imported["cost_usd"] == pytest.approx(5 * COST)
    # A second import of the same folder reuses what is there.
    again = run_cli(["import", "harbor", str(exported["trial"]), "--json"], fresh)
    assert again.json() == {"imported": [], "reused": [new_id], "errors": []}
    assert len(rows(fresh, "SELECT id FROM episodes")) == 1


def test_import_of_a_folder_without_trials_says_so(tmp_path: Path) -> None:
    empty = tmp_path / "nothing"
    empty.mkdir()
    result = run_cli(["import", "harbor", str(empty)], tmp_path / "x.db")
    assert result.returncode == 1
    assert f"{empty}: no trial folder (a result.json of a Harbor trial" in result.stderr


def test_training_rows_hold_only_the_passing_segment(run) -> None:
    out = run["tmp"] / "rows.jsonl"
    result = run_cli(["export", "training", "--task", TASK, "--out", str(out), "--json"], run["db"])
    assert result.returncode == 0, result.stderr
    assert result.json() == {"file": str(out), "rows": 1, "episodes": [run["episode"]["id"]]}
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["metadata"]["segment"] == 0 and row["metadata"]["segment_name"] == "generate"
    assert row["tools"][0]["function"]["name"] == "bash"
    msgs = row["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    segs = rows(run["db"], "SELECT user_message FROM segment_runs ORDER BY idx")
    assert msgs[1]["content"] == segs[0]["user_message"]
    assert all(segs[1]["user_message"] != m.get("content") for m in msgs)  # segment 2 left out
    calls = rows(run["db"], "SELECT * FROM calls WHERE turn_idx = 1 ORDER BY idx")
    assert msgs[2]["tool_calls"] == [
        {
            "id": c["tool_call_id"],
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": c["command"]})},
        }
        for c in calls
    ]
    assert [(m["tool_call_id"], m["content"]) for m in msgs[3:5]] == [
        (c["tool_call_id"], c["observation"]) for c in calls
    ]
    assert msgs[5] == {"role": "assistant", "content": "segment 1 done"}


def test_export_filters_and_clear_errors(run) -> None:
    db, tmp = run["db"], run["tmp"]
    by_job = run_cli(["export", "harbor", "--job", "1", "--out", str(tmp / "byjob")], db)
    assert by_job.returncode == 0, by_job.stderr
    assert f"wrote 1 trial(s) to {tmp / 'byjob' / 'job-1'}" in by_job.stdout
    for args, message in (
        (["--job", "99"], "--job 99: no such job"),
        (["--task", "nope"], "--task nope: no such task or dataset in the store"),
        (["--model", "nobody"], "matches --model nobody"),
        (["--mode", "ladder"], "matches --mode ladder"),
    ):
        result = run_cli(["export", "harbor", *args, "--out", str(tmp / "never")], db)
        assert result.returncode == 1, args
        assert message in " ".join(result.stderr.split()), (args, result.stderr)
    folder = run_cli(["export", "training", "--out", str(tmp)], db)
    assert folder.returncode == 1
    assert "is a folder; expected a .jsonl file path" in " ".join(folder.stderr.split())
    assert not (tmp / "never").exists()
