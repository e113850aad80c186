"""The depth ladder end to end: `depthtui ladder` on two demo tasks with two scripted models on a
real HTTP server on loopback, real Docker sandboxes, real verifiers and a real SQLite file.

The models act on the cap they are told (see BatchingPolicy): both look first, then `alpha`
sends one command per reply whatever it is told, while `beta` batches every command into one
reply when told a cap of at most 3. Hand computation under SPEC §4 and engine/agents/loop.py (a
turn is one model reply; the final "done" reply counts; a cap ends the run after `cap` replies):

error-count, k = 2 commands. Uncapped: look, mkdir, awk, done = 4 turns, passes -> N = 4.
  alpha tries caps below 4: cap 1 fails twice (1 turn: the look), cap 2 fails twice (look, mkdir),
  cap 3 passes (look, mkdir, awk) -> alpha's estimate 3.
  beta tries caps below 3: cap 1 fails twice (the look), cap 2 passes (look, batch) -> 2. D = 2.
top-error-ips, k = 3 commands. Uncapped: 5 turns -> N = 5.
  alpha tries caps 1, 2, 3 below 5: each fails twice (it needs 4 replies of work); no cap below
  N passed, so its estimate is the smallest cap at least N -> 5.
  beta tries caps below 5: cap 1 fails twice, cap 2 passes -> 2. D = 2.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from engine.agents.prompts import turn_cap_statement
from engine.agents.scripted_server import ScriptedServer
from tests.conftest import DEMO
from tests.fixtures_measure import (
    BatchingPolicy,
    cleanup,
    endless,
    job,
    leftovers,
    rows,
    run_cli,
    stated_cap,
    write_models,
)

EC, TOP = "demo/error-count", "demo/top-error-ips"
POLICY = BatchingPolicy(
    look="ls -la /home/user/logs",
    work={
        "app.log": (
            "mkdir -p /home/user/reports",
            "awk '$3 == \"ERROR\"' /home/user/logs/app.log | wc -l "
            "> /home/user/reports/error_count.txt",
        ),
        "access.log": (
            "mkdir -p /home/user/reports",
            "awk '$9 >= 500 && $9 <= 599 {print $1}' /home/user/logs/access.log | sort | uniq -c "
            "| sort -k1,1nr -k2,2 > /tmp/counts.txt",
            "head -n 3 /tmp/counts.txt | awk '{print $1, $2}' "
            "> /home/user/reports/top_error_ips.txt",
        ),
    },
    batch_at_most={"model-a": 0, "model-b": 3},
)
P, F = True, False
# (task, model, cap, attempt) -> (passed, turns), as computed in the module docstring.
EXPECTED = {
    (EC, "alpha", None, 0): (P, 4),
    (EC, "alpha", None, 1): (P, 4),
    (EC, "alpha", 1, 0): (F, 1),
    (EC, "alpha", 1, 1): (F, 1),
    (EC, "alpha", 2, 0): (F, 2),
    (EC, "alpha", 2, 1): (F, 2),
    (EC, "alpha", 3, 0): (P, 3),
    (EC, "beta", 1, 0): (F, 1),
    (EC, "beta", 1, 1): (F, 1),
    (EC, "beta", 2, 0): (P, 2),
    (TOP, "alpha", None, 0): (P, 5),
    (TOP, "alpha", None, 1): (P, 5),
    (TOP, "alpha", 1, 0): (F, 1),
    (TOP, "alpha", 1, 1): (F, 1),
    (TOP, "alpha", 2, 0): (F, 2),
    (TOP, "alpha", 2, 1): (F, 2),
    (TOP, "alpha", 3, 0): (F, 3),
    (TOP, "alpha", 3, 1): (F, 3),
    (TOP, "beta", 1, 0): (F, 1),
    (TOP, "beta", 1, 1): (F, 1),
    (TOP, "beta", 2, 0): (P, 2),
}
# task -> (W, N, D, alpha's estimate and caps tried, beta's estimate and caps tried)
ESTIMATES = {
    EC: (2, 4, 2, (3, [1, 2, 3]), (2, [1, 2])),
    TOP: (3, 5, 2, (5, [1, 2, 3]), (2, [1, 2])),
}


@pytest.fixture(scope="module")
def ladder(tmp_path_factory: pytest.TempPathFactory):
    """One real ladder run; the server and the store stay for the rerun."""
    tmp = tmp_path_factory.mktemp("ladder")
    db = tmp / "depthtui.db"
    owners: list[str] = []
    with ScriptedServer(endless(POLICY), models=("model-a", "model-b")) as server:
        models = write_models(tmp / "models.toml", server, {"alpha": "model-a", "beta": "model-b"})
        args = [
            "ladder",
            str(DEMO / "error-count"),
            str(DEMO / "top-error-ips"),
            "--model",
            "alpha",
            "--model",
            "beta",
            "--models",
            str(models),
            "--workers",
            "2",
            "--json",
        ]
        first = run_cli(args, db, owners=owners)
        try:
            yield {"db": db, "server": server, "args": args, "first": first, "owners": owners}
        finally:
            cleanup(owners)


def test_ladder_runs_exactly_the_hand_computed_episodes(ladder) -> None:
    first = ladder["first"]
    assert first.returncode == 0, first.stderr[-3000:]
    eps = rows(
        ladder["db"],
        "SELECT task_id, agent, cap, attempt, passed, turns, status, error_kind, end_reason, "
        "mode, job_id FROM episodes ORDER BY id",
    )
    assert all(e["status"] == "done" and e["error_kind"] is None for e in eps), eps
    got = {
        (e["task_id"], e["agent"], e["cap"], e["attempt"]): (bool(e["passed"]), e["turns"])
        for e in eps
    }
    assert got == EXPECTED
    assert len(eps) == len(EXPECTED)  # nothing ran twice
    for e in eps:
        assert e["mode"] == "ladder" and e["job_id"] == 1
        if e["cap"] is None:
            assert e["end_reason"] == "no_tool_call"
        else:
            # The cap is enforced, not only told: no run has a turn beyond it.
            assert e["turns"] <= e["cap"]
            assert e["end_reason"] in ("turn_cap", "no_tool_call")
    assert leftovers(ladder["owners"]) == []


def test_the_cap_is_stated_to_the_model(ladder) -> None:
    server, db = ladder["server"], ladder["db"]
    # Every request the models got states the run's cap (or none): one request per turn.
    told = Counter((r.body["model"], stated_cap(r.body)) for r in server.chat_requests)
    model_id = {"alpha": "model-a", "beta": "model-b"}
    expected = Counter()
    for (_, model, cap, _), (_, turns) in EXPECTED.items():
        expected[(model_id[model], cap)] += turns
    assert told == expected
    assert sum(told.values()) == 47  # 21 turns on error-count, 26 on top-error-ips
    # What the agent was told is stored with the run, word for word.
    for seg in rows(
        db,
        "SELECT e.cap, s.user_message FROM segment_runs s JOIN episodes e ON e.id = s.episode_id",
    ):
        if seg["cap"] is None:
            assert "turn(s) for this task" not in seg["user_message"]
        else:
            assert seg["user_message"].endswith("\n\n" + turn_cap_statement(seg["cap"]))


def test_estimates_rows_hold_n_d_and_each_models_estimate(ladder) -> None:
    est = rows(ladder["db"], "SELECT * FROM estimates WHERE protocol = 'ladder'")
    by_key = {(e["task_id"], e["model"]): e for e in est}
    assert len(est) == 6
    for task, (_, n, d, (a_est, a_tried), (b_est, b_tried)) in ESTIMATES.items():
        summary = by_key[(task, "")]
        assert (summary["n_turns"], summary["estimate"], summary["finished"]) == (n, d, 1)
        detail = json.loads(summary["detail_json"])
        assert detail["solved"] is True and detail["models"] == ["alpha", "beta"]
        assert detail["next"] is None
        alpha, beta = by_key[(task, "alpha")], by_key[(task, "beta")]
        assert (alpha["n_turns"], alpha["estimate"], alpha["finished"]) == (n, a_est, 1)
        assert json.loads(alpha["detail_json"]) == {"tried": a_tried}
        assert (beta["n_turns"], beta["estimate"], beta["finished"]) == (None, b_est, 1)
        assert json.loads(beta["detail_json"]) == {"tried": b_tried}


def test_ladder_prints_the_report_of_its_tasks(ladder) -> None:
    report = ladder["first"].json()
    assert report["finished"] is True
    tasks = {t["id"]: t for t in report["tasks"]}
    assert set(tasks) == set(ESTIMATES)
    for task, (w, n, d, (a_est, _), (b_est, _)) in ESTIMATES.items():
        t = tasks[task]
        assert (t["W"], t["N"], t["D"], t["segments"], t["finished"]) == (w, n, d, 1, True)
        assert t["estimates"] == {"alpha": a_est, "beta": b_est}
        assert t["dataset"] == "demo"
    # pass@1 counts uncapped runs only: alpha's four uncapped runs all passed.
    assert [(m["model"], m["tasks"], m["episodes"], m["pass_at_1"]) for m in report["models"]] == [
        ("alpha", 2, 4, 1.0)
    ]
    by_cap = {(r["model"], r["cap"]): (r["runs"], r["passed"]) for r in report["pass_by_cap"]}
    assert by_cap == {
        ("alpha", 1): (4, 0),
        ("alpha", 2): (4, 0),
        ("alpha", 3): (3, 1),
        ("beta", 1): (4, 0),
        ("beta", 2): (2, 2),
    }
    h = report["headline"]
    assert (h["measured"], h["solved"], h["solved_D_le_3"], h["share_D_le_3"]) == (2, 2, 2, 1.0)
    assert (h["median_D"], h["median_W"]) == (2, 2.5)


def test_a_rerun_of_the_same_command_runs_nothing(ladder) -> None:
    db, server = ladder["db"], ladder["server"]
    requests_before = len(server.chat_requests)
    episodes_before = rows(db, "SELECT count(*) AS n FROM episodes")[0]["n"]
    again = run_cli(ladder["args"], db, owners=ladder["owners"])
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(server.chat_requests) == requests_before  # the models were not asked again
    assert rows(db, "SELECT count(*) AS n FROM episodes")[0]["n"] == episodes_before
    second = job(db)
    assert second["id"] == 2 and second["status"] == "done"
    assert "0 episode(s) run, 21 reused" in second["message"]
    assert "0 run, 10 reused" in again.stderr and "0 run, 11 reused" in again.stderr
    # Same answer as the first run.
    assert again.json()["tasks"] == ladder["first"].json()["tasks"]
