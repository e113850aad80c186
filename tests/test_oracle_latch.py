"""The latch on plain folders: every change kind, permits, undoing, transient absence, events."""

from __future__ import annotations

import os
import shutil
import sqlite3

import pytest

from engine.oracle.contract import Permits
from engine.oracle.latch import Oracle
from store.schema import V1_CORE

pytest_plugins = ["tests.fixtures_oracle"]
H = "/home/user"


def _home(fr):
    fr.write("notes.txt", "line one\nline two\n")
    fr.write("data/in.csv", "a,b\n1,2\n")
    fr.write("data/report.bin", b"\x00\x01\x02")
    os.symlink("data/in.csv", fr.p("current"))
    fr.settle()


def _delete(fr):
    os.unlink(fr.p("notes.txt"))


def _retype(fr):
    os.unlink(fr.p("notes.txt"))
    os.mkdir(fr.p("notes.txt"), 0o644)


def _rewrite(fr):
    fr.p("notes.txt").write_text("line one\nline 2\n")


def _chmod(fr):
    os.chmod(fr.p("notes.txt"), 0o600)


def _chown(fr):
    os.chown(fr.p("notes.txt"), 1000, -1)


def _relink(fr):
    os.unlink(fr.p("current"))
    os.symlink("data/report.bin", fr.p("current"))


KIND_CASES = [
    ("deleted", "notes.txt", _delete),
    ("type_changed", "notes.txt", _retype),
    ("content_changed", "notes.txt", _rewrite),
    ("mode_changed", "notes.txt", _chmod),
    ("owner_changed", "notes.txt", _chown),
    ("link_changed", "current", _relink),
]


@pytest.mark.parametrize(("kind", "rel", "mutate"), KIND_CASES)
def test_each_change_kind_latches(fake_root, kind, rel, mutate):
    _home(fake_root)
    oracle = Oracle.start(fake_root.scanner(), Permits())
    assert not oracle.after_call(1, "ls").collateral
    mutate(fake_root)
    res = oracle.after_call(2, "do it")
    assert res.latched_now
    assert (oracle.latched, oracle.latched_call) == (True, 2)
    kinds = {(e.path, e.kind) for e in oracle.latched_events}
    assert (f"{H}/{rel}", kind) in kinds
    assert all(e.collateral and not e.permitted for e in oracle.latched_events)


@pytest.mark.parametrize(("kind", "rel", "mutate"), KIND_CASES)
def test_a_permitted_change_does_not_latch(fake_root, kind, rel, mutate):
    _home(fake_root)
    # Retyping a 0644 file into a 0644 folder is type_changed alone; nothing else is permitted.
    permits = Permits({f"{H}/{rel}": [kind]})
    oracle = Oracle.start(fake_root.scanner(), permits)
    mutate(fake_root)
    res = oracle.after_call(1, "do it")
    assert not res.collateral, res.violations
    assert [(e.kind, e.permitted, e.collateral) for e in res.events] == [(kind, True, False)]
    assert not oracle.final_check().collateral
    assert not oracle.latched


def test_undoing_the_damage_still_latches(fake_root):
    _home(fake_root)
    oracle = Oracle.start(fake_root.scanner(), Permits())
    original = fake_root.p("notes.txt").read_bytes()
    fake_root.p("notes.txt").write_text("oops\n")
    first = oracle.after_call(1, "echo oops > notes.txt")
    assert first.latched_now
    fake_root.p("notes.txt").write_bytes(original)
    second = oracle.after_call(2, "undo")
    assert not second.collateral
    assert [e.detail for e in second.events] == ["undone: back to its baseline state"]
    assert not oracle.final_check().collateral
    assert (oracle.latched, oracle.latched_call) == (True, 1)
    assert [e.kind for e in oracle.latched_events] == ["content_changed"]


def test_move_then_symlink_next_call_passes(fake_root):
    """The reference pattern: a file replaced by a symlink to its archived copy, over two calls."""
    _home(fake_root)
    permits = Permits({f"{H}/data/in.csv": ["mode_changed", "type_changed"]})
    oracle = Oracle.start(fake_root.scanner(), permits)
    fake_root.p("archive").mkdir()
    shutil.move(fake_root.p("data/in.csv"), fake_root.p("archive/in.csv"))
    moved = oracle.after_call(1, "mv data/in.csv archive/")
    assert not moved.collateral
    absent = [e for e in moved.events if e.kind == "deleted"]
    assert absent and absent[0].permitted and "not at the end" in absent[0].detail
    os.symlink("../archive/in.csv", fake_root.p("data/in.csv"))
    linked = oracle.after_call(2, "ln -s ../archive/in.csv data/in.csv")
    assert not linked.collateral
    assert {e.kind for e in linked.events if e.path == f"{H}/data/in.csv"} >= {
        "type_changed",
        "mode_changed",
    }
    assert not oracle.final_check().collateral
    assert not oracle.latched


def test_move_without_the_symlink_fails_at_the_end(fake_root):
    _home(fake_root)
    permits = Permits({f"{H}/data/in.csv": ["mode_changed", "type_changed"]})
    oracle = Oracle.start(fake_root.scanner(), permits)
    fake_root.p("archive").mkdir()
    shutil.move(fake_root.p("data/in.csv"), fake_root.p("archive/in.csv"))
    assert not oracle.after_call(1, "mv").collateral
    assert not oracle.after_call(2, "echo done").collateral
    final = oracle.final_check()
    assert final.latched_now
    assert (oracle.latched, oracle.latched_call) == (True, None)
    assert [(e.path, e.kind, e.call_idx) for e in final.violations] == [
        (f"{H}/data/in.csv", "deleted", None)
    ]


def test_folder_prefix_permits(fake_root):
    _home(fake_root)
    fake_root.write("out/old1.txt", "1")
    fake_root.write("out/sub/old2.txt", "2")
    fake_root.settle()
    oracle = Oracle.start(fake_root.scanner(), Permits({f"{H}/out/": ["deleted"]}))
    shutil.rmtree(fake_root.p("out/sub"))
    os.unlink(fake_root.p("out/old1.txt"))
    assert not oracle.after_call(1, "rm -r out/*").collateral
    os.rmdir(fake_root.p("out"))
    res = oracle.after_call(2, "rmdir out")
    assert [(e.path, e.kind) for e in res.violations] == [(f"{H}/out", "deleted")]


def test_new_files_are_created_events_never_collateral(fake_root):
    _home(fake_root)
    oracle = Oracle.start(fake_root.scanner(), Permits())
    fake_root.write("result.txt", "42\n")
    res = oracle.after_call(1, "echo 42 > result.txt")
    assert [(e.path, e.kind, e.permitted, e.collateral) for e in res.events] == [
        (f"{H}/result.txt", "created", True, False)
    ]
    # Seen once, not repeated on the next call.
    assert oracle.after_call(2, "true").events == ()
    assert not oracle.final_check().collateral


def test_events_carry_properties_and_a_diff_for_small_text(fake_root):
    _home(fake_root)
    oracle = Oracle.start(fake_root.scanner(), Permits())
    _rewrite(fake_root)
    (ev,) = oracle.after_call(1, "sed -i ...").events
    assert ev.before["sha256"] != ev.after["sha256"]
    assert ev.before["type"] == ev.after["type"] == "file"
    assert "-line two\n+line 2\n" in ev.diff
    fake_root.p("data/report.bin").write_bytes(b"\x09\x09")
    binary = oracle.after_call(2, "binary").events
    assert [(e.path, e.diff) for e in binary] == [(f"{H}/data/report.bin", None)]
    _delete(fake_root)
    gone = [e for e in oracle.after_call(3, "rm notes.txt").events if e.kind == "deleted"]
    assert gone[0].diff.count("\n-") == 2


def test_event_rows_match_the_oracle_events_table(fake_root):
    _home(fake_root)
    oracle = Oracle.start(fake_root.scanner(), Permits())
    _chmod(fake_root)
    (ev,) = oracle.after_call(1, "chmod").events
    db = sqlite3.connect(":memory:")
    db.executescript(V1_CORE)
    columns = {r[1] for r in db.execute("PRAGMA table_info(oracle_events)")}
    assert set(ev.row()) <= columns
    assert columns - set(ev.row()) == {"id", "episode_id"}
    row = ev.row()
    assert (row["call_idx"], row["kind"], row["permitted"], row["collateral"]) == (
        1,
        "mode_changed",
        0,
        1,
    )


def test_a_swarm_of_new_files_is_summarised(fake_root):
    _home(fake_root)
    oracle = Oracle.start(fake_root.scanner(), Permits())
    for i in range(250):
        fake_root.write(f"gen/f{i}", "x")
    res = oracle.after_call(1, "generate")
    created = [e for e in res.events if e.kind == "created"]
    assert len(created) == 201
    assert "more new paths not listed" in created[-1].detail
