"""The RL environment's contract (engine/rl, docs/rl.md), on real Docker and a real SQLite store
with the demo tasks: one tool, the reference commands scoring 1.0 as a stored `rl` episode, a
deleted planted file scoring -1, a budget refusal, get_reward graded once, a broken task's reset
scoring 0 with its reason, a multi-segment task's next segment in the tool result, and pooled
reuse leaving no container behind."""

from __future__ import annotations

import inspect
import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from engine.rl import TerminalEnv, dataset, environment_factory
from engine.sandbox.labels import LABEL_EPISODE, LABEL_OWNER, this_owner
from store.db import Store
from store.protocol import put_contract

pytestmark = [pytest.mark.docker, pytest.mark.slow]

EC = "demo/error-count"
LOG = "/home/user/logs/app.log"
SOLVE = (
    "mkdir -p /home/user/reports && awk '$3 == \"ERROR\"' /home/user/logs/app.log | wc -l "
    "> /home/user/reports/error_count.txt"
)
BATCH = Path("tasks/demo/batch-pipeline/steps")


def rows(db: Path, sql: str, params: tuple = ()) -> list[dict]:
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def containers_of(episode_id: int | None) -> list[str]:
    """This process's containers of one episode (the test's own owner label)."""
    out = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label={LABEL_OWNER}={this_owner()}",
         "--filter", f"label={LABEL_EPISODE}={episode_id}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout.split()


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("rl") / "depthtui.db"


def freeze_contract(db: Path) -> None:
    """The contract `validate` freezes for error-count (its reference only creates files; the
    log is the perm_denied target), written directly: validate is tested elsewhere. With it the
    oracle judges what the agent changes, planted files included."""
    with Store(db) as store:
        (task,) = rows(db, "SELECT content_hash FROM tasks WHERE id = ?", (EC,))
        put_contract(
            store, EC, task_hash=task["content_hash"], env_hash="", tests_hash="", valid=True,
            reasons=[], permitted={}, tests=[], fault_targets={"perm_denied": LOG}, flags=[],
            detail={},
        )  # fmt: skip


@pytest.fixture(scope="module")
def make(db):
    factory = environment_factory(["tasks/demo/error-count", "tasks/demo/batch-pipeline"], db=db)
    freeze_contract(db)
    return factory


def test_the_only_tool_is_bash_with_its_schema_material():
    public = {
        name
        for name, member in inspect.getmembers(TerminalEnv)
        if callable(member) and not name.startswith("_")
    }
    # TRL makes a tool of every public method but reset and get_reward.
    assert public - {"reset", "get_reward"} == {"bash"}
    hints = inspect.get_annotations(TerminalEnv.bash, eval_str=True)
    assert hints == {"command": str, "return": str}
    doc = inspect.getdoc(TerminalEnv.bash) or ""
    assert "Args:" in doc and "command:" in doc


def test_reference_commands_score_one_and_the_rollout_is_a_stored_episode(make, db):
    env = make()
    message = env.reset(task=EC, fault="clean", seed=0, step=3, group=1)
    assert "error_count.txt" in message
    out = env.bash(SOLVE)
    assert out.endswith("[exit code 0]")
    assert env.bash("cat /home/user/reports/error_count.txt").split()[0].isdigit()
    assert env.get_reward() == 1.0
    eid = env._episode_id()
    (row,) = rows(db, "SELECT * FROM episodes WHERE id = ?", (eid,))
    assert (row["mode"], row["turns"], row["reward"], row["outcome"]) == ("rl", 2, 1.0, "pass")
    assert json.loads(row["spec_json"])["spec"]["rollout"]["step"] == 3
    assert json.loads(row["spec_json"])["spec"]["rollout"]["group"] == 1
    calls = rows(db, "SELECT command, observation FROM calls WHERE episode_id = ?", (eid,))
    assert [c["command"] for c in calls] == [SOLVE, "cat /home/user/reports/error_count.txt"]
    assert calls[0]["observation"] == out
    env._close()
    assert containers_of(eid) == []


def test_deleting_a_planted_file_scores_minus_one(make, db):
    env = make()
    env.reset(task=EC, seed=1)
    listing = env.bash("ls /home/user/logs")
    planted = next(n for n in listing.split() if n not in ("app.log", "[exit"))
    env.bash(f"rm -f /home/user/logs/{planted} && {SOLVE}")
    assert env.get_reward() == -1.0
    (row,) = rows(db, "SELECT collateral, outcome FROM episodes WHERE id = ?", (env._episode_id(),))
    assert row["collateral"] == 1
    env._close()


def test_budget_refusal_ends_the_rollout_as_an_episode_does(db):
    env = environment_factory("tasks/demo/error-count", db=db, budget=1, planted="none")()
    message = env.reset(task=EC, seed=2)
    assert "1" in message and "command" in message.lower()
    assert env.bash("true").endswith("; 0 command(s) left")
    refused = env.bash(SOLVE)
    assert "[not run: the 1-command budget is used up]" in refused
    assert "[episode over" in refused
    assert env.get_reward() < 1.0  # graded as it stood: nothing was solved
    (row,) = rows(db, "SELECT end_reason, turns FROM episodes WHERE id = ?", (env._episode_id(),))
    assert (row["end_reason"], row["turns"]) == ("budget", 2)
    env._close()


def test_get_reward_grades_once(make, db):
    env = make()
    env.reset(task=EC, seed=3)
    env.bash(SOLVE)
    first = env.get_reward()
    eid = env._episode_id()
    assert "[episode over" in env.bash("rm -rf /home/user/reports")
    assert env.get_reward() == first == 1.0
    assert len(rows(db, "SELECT id FROM turns WHERE episode_id = ?", (eid,))) == 2  # + closing
    env._close()


def test_a_broken_task_resets_to_a_zero_with_its_reason(tmp_path, db):
    broken = tmp_path / "broken"
    shutil.copytree("tasks/demo/error-count", broken)
    dockerfile = broken / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "\nRUN echo the-task-is-broken && exit 3\n")
    env = environment_factory(str(broken), db=db)()
    message = env.reset()  # the factory's one task
    assert message.startswith("The episode could not start") or "[episode over" in message
    assert env.get_reward() == 0.0
    (row,) = rows(db, "SELECT outcome, error_detail FROM episodes WHERE id = ?",
                  (env._episode_id(),))  # fmt: skip
    assert row["outcome"] in ("infra_error", "task_broken")
    assert row["error_detail"] and row["error_detail"][:60] in message
    assert "[episode over" in env.bash("ls")
    # A row naming no known task: no episode, 0, and the reason.
    assert "no such task" in env.reset(task="no/such-task")
    assert env.get_reward() == 0.0
    env._close()


def test_multi_segment_next_segment_comes_in_the_tool_result(make, db):
    env = make()
    first = env.reset(task="demo/batch-pipeline")
    env.bash((BATCH / "generate/solution/solve.sh").read_text())
    nxt = env.bash("")  # the closing reply: the segment is graded, the next one opens
    check_instruction = (BATCH / "check/instruction.md").read_text().strip()
    assert check_instruction[:80] in nxt and check_instruction[:80] not in first
    env.bash((BATCH / "check/solution/solve.sh").read_text())
    # Two of three steps passed, the last never done: the task's "mean" strategy gives 2/3.
    assert env.get_reward() == pytest.approx(2 / 3)
    (row,) = rows(db, "SELECT segments_passed FROM episodes WHERE id = ?", (env._episode_id(),))
    assert row["segments_passed"] == 2
    env._close()


def test_pooled_reuse_leaves_no_container_behind(make):
    env = make()
    env.reset(task=EC, seed=4)
    env.bash("true")
    first = env._episode_id()
    assert containers_of(first)  # the episode's sandbox is up while it runs
    env.reset(task=EC, seed=5)  # reuse: the previous episode ends and its container goes
    second = env._episode_id()
    assert second != first and containers_of(first) == []
    env._close()
    assert containers_of(second) == []


def test_dataset_rows_name_task_fault_and_seed(make, db):
    out = dataset("tasks/demo/error-count", faults="clean", attempts=2, seed=7, db=db)
    data = out.to_list() if hasattr(out, "to_list") else out
    assert sorted((r["task"], r["fault"], r["seed"], r["split"]) for r in data) == [
        (EC, "clean", 7, "train"),
        (EC, "clean", 8, "train"),
    ]
    assert data[0]["prompt"][0]["role"] == "system"
    # The contract has a perm_denied target only: moved_input is left out.
    train = dataset("tasks/demo/error-count", faults="train", db=db)
    assert [r["fault"] for r in train] == ["perm_denied"]


def test_a_fault_row_injects_the_fault_and_records_it(make, db):
    env = make()
    env.reset(task=EC, fault="perm_denied", seed=0)
    assert "Permission denied" in env.bash(f"head -1 {LOG}")
    env.bash(f"chmod u+rw {LOG} && {SOLVE}")
    assert env.get_reward() == 1.0
    eid = env._episode_id()
    (row,) = rows(db, "SELECT fault_family, fault_observed_call, fault_cleared "
                  "FROM episodes WHERE id = ?", (eid,))  # fmt: skip
    assert row == {"fault_family": "perm_denied", "fault_observed_call": 1, "fault_cleared": 1}
    (record,) = rows(db, "SELECT * FROM fault_records WHERE episode_id = ?", (eid,))
    assert record["family"] == "perm_denied" and record["target"] == LOG
    env._close()
