"""The depth ladder end to end: `depthtui ladder` on two demo tasks with two scripted models on a
real HTTP server on loopback, real Docker sandboxes, real verifiers and a real SQLite file.

The models act on the cap they are told (see BatchingPolicy): both look first, then `alpha`
sends one command per reply whatever it is told, while `beta` batches every command into one
reply when told a cap of at most 3. Hand computation under docs/protocol.md and
docs/work-and-turns.md (a turn is one model reply that carries commands; the closing "done" reply
is recorded but not counted; a cap ends the run after `cap` turns):

error-count, k = 2 commands. Uncapped: look, mkdir, awk = 3 turns (then "done"), passes -> N = 3.
  alpha tries caps below 3: cap 1 fails twice (1 turn: the look), cap 2 fails twice (look, mkdir);
  no cap below N passed, so its estimate is the smallest cap at least N -> 3.
  beta tries caps below 3: cap 1 fails twice (the look), cap 2 passes (look, batch) -> 2. D = 2.
top-error-ips, k = 3 commands. Uncapped: 4 turns -> N = 4.
  alpha tries caps 1, 2, 3 below 4: each fails twice (it needs 4 replies of work); its estimate
  is the smallest cap at least N -> 5.
  beta tries caps below 5: cap 1 fails twice, cap 2 passes -> 2. D = 2.

Before turns stopped counting the closing reply, N was 4 and 5: error-count then also ran alpha at
cap 3 (one pass), which is the expectation this module dropped; everything else only shifted N.

`ladder --search bisect` on error-count in a fresh store (its own estimator, "ladder/bisect"):
  alpha: uncapped twice (N = 3); bisect caps [1, 2]: cap 2 fails, and as the cap just below the
  answer it gets its second run, which fails -> 3 (cap 1 is below a failed cap: not run).
  beta: cap 2 passes; cap 1 fails, and gets its second run (it is just below the answer), fails
  -> 2. D = 2 in 7 runs, where the protocol made 9.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from devtools.scripted_server import ScriptedServer
from engine.agents.prompts import turn_cap_statement
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

pytestmark = [pytest.mark.docker, pytest.mark.slow]  # about a minute: 27 real episodes

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
    (EC, "alpha", None, 0): (P, 3),
    (EC, "alpha", None, 1): (P, 3),
    (EC, "alpha", 1, 0): (F, 1),
    (EC, "alpha", 1, 1): (F, 1),
    (EC, "alpha", 2, 0): (F, 2),
    (EC, "alpha", 2, 1): (F, 2),
    (EC, "beta", 1, 0): (F, 1),
    (EC, "beta", 1, 1): (F, 1),
    (EC, "beta", 2, 0): (P, 2),
    (TOP, "alpha", None, 0): (P, 4),
    (TOP, "alpha", None, 1): (P, 4),
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
    EC: (2, 3, 2, (3, [1, 2]), (2, [1, 2])),
    TOP: (3, 4, 2, (5, [1, 2, 3]), (2, [1, 2])),
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
    # Every request the models got states the run's cap (or none): one request per turn, plus
    # the closing "done" reply of each uncapped run (capped runs end at their cap without one).
    told = Counter((r.body["model"], stated_cap(r.body)) for r in server.chat_requests)
    model_id = {"alpha": "model-a", "beta": "model-b"}
    expected = Counter()
    for (_, model, cap, _), (_, turns) in EXPECTED.items():
        expected[(model_id[model], cap)] += turns + (1 if cap is None else 0)
    assert told == expected
    assert sum(told.values()) == 44  # 18 requests on error-count, 26 on top-error-ips
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
        ("alpha", 3): (2, 0),
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
    assert "0 episode(s) run, 20 reused" in second["message"]
    assert "0 run, 9 reused" in again.stderr and "0 run, 11 reused" in again.stderr
    # Same answer as the first run.
    assert again.json()["tasks"] == ladder["first"].json()["tasks"]


# (model, cap, attempt) -> passed, for `ladder --search bisect` on error-count (module docstring).
BISECT = {
    ("alpha", None, 0): P,
    ("alpha", None, 1): P,
    ("alpha", 2, 0): F,
    ("alpha", 2, 1): F,
    ("beta", 2, 0): P,
    ("beta", 1, 0): F,
    ("beta", 1, 1): F,
}


def test_ladder_search_bisect_is_its_own_estimator(ladder, tmp_path) -> None:
    """A fresh store, so every run really happens; the estimates are stored and reported under
    "ladder/bisect", apart from the protocol's (which this store does not have)."""
    db = tmp_path / "bisect.db"
    args = [a for a in ladder["args"] if a != str(DEMO / "top-error-ips")]
    result = run_cli([*args, "--search", "bisect"], db, owners=ladder["owners"])
    assert result.returncode == 0, result.stderr[-3000:]
    eps = rows(db, "SELECT agent, cap, attempt, passed, status, mode FROM episodes ORDER BY id")
    assert all(e["status"] == "done" and e["mode"] == "ladder" for e in eps)
    assert {(e["agent"], e["cap"], e["attempt"]): bool(e["passed"]) for e in eps} == BISECT
    assert len(eps) == len(BISECT)
    est = rows(
        db, "SELECT protocol, model, n_turns, estimate, finished, detail_json FROM estimates"
    )
    assert {e["protocol"] for e in est} == {"ladder/bisect"}
    by_model = {e["model"]: e for e in est}
    assert (by_model[""]["n_turns"], by_model[""]["estimate"], by_model[""]["finished"]) == (
        3,
        2,
        1,
    )
    assert (by_model["alpha"]["estimate"], json.loads(by_model["alpha"]["detail_json"])) == (
        3,
        {"tried": [2]},
    )
    assert (by_model["beta"]["estimate"], json.loads(by_model["beta"]["detail_json"])) == (
        2,
        {"tried": [2, 1]},
    )
    report = result.json()
    # Never mixed into the protocol's figures: the task has no protocol D in this store.
    (task,) = report["tasks"]
    assert (task["protocol"], task["D"]) == (None, None)
    (row,) = report["search_estimates"]
    assert (row["task"], row["estimator"], row["search"]) == (EC, "ladder/bisect", "bisect")
    assert (row["N"], row["D"], row["D_display"], row["runs"]) == (3, 2, "2", 7)
    assert row["estimates_display"] == {"alpha": "3", "beta": "2"}
    table = run_cli(["report"], db)
    assert "Depth by another search" in table.stdout and "ladder/bisect" in table.stdout
    # In the protocol's store, the same search reuses the protocol's runs (same run keys) and is
    # reported beside the protocol's D and runs.
    again = run_cli([*args, "--search", "bisect"], ladder["db"], owners=ladder["owners"])
    assert again.returncode == 0, again.stderr[-3000:]
    assert "0 run, 7 reused" in again.stderr
    (beside,) = [r for r in again.json()["search_estimates"] if r["task"] == EC]
    assert (beside["D"], beside["protocol_D"], beside["runs"], beside["protocol_runs"]) == (
        2,
        2,
        7,
        9,
    )
