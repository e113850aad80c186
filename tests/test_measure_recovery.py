"""Recovery depth and the audit, end to end: real Docker, a real SQLite file, a scripted model on
loopback, the `depthtui` command as a user runs it.

The scripted model `fixer` solves demo/error-count in one reply, and when a command comes back
with "Permission denied" it makes the log readable and solves again in its next reply. Hand
computation (a turn is one model reply with commands; the closing "done" reply is recorded and
not counted, docs/work-and-turns.md):

clean:        solve = 1 turn -> N = 1; no cap lies below N -> D = 1.
perm_denied:  solve (denied), chmod + solve = 2 turns -> N = 2; cap 1 fails twice (only the
              denied try) -> D = 2, the next cap, which N already shows passing. The fault adds
              1 turn.

The audit runs the same protocol with the built-in oracle: one call -> N = 1, D = 1; a
multi-segment task is refused with the reason.
"""

from __future__ import annotations

import pytest

from devtools.scripted_server import ScriptedReply, ScriptedServer, calls, text
from store.db import Store
from store.protocol import put_contract
from tests.fixtures_measure import (
    cleanup,
    endless,
    leftovers,
    reply_number,
    rows,
    run_cli,
    write_models,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

EC = "demo/error-count"
LOG = "/home/user/logs/app.log"
SOLVE = (
    f"mkdir -p /home/user/reports && awk '$3 == \"ERROR\"' {LOG} | wc -l "
    "> /home/user/reports/error_count.txt"
)


def fixer(body: dict) -> ScriptedReply:
    tool_results = [m.get("content") or "" for m in body["messages"] if m.get("role") == "tool"]
    if tool_results and "Permission denied" in tool_results[-1]:
        return calls(f"chmod u+rw {LOG}", SOLVE)
    if reply_number(body) == 1:
        return calls(SOLVE)
    return text("done")


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    base = tmp_path_factory.mktemp("recovery")
    db = base / "depthtui.db"
    owners: list[str] = []
    with ScriptedServer(endless(fixer)) as server:
        models = write_models(base / "models.toml", server, {"fixer": server.model})
        try:
            assert run_cli(["tasks", "import", "tasks/demo"], db, owners=owners).returncode == 0
            # The contract `validate` freezes for this task (its reference only creates files),
            # written directly: validate itself is tested in test_measure_faults.py.
            with Store(db) as store:
                task_hash = rows(db, "SELECT content_hash FROM tasks WHERE id = ?", (EC,))[0]
                put_contract(
                    store,
                    EC,
                    task_hash=task_hash["content_hash"],
                    env_hash="",
                    tests_hash="",
                    valid=True,
                    reasons=[],
                    permitted={},
                    tests=[],
                    fault_targets={"perm_denied": LOG},
                    flags=[],
                    detail={},
                )
            clean = run_cli(
                ["ladder", EC, "-m", "fixer", "--models", str(models)], db, owners=owners
            )
            faulted = run_cli(
                ["ladder", EC, "-m", "fixer", "--fault", "perm_denied", "--models", str(models)],
                db,
                owners=owners,
            )
            audit = run_cli(["audit", EC, "demo/batch-pipeline", "-m", "oracle"], db, owners=owners)
            report = run_cli(["report", "--json"], db, owners=owners)
            yield db, clean, faulted, audit, report
            assert leftovers(owners) == []
        finally:
            cleanup(owners)


def test_clean_and_faulted_ladders_give_the_hand_computed_depths(measured) -> None:
    db, clean, faulted, _, _ = measured
    assert clean.returncode == 0, clean.stderr[-2000:]
    assert faulted.returncode == 0, faulted.stderr[-2000:]
    summary = {
        r["protocol"]: (r["n_turns"], r["estimate"], r["finished"])
        for r in rows(db, "SELECT * FROM estimates WHERE task_id = ? AND model = ''", (EC,))
    }
    assert summary["ladder"] == (1, 1, 1)
    assert summary["ladder+perm_denied"] == (2, 2, 1)
    faulted_runs = rows(
        db,
        "SELECT cap, passed, fault_family FROM episodes WHERE mode = 'ladder' "
        "AND fault_family = 'perm_denied' AND status = 'done' ORDER BY id",
    )
    assert [(r["cap"], r["passed"]) for r in faulted_runs] == [
        (None, 1),
        (None, 1),
        (1, 0),
        (1, 0),
    ]
    records = rows(
        db,
        "SELECT f.target, f.cleared FROM fault_records f JOIN episodes e ON e.id = f.episode_id "
        "WHERE e.mode = 'ladder' AND e.cap IS NULL",
    )
    assert records and all(r["target"] == LOG and r["cleared"] == 1 for r in records)


def test_the_report_says_how_many_turns_the_fault_adds(measured) -> None:
    _, _, _, _, report = measured
    assert report.returncode == 0, report.stderr[-2000:]
    doc = report.json()
    assert doc["recovery_depth"] == [
        {
            "task": EC,
            "fault": "perm_denied",
            "D_clean": 1,
            "D_clean_display": "1",
            "D_fault": 2,
            "D_fault_display": "2",
            "added_turns": 1,
            "added_turns_display": "1",
            "finished": True,
        }
    ]


def test_the_audit_measures_single_instruction_tasks_and_refuses_others(measured) -> None:
    db, _, _, audit, report = measured
    assert audit.returncode != 0  # one unit could not be measured, and the job says which
    assert "audit measures single-instruction tasks" in " ".join(audit.stderr.split())
    (row,) = rows(
        db,
        "SELECT n_turns, estimate, finished FROM estimates WHERE protocol = 'audit' "
        "AND model = '' AND task_id = ?",
        (EC,),
    )
    assert (row["n_turns"], row["estimate"], row["finished"]) == (1, 1, 1)
    by_id = {t["id"]: t for t in report.json()["tasks"]}
    assert by_id[EC]["D"] == 1 and by_id[EC]["N"] == 1
