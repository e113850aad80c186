"""Report figures against a hand-built store: tasks, estimates and episodes written through the
store functions the engine uses, then `build_report` and `depthtui report` (JSON, --out, --plots).

The fixture (every figure below is computed by hand from it):

  task      dataset  W   public pass rate  ladder state
  alpha/t1  alpha    5   0.9               finished, N 2,  D 1   (m1: 1)
  alpha/t2  alpha    2   0.7               finished, N 6,  D 3   (m1: 5, m2: 3)
  alpha/t3  alpha    40  0.5               finished, N 12, D 10  (m1: 10)
  beta/t4   beta     12  0.2               finished, N 45, D 40  (m1: 40)
  beta/t5   beta     20  0.4               finished, N 90, D >80 (m1: 99)
  beta/t6   beta     8   -                 finished, not solved
  beta/t7   beta     3   -                 not finished (the next run is pending)
  beta/t8   beta     6   -                 not measured

Dataset alpha belongs to the group "synthetic" (the plots' reference group), beta to "human".
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest

from engine.analysis.report import build_report
from engine.analysis.stats import cluster_rate
from engine.tasks.model import Environment, Limits, Segment, Task
from store import episodes as ep
from store import protocol as sp
from store.db import Store
from store.tasks import upsert_dataset, upsert_task
from tests.fixtures_measure import run_cli

# id -> (W, public pass rate, estimates row: (n, D, finished, solved) or None, {model: estimate})
TASKS: dict[str, tuple[int, float | None, tuple | None, dict[str, int | None]]] = {
    "alpha/t1": (5, 0.9, (2, 1, True, True), {"m1": 1}),
    "alpha/t2": (2, 0.7, (6, 3, True, True), {"m1": 5, "m2": 3}),
    "alpha/t3": (40, 0.5, (12, 10, True, True), {"m1": 10}),
    "beta/t4": (12, 0.2, (45, 40, True, True), {"m1": 40}),
    "beta/t5": (20, 0.4, (90, 99, True, True), {"m1": 99}),
    "beta/t6": (8, None, (None, None, True, False), {}),
    "beta/t7": (3, None, (None, None, False, None), {}),
    "beta/t8": (6, None, None, {}),
}
GROUPS = {"alpha": "synthetic", "beta": "human"}
_keys = itertools.count(1)


def make_task(task_id: str, work: int, pass_rate: float | None) -> Task:
    dataset = task_id.split("/")[0]
    solution = "#!/bin/bash\n# comment lines do not count\n" + "".join(
        f"echo step {i}\n\n" for i in range(work)
    )
    return Task(
        id=task_id,
        dataset=dataset,
        format="depthtui",
        source_path=Path(f"/nonexistent/{task_id}"),
        content_hash=f"hash-{task_id}",
        segments=(
            Segment(
                name="main",
                instruction=f"Do {task_id}.",
                tests={},
                solution_script=solution,
                solution_dir=None,
            ),
        ),
        environment=Environment(context_dir=None, dockerfile=None),
        limits=Limits(),
        verifier_kind="pytest",
        metadata={} if pass_rate is None else {"pass_rate": pass_rate},
    )


def episode(store: Store, task_id: str, mode: str, agent: str, **outcome: Any) -> int:
    """One finished episode, written as the runner writes one."""
    create = {
        k: outcome.pop(k) for k in ("cap", "attempt", "prompt_name", "fault_family") if k in outcome
    }
    eid = ep.create_episode(
        store,
        run_key=f"key-{next(_keys)}",
        task_id=task_id,
        task_hash=f"hash-{task_id}",
        mode=mode,
        agent=agent,
        **{"prompt_name": "general", **create},
    )
    outcome.setdefault("cost_usd", 0.01)
    ep.finish_episode(store, eid, **outcome)
    return eid


def clean(store: Store, task: str, safe: bool, collateral: bool = False, **kw: Any) -> None:
    episode(
        store,
        task,
        "episodes",
        "m1",
        safe_success=safe,
        collateral=collateral,
        passed=safe,
        reward=-1.0 if collateral else 1.0,
        **kw,
    )


def faulted(
    store: Store, task: str, family: str, observed: int | None, safe: bool, cleared: bool, reward
) -> None:
    episode(
        store,
        task,
        "episodes",
        "m1",
        fault_family=family,
        fault_observed_call=observed,
        safe_success=safe,
        fault_cleared=cleared,
        passed=safe,
        reward=reward,
    )


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("report") / "depthtui.db"
    with Store(path) as store:
        for name, group in GROUPS.items():
            upsert_dataset(store, name, f"/nonexistent/{name}", group=group)
        for task_id, (work, rate, summary, per_model) in TASKS.items():
            task = make_task(task_id, work, rate)
            assert task.work == work
            upsert_task(store, task)
            if summary is None:
                continue
            n, d, finished, solved = summary
            sp.put_estimate(
                store,
                task_id,
                task.content_hash,
                "ladder",
                "",
                n_turns=n,
                estimate=d,
                finished=finished,
                detail={"solved": solved},
            )
            for model, estimate in per_model.items():
                sp.put_estimate(
                    store,
                    task_id,
                    task.content_hash,
                    "ladder",
                    model,
                    n_turns=n if model == "m1" else None,
                    estimate=estimate,
                    finished=finished,
                    detail={},
                )
        # Uncapped runs (pass@1): m1 passes t1 twice, t2 once of two, t3 never; one more t3
        # run ended in an endpoint error (infrastructure: left out, counted apart). m2 passes
        # t1 and fails t4.
        for task, passed, mode in [
            ("alpha/t1", True, "free"),
            ("alpha/t1", True, "ladder"),
            ("alpha/t2", True, "ladder"),
            ("alpha/t2", False, "free"),
            ("alpha/t3", False, "ladder"),
            ("alpha/t3", False, "ladder"),
        ]:
            episode(store, task, mode, "m1", passed=passed)
        episode(store, "alpha/t3", "free", "m1", passed=False, error_kind="model_endpoint")
        episode(store, "alpha/t1", "free", "m2", passed=True)
        episode(store, "beta/t4", "free", "m2", passed=False)
        # Capped runs (pass rate by cap) on t2.
        for model in ("m1", "m2"):
            episode(store, "alpha/t2", "ladder", model, cap=1, passed=False)
            episode(store, "alpha/t2", "ladder", model, cap=1, attempt=1, passed=False)
            episode(store, "alpha/t2", "ladder", model, cap=3, passed=True)
        # Fault episodes of m1 with the general prompt, and one with the fault_runbook arm.
        clean(store, "alpha/t1", True)
        clean(store, "alpha/t1", True, attempt=1)
        clean(store, "alpha/t2", True)
        clean(store, "alpha/t2", False, collateral=True, attempt=1)
        clean(store, "alpha/t1", True, prompt_name="fault_runbook")
        faulted(store, "alpha/t1", "perm_denied", 1, True, True, 1.0)
        faulted(store, "alpha/t2", "perm_denied", 2, False, False, 0.25)
        faulted(store, "alpha/t3", "perm_denied", None, False, True, 0.5)
        faulted(store, "alpha/t1", "moved_input", 1, True, True, 1.0)
    return path


@pytest.fixture(scope="module")
def report(db: Path) -> dict[str, Any]:
    conn = Store(db).conn
    return build_report(conn)


def rate(value: float | None, low: float | None, high: float | None, s: int, n: int, t: int):
    return {"value": value, "ci95": [low, high], "successes": s, "episodes": n, "tasks": t}


# --- per task and per dataset ------------------------------------------------------------------


def test_tasks_hold_w_n_d_estimates_and_whether_measurement_finished(report) -> None:
    tasks = {t["id"]: t for t in report["tasks"]}
    assert list(tasks) == list(TASKS)  # by dataset, then id
    for task_id, (work, rate_, summary, per_model) in TASKS.items():
        t = tasks[task_id]
        assert (t["dataset"], t["segments"], t["W"]) == (task_id.split("/")[0], 1, work)
        assert t["group"] == GROUPS[t["dataset"]]
        assert t["pass_rate"] == rate_
        if summary is None:
            assert (t["protocol"], t["N"], t["D"], t["finished"]) == (None, None, None, False)
            continue
        n, d, finished, solved = summary
        assert (t["protocol"], t["N"], t["D"], t["finished"], t["solved"]) == (
            "ladder",
            n,
            d,
            finished,
            solved,
        )
        assert t["estimates"] == per_model
    assert tasks["beta/t5"]["D_display"] == ">80"
    assert tasks["beta/t5"]["estimates_display"] == {"m1": ">80"}
    assert tasks["alpha/t2"]["D_display"] == "3"
    assert tasks["beta/t6"]["D_display"] == "-"
    # beta/t7 is still being measured, so the report says measurement has not finished.
    assert report["finished"] is False


def test_per_dataset_figures(report) -> None:
    by_name = {d["dataset"]: d for d in report["datasets"]}
    assert by_name["alpha"] == {
        "dataset": "alpha",
        "group": "synthetic",
        "tasks": 3,
        "measured": 3,
        "finished": 3,
        "solved": 3,
        "median_D": 3,  # D 1, 3, 10
        "median_D_display": "3",
        "median_W": 5,  # W 5, 2, 40
        "share_D_le_3": pytest.approx(2 / 3),
        "above_80": 0,
    }
    assert by_name["beta"] == {
        "dataset": "beta",
        "group": "human",
        "tasks": 5,
        "measured": 4,  # t8 was never measured
        "finished": 3,  # t7 is not finished
        "solved": 2,  # t4 (D 40) and t5 (D > 80)
        "median_D": 40,  # D 40, >80: ordinal, so the lower median (not their mean)
        "median_D_display": "40",
        "median_W": 16,  # (12 + 20) / 2
        "share_D_le_3": 0.0,
        "above_80": 1,
    }


def test_headline_share_medians_and_rank_partial_correlation(report) -> None:
    h = report["headline"]
    assert (h["measured"], h["solved"], h["solved_D_le_3"]) == (7, 5, 2)
    assert h["share_D_le_3"] == pytest.approx(0.4)
    assert (h["median_D"], h["median_D_display"]) == (10, "10")  # D 1, 3, 10, 40, >80
    assert h["median_W"] == 12  # W 2, 5, 12, 20, 40
    assert h["rank_partial_corr_tasks"] == 5
    # Ranks over the five solved tasks t1..t5 (no ties):
    #   D    1, 3, 10, 40, 99        -> 1, 2, 3, 4, 5
    #   pass 0.9, 0.7, 0.5, 0.2, 0.4 -> 5, 4, 3, 1, 2
    #   W    5, 2, 40, 12, 20        -> 2, 1, 5, 3, 4
    # Spearman by sum of squared rank differences, 1 - 6 sum(d^2) / (n (n^2 - 1)) with n = 5:
    #   D~pass: d^2 = 16+4+0+9+9 = 38 -> -0.9;  D~W: 1+1+4+1+1 = 8 -> 0.6;
    #   pass~W: 9+9+4+4+4 = 30 -> -0.5.
    # Partial: (-0.9 - 0.6 * -0.5) / sqrt((1 - 0.36)(1 - 0.25)) = -0.6 / sqrt(0.48) = -sqrt(3)/2.
    rd, rp, rw = [1, 2, 3, 4, 5], [5, 4, 3, 1, 2], [2, 1, 5, 3, 4]
    dp, dw, pw = (
        statistics.correlation(rd, rp),
        statistics.correlation(rd, rw),
        statistics.correlation(rp, rw),
    )
    assert (dp, dw, pw) == (pytest.approx(-0.9), pytest.approx(0.6), pytest.approx(-0.5))
    by_hand = (dp - dw * pw) / math.sqrt((1 - dw**2) * (1 - pw**2))
    assert by_hand == pytest.approx(-math.sqrt(3) / 2)
    assert h["rank_partial_corr_D_passrate_given_W"] == pytest.approx(-math.sqrt(3) / 2)


# --- models ----------------------------------------------------------------------------------


def test_pass_at_1_per_model_leaves_errors_and_capped_runs_out(report) -> None:
    m1, m2 = report["models"]
    # m1: t1 2/2, t2 1/2, t3 0/2 -> mean of the per-task fractions (1 + 0.5 + 0) / 3 = 0.5.
    assert (m1["model"], m1["tasks"], m1["episodes"], m1["errors"]) == ("m1", 3, 6, 1)
    assert m1["pass_at_1"] == pytest.approx(0.5)
    assert m1["cost_usd"] == pytest.approx(0.07)  # 7 uncapped runs at $0.01, the errored one too
    # Pooled 3/6. Resampling three tasks: all three draws t3 (rate 0) has chance 1/27 > 2.5%,
    # all t1 (rate 1) too, so the interval is [0, 1].
    assert m1["pass_rate"] == rate(0.5, 0.0, 1.0, 3, 6, 3)
    assert (m2["model"], m2["tasks"], m2["episodes"], m2["errors"]) == ("m2", 2, 2, 0)
    assert m2["pass_at_1"] == pytest.approx(0.5)
    assert m2["pass_rate"] == rate(0.5, 0.0, 1.0, 1, 2, 2)
    assert report["pass_by_cap"] == [
        {"model": "m1", "cap": 1, "runs": 2, "passed": 0, "rate": 0.0},
        {"model": "m1", "cap": 3, "runs": 1, "passed": 1, "rate": 1.0},
        {"model": "m2", "cap": 1, "runs": 2, "passed": 0, "rate": 0.0},
        {"model": "m2", "cap": 3, "runs": 1, "passed": 1, "rate": 1.0},
    ]


def test_one_model_only(db: Path) -> None:
    only = build_report(Store(db).conn, model="m2")
    assert [m["model"] for m in only["models"]] == ["m2"]
    assert {r["model"] for r in only["pass_by_cap"]} == {"m2"}
    assert only["safety"] == []  # m2 ran no fault episode


# --- safety and recovery -----------------------------------------------------------------------


def test_safety_rates_with_task_cluster_intervals(report) -> None:
    groups = {(s["model"], s["prompt"], s["fault"]): s for s in report["safety"]}
    assert list(groups) == [
        ("m1", "fault_runbook", "clean"),
        ("m1", "general", "all faults"),
        ("m1", "general", "clean"),
        ("m1", "general", "moved_input"),
        ("m1", "general", "perm_denied"),
    ]
    c = groups[("m1", "general", "clean")]
    assert (c["episodes"], c["errors"]) == (4, 0)
    # t1 2/2 safe, t2 1/2: 3/4. Resampling two tasks gives 1.0, 0.75 or 0.5 (both t2: 1/4).
    assert c["safe_success"] == rate(0.75, 0.5, 1.0, 3, 4, 2)
    assert c["collateral"] == rate(0.25, 0.0, 0.5, 1, 4, 2)
    assert c["mean_reward"] == pytest.approx(0.5)  # (1 + 1 + 1 - 1) / 4
    assert c["recovery_failure_after_observed"] == rate(None, None, None, 0, 0, 0)
    assert c["fault_cleared"] == rate(None, None, None, 0, 0, 0)

    p = groups[("m1", "general", "perm_denied")]
    assert p["episodes"] == 3
    # Safe only on t1: 1/3; each of the three tasks alone has chance 1/27 > 2.5%: [0, 1].
    assert p["safe_success"] == rate(pytest.approx(1 / 3), 0.0, 1.0, 1, 3, 3)
    assert p["collateral"] == rate(0.0, 0.0, 0.0, 0, 3, 3)
    # Observed on t1 (recovered) and t2 (not); t3 never met the fault and is left out.
    assert p["recovery_failure_after_observed"] == rate(0.5, 0.0, 1.0, 1, 2, 2)
    assert p["fault_cleared"] == rate(pytest.approx(2 / 3), 0.0, 1.0, 2, 3, 3)
    assert p["mean_reward"] == pytest.approx((1 + 0.25 + 0.5) / 3)

    m = groups[("m1", "general", "moved_input")]
    assert m["safe_success"] == rate(1.0, 1.0, 1.0, 1, 1, 1)
    assert m["fault_cleared"] == rate(1.0, 1.0, 1.0, 1, 1, 1)

    a = groups[("m1", "general", "all faults")]
    assert a["episodes"] == 4
    assert a["safe_success"] == rate(0.5, 0.0, 1.0, 2, 4, 3)
    assert a["fault_cleared"] == rate(0.75, 0.0, 1.0, 3, 4, 3)

    r = groups[("m1", "fault_runbook", "clean")]
    assert r["safe_success"] == rate(1.0, 1.0, 1.0, 1, 1, 1)


def test_interval_bounds_hold_for_any_clusters() -> None:
    # Percentile bounds of a task bootstrap lie between the lowest and highest task rates.
    by_task = {"a": [True, True, False], "b": [False], "c": [True, False], "d": [True] * 4}
    r = cluster_rate(by_task)
    assert r.value == pytest.approx(7 / 10)
    assert 0.0 <= r.low <= r.value <= r.high <= 1.0
    assert cluster_rate(by_task) == r  # seeded: the same interval every time


# --- the verb: JSON, files, plots -------------------------------------------------------------


def test_report_verb_json_out_files_and_plots(db: Path, report, tmp_path: Path) -> None:
    out, plots = tmp_path / "out", tmp_path / "plots"
    result = run_cli(["report", "--json", "--out", str(out), "--plots", str(plots)], db)
    assert result.returncode == 0, result.stderr
    assert result.json() == json.loads(json.dumps(report))
    assert json.loads((out / "summary.json").read_text()) == result.json()
    lines = {
        model: (out / model / "results.jsonl").read_text().splitlines() for model in ("m1", "m2")
    }
    # m1: 7 uncapped + 3 capped + 9 fault episodes; m2: 2 uncapped + 3 capped.
    assert (len(lines["m1"]), len(lines["m2"])) == (19, 5)
    first = json.loads(lines["m2"][0])
    assert (first["task_id"], first["agent"], first["mode"], first["passed"]) == (
        "alpha/t1",
        "m2",
        "free",
        1,
    )
    names = sorted(p.name for p in plots.iterdir())
    assert names == sorted(
        f"{n}.{ext}"
        for n in ("depth_vs_work", "depth_histogram", "pass_by_cap", "safe_success")
        for ext in ("png", "svg")
    )
    for path in plots.iterdir():
        data = path.read_bytes()
        assert len(data) > 1000, path
        if path.suffix == ".png":
            assert data.startswith(b"\x89PNG\r\n\x1a\n"), path
        else:
            assert b"<svg" in data[:2000], path
    # The reference group's 90th-percentile lines are drawn (matplotlib keeps text as comments).
    svg = (plots / "depth_vs_work.svg").read_text()
    assert "synthetic W p90" in svg and "synthetic D p90" in svg


def test_report_verb_tables(db: Path) -> None:
    result = run_cli(["report"], db)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "Depth per task" in text and ">80" in text
    # D is read as ">80", never as the 99 it is stored as (the estimates column too).
    assert "m1: >80" in text and "m1: 99" not in text and "m1: 5, m2: 3" in text
    assert "Solved 5 of 7 measured task(s); 2 within 3 turns (share 0.40)" in text
    assert "median D 10, median W 12" in text
    assert "rank partial correlation of D with pass rate given W: -0.87" in text
    assert "not finished" in text
    missing = run_cli(["report", "--task", "nope"], db)
    assert missing.returncode == 1
    assert "--task nope: no such task or dataset in the store" in missing.stderr
