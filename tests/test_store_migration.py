"""A store written by an older depthtui (schema version 1: no search index yet) is upgraded in
place when opened: its rows survive and become searchable."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from engine.tasks.loader import load_task
from store import episodes as ep
from store import tasks as task_store
from store.db import Store, StoreError, migrate_to, open_reader
from store.schema import SCHEMA_VERSION
from store.search import search
from tests.conftest import ROOT

TASK = ROOT / "tests" / "fixtures" / "tasks" / "formats" / "harbor-steps"


def test_version_1_file_is_upgraded_and_keeps_its_rows(db_path: Path):
    old = Store(db_path, migrate=False)
    migrate_to(old, 1)
    assert old.version == 1
    assert not old.query("SELECT name FROM sqlite_master WHERE name = 'search'")
    task_store.upsert_task(old, load_task(TASK))
    eid = ep.create_episode(
        old,
        run_key="old-run",
        task_id="formats/harbor-steps",
        task_hash="h",
        mode="free",
        agent="oracle",
    )
    ep.record_turn(
        old,
        eid,
        {"idx": 1, "text": "Cleaning the scratch folder first."},
        [{"idx": 1, "command": "rm -rf /tmp/x && echo 'gone'", "exit_code": 0}],
        outputs={1: b"gone\n"},
    )
    ep.finish_episode(old, eid, passed=True)
    old.close()

    reader = open_reader(db_path)  # a viewer may read the old file before anyone upgrades it
    assert reader.execute("PRAGMA user_version").fetchone()[0] == 1
    reader.close()

    with Store(db_path) as store:
        assert store.version == SCHEMA_VERSION
        assert [t["id"] for t in task_store.list_tasks(store)] == ["formats/harbor-steps"]
        assert task_store.get_task(store, "harbor-steps")["segments"] == 3
        assert ep.find_done(store, "old-run")["id"] == eid
        assert ep.get_call_output(store, ep.list_calls(store, eid)[0]["id"]) == b"gone\n"
        # Rows written before the search index existed are found...
        assert {(r["kind"], r["episode_id"]) for r in search(store, "rm -rf /tmp/x")} == {
            ("call", eid)
        }
        assert {r["kind"] for r in search(store, "scratch folder")} == {"turn"}
        # ...and rows written after it are indexed by the triggers.
        ep.record_turn(
            store,
            eid,
            {"idx": 2, "text": "Now the archive."},
            [{"idx": 2, "command": "tar -czf out.tgz data/", "exit_code": 0}],
        )
        assert {r["turn_idx"] for r in search(store, "tar -czf")} == {2}

    with Store(db_path) as again:  # opening an up-to-date file changes nothing
        assert again.version == SCHEMA_VERSION
        assert len(search(again, "rm -rf")) == 1


def test_a_file_from_a_newer_depthtui_is_refused(db_path: Path):
    with Store(db_path):
        pass
    conn = sqlite3.connect(db_path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreError, match="newer than this depthtui knows"):
        Store(db_path)
    with pytest.raises(StoreError, match="newer than this depthtui knows"):
        open_reader(db_path)


def test_processes_opening_a_new_store_at_once_migrate_it_once(tmp_path):
    import subprocess
    import sys
    import time

    from store.schema import SCHEMA_VERSION

    path = tmp_path / "new.db"
    # Every process imports first, then opens the file at the same moment.
    code = (
        "import sys, time; from store.db import Store; "
        "time.sleep(max(0.0, float(sys.argv[2]) - time.time())); "
        "s = Store(sys.argv[1]); print(s.version); s.close()"
    )
    start = str(time.time() + 2.0)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(path), start],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
        assert out.strip() == str(SCHEMA_VERSION)


def test_version_2_file_counts_turns_without_the_closing_reply(db_path: Path):
    """Before V4_TURNS every reply counted: two command replies and a closing one were stored as
    3 turns. The upgrade marks the closing reply and counts 2 (docs/work-and-turns.md)."""
    old = Store(db_path, migrate=False)
    migrate_to(old, 2)
    task_store.upsert_task(old, load_task(TASK))
    eid = ep.create_episode(
        old, run_key="r", task_id="formats/harbor-steps", task_hash="h", mode="free", agent="m"
    )
    ep.record_turn(old, eid, {"idx": 1}, [{"idx": 1, "command": "ls"}])
    ep.record_turn(old, eid, {"idx": 2, "format_error": "not valid JSON"}, [])
    ep.record_turn(old, eid, {"idx": 3, "text": "done"}, [])
    ep.finish_episode(old, eid, passed=True)
    assert old.query("SELECT turns FROM episodes WHERE id = ?", (eid,))[0]["turns"] == 3
    old.close()

    with Store(db_path) as store:
        assert store.version == SCHEMA_VERSION
        counted = store.query(
            "SELECT idx, counted FROM turns WHERE episode_id = ? ORDER BY idx", (eid,)
        )
        # The malformed reply still counts; only the closing reply does not.
        assert [(r["idx"], r["counted"]) for r in counted] == [(1, 1), (2, 1), (3, 0)]
        assert store.query("SELECT turns FROM episodes WHERE id = ?", (eid,))[0]["turns"] == 2
        # New rows: the closing reply adds no turn.
        eid2 = ep.create_episode(
            store,
            run_key="s",
            task_id="formats/harbor-steps",
            task_hash="h",
            mode="free",
            agent="m",
        )
        ep.record_turn(store, eid2, {"idx": 1}, [{"idx": 1, "command": "ls"}])
        ep.record_turn(store, eid2, {"idx": 2, "text": "done", "counted": 0}, [])
        assert store.query("SELECT turns FROM episodes WHERE id = ?", (eid2,))[0]["turns"] == 1


def test_fault_episodes_written_before_get_their_target_from_the_fault_record(db_path: Path):
    from store.schema import MIGRATIONS, V_ROUNDTRIP

    old = Store(db_path, migrate=False)
    migrate_to(old, MIGRATIONS.index(V_ROUNDTRIP))  # the version just before it
    task_store.upsert_task(old, load_task(TASK))
    ids = {}
    for family in ("clean", "perm_denied"):
        ids[family] = ep.create_episode(
            old,
            run_key=f"old-{family}",
            task_id="formats/harbor-steps",
            task_hash="h",
            mode="episodes",
            agent="oracle",
            fault_family=family,
        )
    ep.set_fault_record(old, ids["perm_denied"], family="perm_denied", target="/home/user/in")
    old.close()
    with Store(db_path) as store:
        assert store.version == SCHEMA_VERSION
        got = {
            r["fault_family"]: r["fault_target"]
            for r in store.query("SELECT fault_family, fault_target FROM episodes")
        }
        assert got == {"clean": None, "perm_denied": "/home/user/in"}
