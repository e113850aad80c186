"""The built-in agents (oracle, nop, replay) through the same loop as a chat model."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.agents.builtin import (
    NopAgent,
    OracleAgent,
    ReplayAgent,
    ReplayTurn,
    replay_turns,
)
from engine.agents.loop import Conversation, EpisodeLimits, Hooks, run_segment
from engine.agents.make import make_agent
from engine.agents.registry import builtin_models
from engine.tasks.model import Environment, Limits, Segment, Task
from store import episodes
from store.db import Store
from tests.fixtures_agents import FakeSandbox

BUILTIN = builtin_models()


def _episode(agent, segments, limits=EpisodeLimits()):
    sandbox = FakeSandbox()
    conv = Conversation.start(agent, "system prompt")
    turns, ends = [], []
    for i, message in enumerate(segments):
        ends.append(
            run_segment(
                agent, sandbox, conv, message, limits, Hooks(on_turn=turns.append), segment_idx=i
            )
        )
    return sandbox, turns, ends


def test_nop_finishes_at_once():
    sandbox, turns, ends = _episode(NopAgent(), ["Task."])
    # Its one reply is a closing reply: recorded, not a turn.
    assert ends[0].reason == "no_tool_call" and (ends[0].turns, ends[0].calls) == (0, 0)
    assert sandbox.ran == [] and turns[0].calls == ()


def test_oracle_runs_solve_sh_once_per_segment_then_finishes():
    oracle = OracleAgent(solution_env=[{}, {"MODE": "fast run"}], timeout_s=[120.0, None])
    sandbox, turns, ends = _episode(oracle, ["Part one.", "Part two."])
    assert [e.reason for e in ends] == ["no_tool_call", "no_tool_call"]
    # Per segment one turn (solve.sh) and a closing reply, which is not counted.
    assert [(e.turns, e.calls) for e in ends] == [(1, 1), (1, 1)]
    assert sandbox.ran == [
        ("DEBIAN_FRONTEND=noninteractive bash /solution/solve.sh", 120.0),
        ("DEBIAN_FRONTEND=noninteractive MODE='fast run' bash /solution/solve.sh", 30.0),
    ]
    assert [t.idx for t in turns] == [1, 2, 3, 4]
    assert turns[0].calls[0].tool_call_id == "call_1"
    assert turns[2].calls[0].tool_call_id == "call_2"


def test_oracle_for_task_takes_each_segments_env_and_time_limit(tmp_path: Path):
    seg = Segment(
        name="main",
        instruction="do it",
        tests={},
        solution_script="echo hi\n",
        solution_dir=tmp_path,
        agent_timeout_sec=900.0,
        solution_env={"A": "1"},
    )
    task = Task(
        id="t",
        dataset="d",
        format="harbor",
        source_path=tmp_path,
        content_hash="h",
        segments=(seg,),
        environment=Environment(context_dir=None, dockerfile=None, image="x"),
        limits=Limits(),
        verifier_kind="harbor",
    )
    oracle = make_agent(BUILTIN["oracle"], task=task)
    assert isinstance(oracle, OracleAgent)
    sandbox, _, _ = _episode(oracle, ["Task."])
    assert sandbox.ran == [("DEBIAN_FRONTEND=noninteractive A=1 bash /solution/solve.sh", 900.0)]


def test_oracle_refuses_a_bad_env_name():
    with pytest.raises(ValueError, match="not a variable name"):
        OracleAgent(solution_env=[{"A B": "1"}])


def test_replay_reissues_each_segments_turns_and_skips_empty_ones():
    stored = [
        ReplayTurn(0, ("ls", "cat a"), 1),
        ReplayTurn(0, (), 2),  # a format error: nothing ran
        ReplayTurn(0, ("echo x > b",), 3),
        ReplayTurn(1, ("wc -l b",), 5),
    ]
    sandbox, turns, ends = _episode(ReplayAgent(stored), ["One.", "Two."])
    assert [c for c, _ in sandbox.ran] == ["ls", "cat a", "echo x > b", "wc -l b"]
    # Turns with commands only; each segment's closing reply is recorded but not counted.
    assert [(e.turns, e.calls) for e in ends] == [(2, 3), (1, 1)]
    assert [len(t.calls) for t in turns] == [2, 1, 0, 1, 0]


def test_replay_from_a_stored_episode(db_path: Path):
    """Record an episode in a real store, read its turns back, replay them, compare outputs."""
    original = ReplayAgent([ReplayTurn(0, ("ls", "pwd"), 1), ReplayTurn(0, ("whoami",), 2)])
    store = Store(db_path)
    eid = episodes.create_episode(
        store, run_key="k", task_id="t", task_hash="h", mode="free", agent="x"
    )
    sandbox = FakeSandbox()
    conv = Conversation.start(original, "")

    def on_turn(turn):
        episodes.record_turn(store, eid, turn.row(), turn.call_rows(), turn.outputs())

    limits = EpisodeLimits(command_budget=2)
    run_segment(original, sandbox, conv, "Task.", limits, Hooks(on_turn=on_turn))
    stored_calls = episodes.list_calls(store, eid)
    assert [c["not_run"] for c in stored_calls] == [0, 0, 1]  # whoami was over the budget

    turns = replay_turns(episodes.list_turns(store, eid), stored_calls)
    assert turns == [ReplayTurn(0, ("ls", "pwd"), 1), ReplayTurn(0, (), 2)]
    _, replayed, _ = _episode(make_agent(BUILTIN["replay"], replay=turns), ["Task."])
    first_run = [c["observation"].split(";")[0] for c in stored_calls if not c["not_run"]]
    again = [c.observation for t in replayed for c in t.calls]
    assert again == first_run
    store.conn.close()


def test_replay_needs_its_turns():
    with pytest.raises(ValueError, match="stored turns"):
        make_agent(BUILTIN["replay"])
