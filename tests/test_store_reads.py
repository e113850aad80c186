"""The store's small reads behind the CLI (doctor's counts, export's forgeable marks, a replay
job's rows, the TUI's check of a file) and the superseding of a finished run, on a real SQLite
file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from store import episodes as ep
from store.db import SCHEMA_VERSION, Store, schema_and_tables
from store.tasks import count_tasks


def _episode(store: Store, run_key: str, **more) -> int:
    spec = more.pop("spec_json", {})
    return ep.create_episode(
        store,
        run_key=run_key,
        task_id="demo/error-count",
        task_hash="abc",
        mode=more.pop("mode", "check"),
        agent="oracle",
        spec_json=spec,
        **more,
    )


def _calls(store: Store, episode_id: int, observations: list[str]) -> None:
    calls = [
        {"idx": i, "command": f"echo {i}", "observation": o}
        for i, o in enumerate(observations, start=1)
    ]
    ep.record_turn(store, episode_id, {"idx": 1, "text": "."}, calls)


def test_counts_and_forgeable_ids(db_path: Path) -> None:
    with Store(db_path) as store:
        assert (count_tasks(store), ep.count_episodes(store)) == (0, 0)
        a = _episode(store, "a")
        b = _episode(store, "b", forgeable=1)
        c = _episode(store, "c", forgeable=1)
        assert ep.count_episodes(store) == 3
        assert ep.forgeable_ids(store, [c, a, b]) == [b, c]
        assert ep.forgeable_ids(store, [a]) == []
        assert ep.forgeable_ids(store, []) == []


def test_the_latest_finished_replay_and_the_outputs_it_shares(db_path: Path) -> None:
    with Store(db_path) as store:
        original = _episode(store, "orig")
        _calls(store, original, ["one", "two", "three"])
        ep.finish_episode(store, original, passed=1)
        assert ep.latest_replay(store, original) is None
        older = _episode(store, "r1", mode="replay", spec_json={"replay_of": original})
        ep.finish_episode(store, older, passed=1)
        newer = _episode(store, "r2", mode="replay", spec_json={"replay_of": original})
        _calls(store, newer, ["one", "TWO", "three"])
        ep.finish_episode(store, newer, passed=0)
        running = _episode(store, "r3", mode="replay", spec_json={"replay_of": original})
        found = ep.latest_replay(store, original)
        assert found is not None and found["id"] == newer != running
        assert (found["passed"], found["original_passed"]) == (0, 1)
        assert (found["outcome"], found["original_outcome"]) == ("fail", "pass")
        assert found["task_id"] == "demo/error-count"
        assert ep.same_outputs(store, newer, original) == 2
        assert ep.same_outputs(store, older, original) == 0


def test_a_superseded_run_is_kept_but_no_longer_done(db_path: Path) -> None:
    with Store(db_path) as store:
        eid = _episode(store, "k")
        ep.finish_episode(store, eid, passed=1)
        assert ep.find_done(store, "k")["id"] == eid
        ep.supersede_episode(store, eid)
        assert ep.find_done(store, "k") is None
        assert ep.get_episode(store, eid)["status"] == "superseded"


def test_schema_and_tables_reads_a_file_without_writing(db_path: Path, tmp_path: Path) -> None:
    Store(db_path).close()
    version, tables = schema_and_tables(db_path)
    assert version == SCHEMA_VERSION and {"tasks", "episodes", "jobs"} <= tables
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE notes (x)")
    conn.commit()
    conn.close()
    assert schema_and_tables(other) == (0, {"notes"})
