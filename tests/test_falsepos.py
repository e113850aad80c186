"""Verifier false positives found, not only queued (docs/verifier.md): on
tests/fixtures/falsepos/line-count, whose tests check only how many lines the output has.

`depthtui validate` finds that the tests accept m3 (a digit changed) and keeps the reference's
graded output; `depthtui free` with scripted models on loopback: one writes five wrong lines
(passes), one writes the right squares (passes). `depthtui triage list --queue false_positive
--json` lists the liar's pass with a differential reason (path and diff) and the mutation reason;
the honest pass carries the mutation reason only. Real Docker, the real CLI, a real SQLite file.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from devtools.scripted_server import ScriptedReply, ScriptedServer, calls, text
from tests.conftest import ROOT
from tests.fixtures_measure import cleanup, endless, reply_number, rows, run_cli, write_models

pytestmark = [pytest.mark.docker, pytest.mark.slow]
pytest_plugins = ["tests.fixtures_verify"]

TASK = ROOT / "tests" / "fixtures" / "falsepos" / "line-count"
OUT = "/home/user/squares.txt"
WRONG = f"printf 'one\\ntwo\\nthree\\nfour\\nfive\\n' > {OUT}"
RIGHT = f"printf '1\\n4\\n9\\n16\\n25\\n' > {OUT}"


def policy(body: dict[str, Any]) -> ScriptedReply:
    if reply_number(body) > 1:
        return text("done")
    return calls(WRONG if body["model"] == "model-liar" else RIGHT)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, toolchain):
    tmp = tmp_path_factory.mktemp("falsepos")
    db = tmp / "depthtui.db"
    owners: list[str] = []
    try:
        validated = run_cli(["validate", str(TASK), "--json"], db, owners=owners)
        with ScriptedServer(endless(policy), models=("model-liar", "model-honest")) as server:
            models = write_models(
                tmp / "models.toml", server, {"liar": "model-liar", "honest": "model-honest"}
            )
            args = ["free", str(TASK), "-m", "liar", "-m", "honest", "--attempts", "1"]
            ran = run_cli([*args, "--models", str(models)], db, owners=owners)
        yield {"db": db, "validated": validated, "ran": ran, "tmp": tmp, "owners": owners}
    finally:
        cleanup(owners)


def _episode(db, agent: str) -> int:
    found = rows(
        db,
        "SELECT id, outcome FROM episodes WHERE agent = ? AND mode = 'free' AND status = 'done'",
        (agent,),
    )
    assert len(found) == 1 and found[0]["outcome"] == "pass", found
    return found[0]["id"]


def test_validate_keeps_the_reference_output_and_the_mutation_it_misses(store) -> None:
    validated = store["validated"]
    assert validated.returncode == 0, validated.stderr[-3000:]
    (row,) = validated.json()
    assert row["valid"] is False and "grader_accepts_mutation" in row["flags"], row
    contract = rows(store["db"], "SELECT detail_json FROM contracts")[0]
    detail = json.loads(contract["detail_json"])
    kept = detail["graded_outputs"][OUT]
    # Both reference runs wrote the same squares: compared line for line.
    assert kept["text"] == "1\n4\n9\n16\n25\n" and kept["rule"] == "exact", kept
    assert kept["created"] is True
    assert detail["discrimination"][OUT]["accepted"] == ["bump_first_digit"]


def test_a_wrong_pass_is_queued_with_a_differential_and_a_mutation_reason(store) -> None:
    ran = store["ran"]
    assert ran.returncode == 0, ran.stderr[-3000:]
    db = store["db"]
    liar, honest = _episode(db, "liar"), _episode(db, "honest")
    listed = run_cli(["triage", "list", "--queue", "false_positive", "--json"], db)
    assert listed.returncode == 0, listed.stderr[-2000:]
    items = {r["episode_id"]: r for r in listed.json()}
    assert set(items) == {liar, honest}
    mutation = f"the tests accept m3 (bump_first_digit) in {OUT}"
    differential = [r for r in items[liar]["reasons"] if r.startswith("differential:")]
    assert mutation in items[liar]["reasons"]
    assert len(differential) == 1, items[liar]
    # The path and a short diff: the reference's lines against the run's.
    assert OUT in differential[0] and "(-1 +one | -4 +two | -9 +three" in differential[0]
    # The honest pass wrote what the reference wrote: only the task's weak grader is suspect.
    assert items[honest]["reasons"] == [mutation]
    only = run_cli(["triage", "list", "--reason", "differential", "--json"], db).json()
    assert [r["episode_id"] for r in only] == [liar]


def test_validate_and_report_show_each_mutation_and_the_suspects(store) -> None:
    db = store["db"]
    table = run_cli(["validate", str(TASK)], db)  # the finished job's runs are reused
    assert table.returncode == 0, table.stderr[-2000:]
    assert "m3 ACCEPTED" in table.stdout and "m1 caught" in table.stdout, table.stdout
    (row,) = run_cli(["validate", str(TASK), "--json"], db).json()
    assert row["mutations"] == {
        OUT: {"m1": "caught", "m2": "caught", "m3": "accepted", "m4": "caught"}
    }
    assert row["graded_outputs"] == {OUT: "exact"}
    report = run_cli(["report", "--json"], db)
    assert report.returncode == 0, report.stderr[-2000:]
    (audit,) = report.json()["verifier"]
    assert audit["task"] == "falsepos/line-count"
    assert audit["mutations"] == row["mutations"]
    # Both passes are suspects (the grader accepts m3); one of them also differs.
    assert audit["suspects"] == 2
    assert audit["suspects_by_reason"] == {"differential": 1, "mutation": 2}
    shown = run_cli(["report"], db).stdout
    assert "Verifier audit" in shown and "differential 1, mutation 2" in shown
