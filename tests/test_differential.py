"""Differential grading's expected-differences rule (store/differential.py, docs/verifier.md),
and the false-positive queue it feeds, on a real SQLite store."""

from __future__ import annotations

import json
from pathlib import Path

from store import differential as d
from store import protocol as sp
from store import triage
from store.db import Store, now

OUT = "/home/user/out.txt"


def rec(text: str) -> dict:
    return {"sha256": str(hash(text)), "size": len(text), "text": text}


def test_the_rule_comes_from_the_two_reference_runs() -> None:
    assert d.rule_from_runs(rec("a\nb\n"), rec("a\nb")) == d.EXACT  # a final newline is noise
    assert d.rule_from_runs(rec("a\nb\n"), rec("b\na\n")) == d.ORDER_FREE
    assert d.rule_from_runs(rec("at 10:01\n"), rec("at 10:02\n")) == d.VOLATILE
    assert d.rule_from_runs(rec("a\n"), None) == d.VOLATILE


def test_compare_follows_each_rule() -> None:
    exact = {OUT: {**rec("1\n4\n9\n"), "rule": d.EXACT, "created": True}}
    assert d.compare(exact, {OUT: rec("1  \r\n4\n9\n\n")}, {OUT: ["created"]}) == []
    (why,) = d.compare(exact, {OUT: rec("1\n5\n9\n")}, {OUT: ["created"]})
    assert why == f"differential: {OUT} differs from the reference's (-4 +5)"
    # Reordered lines differ under `exact` but not under `order_free`.
    assert d.compare(exact, {OUT: rec("9\n4\n1\n")}, {})
    free = {OUT: {**exact[OUT], "rule": d.ORDER_FREE}}
    assert d.compare(free, {OUT: rec("9\n4\n1\n")}, {}) == []
    assert "holds other lines" in d.compare(free, {OUT: rec("9\n4\n4\n")}, {})[0]
    # Volatile: only existence counts.
    vol = {OUT: {**exact[OUT], "rule": d.VOLATILE}}
    assert d.compare(vol, {OUT: rec("anything")}, {}) == []
    assert "missing" in d.compare(vol, {OUT: {"absent": True}}, {})[0]
    # Not touched by the run: missing where the reference created it, the task's own where the
    # reference changed it; touched but not recorded (past the bound): not judged.
    assert "missing" in d.compare(exact, {}, {})[0]
    changed = {OUT: {**exact[OUT], "created": False}}
    assert "left as the task had it" in d.compare(changed, {}, {})[0]
    assert d.compare(exact, {}, {OUT: ["content_changed"]}) == []
    # Binary or large files are compared by hash.
    big = {OUT: {"sha256": "aa", "size": 10**6, "rule": d.EXACT}}
    assert d.compare(big, {OUT: {"sha256": "aa", "size": 10**6}}, {}) == []
    assert "sha256" in d.compare(big, {OUT: {"sha256": "bb", "size": 10**6}}, {})[0]
    # A symlink where the reference left a file differs, whatever it points at.
    link = {"type": "symlink", "sha256": None, "target": "/tests/expected.txt"}
    assert d.compare(exact, {OUT: link}, {}) == [
        f"differential: {OUT} is a symlink to /tests/expected.txt; the reference left a file"
    ]
    assert d.compare({OUT: {**link, "rule": d.VOLATILE}}, {OUT: link}, {}) == []


def test_short_diff_is_bounded() -> None:
    many = d.short_diff("\n".join(map(str, range(20))), "\n".join(f"x{i}" for i in range(20)))
    assert many.startswith("-0 +x0 | -1 +x1 | ") and "(+16 more changed lines)" in many
    assert d.short_diff("a\nb\n", "a\n") == "-b"
    assert len(d.short_diff("a" * 500, "b" * 500)) < 2 * d.LINE_CHARS + 10


def _episode(store: Store, key: str, outputs: str | None, task_hash: str = "h") -> int:
    with store.tx() as conn:
        cur = conn.execute(
            "INSERT INTO episodes (run_key, task_id, task_hash, mode, agent, status, outcome, "
            "passed, started_at, graded_outputs_json, final_changes_json) "
            "VALUES (?, 't/x', ?, 'free', 'm', 'done', 'pass', 1, ?, ?, ?)",
            (key, task_hash, now(), outputs, json.dumps({OUT: ["created"]})),
        )
        return int(cur.lastrowid)


def test_the_queue_lists_differing_passes_on_the_validated_task_version(tmp_path: Path) -> None:
    store = Store(tmp_path / "t.db")
    ref = {OUT: {**rec("1\n4\n"), "rule": d.EXACT, "created": True}}
    sp.put_contract(
        store, "t/x", task_hash="h", env_hash="e", tests_hash="t", valid=True, reasons=[],
        permitted={}, tests=[], fault_targets={}, flags=[], detail={"graded_outputs": ref},
    )  # fmt: skip
    wrong = _episode(store, "a", json.dumps({OUT: rec("1\n5\n")}))
    _episode(store, "b", json.dumps({OUT: rec("1\n4\n")}))  # right
    _episode(store, "c", None)  # recorded before graded outputs were: not judged
    _episode(store, "d", json.dumps({OUT: rec("zz\n")}), task_hash="other")  # another version
    items = triage.queue_items(store.conn, "false_positive")
    assert [(i.episode_id, i.reasons) for i in items] == [
        (wrong, (f"differential: {OUT} differs from the reference's (-4 +5)",))
    ]
    store.close()
