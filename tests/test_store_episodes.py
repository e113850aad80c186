"""The episode recording API on a real SQLite file: what the engine writes turn by turn is what
a viewer reads back."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import episodes as ep
from store.db import Store, StoreError, open_reader


def new_episode(store: Store, run_key: str = "rk-1", **more) -> int:
    return ep.create_episode(
        store,
        run_key=run_key,
        task_id="demo/error-count",
        task_hash="abc",
        mode="free",
        agent="oracle",
        spec_json={"cap": None, "budget": 16},
        **more,
    )


def test_an_episode_recorded_turn_by_turn_reads_back(db_path: Path):
    big = ("x" * 2500 + "y" * 1500).encode()
    with Store(db_path) as store:
        eid = new_episode(store, cap=5)
        ep.add_segment_run(store, eid, 0, "Count the errors.\nYou have 5 turns.", name="main")
        ep.record_turn(
            store,
            eid,
            {"idx": 1, "text": "Let me look.", "prompt_tokens": 100, "completion_tokens": 20},
            [
                {"idx": 1, "command": "ls -la", "exit_code": 0, "observation": "total 0"},
                {"idx": 2, "command": "cat big.log", "exit_code": 0, "remaining_budget": 14},
            ],
            outputs={1: b"total 0\n", 2: big},
            events=[
                {
                    "call_idx": 2,
                    "path": "/home/user/notes.txt",
                    "kind": "content_changed",
                    "permitted": False,
                    "collateral": True,
                    "before_json": {"size": 3},
                    "diff": "-a\n+b\n",
                }
            ],
        )
        ep.record_turn(
            store,
            eid,
            {"idx": 2, "text": "Done.", "prompt_tokens": 150, "cost_usd": 0.01},
            [],
        )
        ep.finish_segment_run(store, eid, 0, passed=True, tests_passed=3, tests_total=3)
        ep.add_test_results(
            store,
            eid,
            [
                {"nodeid": "test_final_state.py::test_a", "outcome": "passed", "call": "passed"},
                {"nodeid": "test_final_state.py::test_b", "outcome": "failed", "message": "no"},
            ],
        )
        ep.set_fault_record(store, eid, family="perm_denied", target="/home/user/app.log")
        ep.set_fault_record(store, eid, cleared=True, observed_call=2)
        ep.add_oracle_events(
            store,
            eid,
            [{"call_idx": None, "path": "/home/user", "kind": "mode_changed", "permitted": True}],
        )
        ep.finish_episode(store, eid, passed=True, reward=0.75, end_reason="no_tool_call")

    reader = open_reader(db_path)
    try:
        row = ep.get_episode(reader, eid)
        assert row["status"] == "done" and row["finished_at"]
        assert (row["turns"], row["calls"]) == (2, 2)
        assert (row["prompt_tokens"], row["completion_tokens"]) == (250, 20)
        assert row["cost_usd"] == pytest.approx(0.01)
        assert (row["passed"], row["reward"], row["cap"]) == (1, 0.75, 5)
        assert row["spec_json"] == '{"cap": null, "budget": 16}'
        assert ep.find_done(reader, "rk-1")["id"] == eid
        assert ep.find_done(reader, "other") is None

        turns = ep.list_turns(reader, eid)
        assert [t["text"] for t in turns] == ["Let me look.", "Done."]
        calls = ep.list_calls(reader, eid)
        assert [c["command"] for c in calls] == ["ls -la", "cat big.log"]
        assert ep.list_calls(reader, eid, turn_idx=2) == []
        small, large = calls
        assert (small["output_head"], small["output_tail"], small["output_bytes"]) == (
            "total 0\n",
            "",
            8,
        )
        assert large["output_head"] == "x" * 2000
        assert large["output_tail"] == "y" * 1000
        assert large["output_bytes"] == 4000 and large["remaining_budget"] == 14
        assert ep.get_call_output(reader, large["id"]) == big
        assert ep.get_call_output(reader, 999) is None

        events = ep.list_events(reader, eid)
        assert [(e["call_idx"], e["kind"], e["collateral"]) for e in events] == [
            (2, "content_changed", 1),
            (None, "mode_changed", 0),
        ]
        assert events[0]["before_json"] == '{"size": 3}'
        (seg,) = ep.list_segment_runs(reader, eid)
        assert (seg["passed"], seg["tests_passed"], seg["user_message"]) == (
            1,
            3,
            "Count the errors.\nYou have 5 turns.",
        )
        results = ep.list_test_results(reader, eid)
        assert [(r["nodeid"], r["outcome"]) for r in results] == [
            ("test_final_state.py::test_a", "passed"),
            ("test_final_state.py::test_b", "failed"),
        ]
        fault = ep.get_fault_record(reader, eid)
        assert (fault["family"], fault["cleared"], fault["observed_call"]) == (
            "perm_denied",
            1,
            2,
        )
    finally:
        reader.close()


def test_a_finished_run_exists_once(db_path: Path):
    with Store(db_path) as store:
        first = new_episode(store)
        ep.finish_episode(store, first, passed=False)
        second = new_episode(store)  # a rerun may start; it cannot be finished as a second copy
        with pytest.raises(StoreError, match=f"already recorded as done \\(episode {first}\\)"):
            ep.finish_episode(store, second)
        assert ep.get_episode(store, second)["status"] == "running"
        ep.finish_episode(store, second, status="interrupted")
        assert ep.find_done(store, "rk-1")["id"] == first


def test_bad_rows_are_refused_whole(db_path: Path):
    with Store(db_path) as store:
        with pytest.raises(ValueError, match="missing run_key, agent"):
            ep.create_episode(store, task_id="t", task_hash="h", mode="free")
        eid = new_episode(store)
        with pytest.raises(ValueError, match=r"calls: unknown column\(s\) cmd; expected"):
            ep.record_turn(store, eid, {"idx": 1, "text": "hi"}, [{"idx": 1, "cmd": "ls"}])
        # The turn went with its broken call: nothing of it was kept.
        assert ep.list_turns(store, eid) == []
        assert ep.get_episode(store, eid)["turns"] == 0
        with pytest.raises(ValueError, match="turns: missing idx"):
            ep.record_turn(store, eid, {"text": "no index"}, [])
        with pytest.raises(ValueError, match="no row"):
            ep.finish_segment_run(store, eid, 7, passed=True)


def test_writers_inside_one_transaction_commit_with_it_and_undo_alone(db_path: Path):
    """A batch of writer calls in one Store.tx (how devtools/synthetic.py writes whole stores):
    a failing call undoes only its own rows, the rest commit when the outer transaction does,
    and a reader sees nothing before."""
    with Store(db_path) as store:
        with store.tx():
            eid = new_episode(store)
            ep.record_turn(store, eid, {"idx": 1, "text": "kept"}, [{"idx": 1, "command": "ls"}])
            with pytest.raises(ValueError, match=r"calls: unknown column\(s\) cmd"):
                ep.record_turn(store, eid, {"idx": 2, "text": "gone"}, [{"idx": 2, "cmd": "ls"}])
            assert open_reader(db_path).execute("SELECT count(*) FROM episodes").fetchone()[0] == 0
        assert [t["text"] for t in ep.list_turns(store, eid)] == ["kept"]
        assert ep.get_episode(store, eid)["turns"] == 1
        with pytest.raises(RuntimeError, match="abandoned"), store.tx():
            new_episode(store, run_key="rk-2")
            raise RuntimeError("abandoned")
        assert ep.find_done(store, "rk-2") is None
        assert [r[0] for r in store.query("SELECT run_key FROM episodes")] == ["rk-1"]


def test_a_column_added_after_the_first_write_is_accepted(db_path: Path):
    with Store(db_path) as store:
        new_episode(store)  # the episodes columns are read here, and kept
        with store.tx() as conn:
            conn.execute("ALTER TABLE episodes ADD COLUMN added_later TEXT")
        eid = new_episode(store, run_key="rk-2", added_later="seen")
        assert ep.get_episode(store, eid)["added_later"] == "seen"
