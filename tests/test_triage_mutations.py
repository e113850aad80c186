"""The false-positive queue's mutation reason: every passing run of a task whose tests accept a
mutated output (validate's per-file, per-mutation results in the contract) is a suspect, each
reason naming the mutation and the file. A real SQLite store."""

from __future__ import annotations

from pathlib import Path

from store import protocol as sp
from store import triage
from store.db import Store, now


def _episode(store: Store, key: str, task_id: str, outcome: str, mode: str = "free") -> int:
    with store.tx() as conn:
        cur = conn.execute(
            "INSERT INTO episodes (run_key, task_id, task_hash, mode, agent, status, outcome, "
            "passed, started_at) VALUES (?, ?, 'h', ?, 'm', 'done', ?, ?, ?)",
            (key, task_id, mode, outcome, int(outcome == "pass"), now()),
        )
        return int(cur.lastrowid)


def _contract(store: Store, task_id: str, discrimination: dict, flags: list[str]) -> None:
    sp.put_contract(
        store, task_id, task_hash="h", env_hash="e", tests_hash="t", valid=not flags,
        reasons=[], permitted={}, tests=[], fault_targets={}, flags=flags,
        detail={"discrimination": discrimination},
    )  # fmt: skip


def test_every_passing_run_names_the_mutation_and_file(tmp_path: Path) -> None:
    store = Store(tmp_path / "t.db")
    out = "/home/user/out.txt"
    _contract(
        store,
        "t/lines",
        {
            out: {
                "ok": False,
                "why": "the tests pass with m3 (bump_first_digit)",
                "failed": {"empty": True, "drop_last_line": True, "bump_first_digit": False},
                "accepted": ["bump_first_digit"],
            }
        },
        [triage.FLAG_GRADER_ACCEPTS],
    )
    _contract(store, "t/good", {out: {"ok": True, "accepted": []}}, [])
    a = _episode(store, "a", "t/lines", "pass")
    b = _episode(store, "b", "t/lines", "pass")
    _episode(store, "c", "t/lines", "fail")
    _episode(store, "d", "t/lines", "pass", mode="validate")
    _episode(store, "e", "t/good", "pass")
    items = {i.episode_id: i for i in triage.queue_items(store.conn, "false_positive")}
    # both passing runs, not one representative; not the failing run, the probe or the good task
    assert sorted(items) == [a, b]
    assert items[a].reasons == (f"the tests accept m3 (bump_first_digit) in {out}",)
    store.close()


def test_triage_list_prints_the_queue_from_the_command_line(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    db = tmp_path / "t.db"
    store = Store(db)
    out = "/home/user/out.txt"
    _contract(
        store,
        "t/lines",
        {out: {"ok": False, "failed": {}, "accepted": ["drop_last_line", "bump_first_digit"]}},
        [triage.FLAG_GRADER_ACCEPTS],
    )
    a = _episode(store, "a", "t/lines", "pass")
    store.close()
    root = Path(__file__).resolve().parents[1]

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "depthtui", "triage", "list", *args, "--db", str(db)],
            capture_output=True, text=True, cwd=root, timeout=120,
        )  # fmt: skip

    done = cli("--queue", "false_positive", "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [r["episode_id"] for r in rows] == [a]
    assert rows[0]["reasons"] == [
        f"the tests accept m2 (drop_last_line) in {out}",
        f"the tests accept m3 (bump_first_digit) in {out}",
    ]
    only = json.loads(cli("--queue", "false_positive", "--reason", "m3", "--json").stdout)
    assert len(only) == 1 and only[0]["episode_id"] == a
    assert json.loads(cli("--reason", "differential", "--json").stdout) == []
    assert "m2 (drop_last_line)" in cli().stdout
    bad = cli("--queue", "nope")
    assert bad.returncode != 0 and "'nope'" in bad.stderr + bad.stdout


def test_task_detail_shows_each_mutation_per_graded_file() -> None:
    from rich.console import Console

    from depthtui.screens.task_detail import mutation_results, mutation_view

    contract = {
        "detail": {
            "discrimination": {
                "/home/user/out.txt": {
                    "ok": False,
                    "failed": {
                        "empty": True,
                        "drop_last_line": True,
                        "bump_first_digit": False,
                        "duplicate_first_line": None,
                    },
                }
            }
        }
    }
    rows = mutation_results(contract)
    assert rows == [
        ("/home/user/out.txt", {"m1": "caught", "m2": "caught", "m3": "accepted", "m4": "n/a"})
    ]
    console = Console(width=160, record=True)
    console.print(mutation_view(rows))
    shown = console.export_text()
    assert "accepted" in shown and "/home/user/out.txt" in shown
    assert mutation_results({"detail": {}}) == []
