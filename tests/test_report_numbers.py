"""D is reported as the ordinal figure it is (docs/protocol.md): lower medians and order-statistic
quantiles, ">80" wherever a person reads it, and always the minimum of the estimates beside it.
Hand-built stores written through the store functions the engine uses, then `build_report` and
`depthtui report`."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from engine.analysis.report import build_report
from engine.analysis.stats import lower_median, order_quantile
from engine.protocol.ladder import LadderState, ModelEstimate
from engine.protocol.measure import _write_estimates
from store import protocol as sp
from store.db import Store
from store.tasks import upsert_dataset, upsert_task
from tests.fixtures_measure import run_cli
from tests.test_measure_report import make_task


def test_order_quantile_is_numpy_inverted_cdf_and_the_median_is_the_lower_one() -> None:
    rng = np.random.default_rng(3)
    for n in range(1, 12):
        values = [int(v) for v in rng.choice([1, 2, 3, 5, 10, 20, 40, 80, 99], size=n)]
        for q in (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0):
            assert order_quantile(values, q) == np.quantile(values, q, method="inverted_cdf")
    assert lower_median([5, 99]) == 5  # D of 5 and >80: 5, not 52
    assert lower_median([1, 2, 5, 40]) == 2  # not 3.5, which is no cap
    assert lower_median([1, 3, 10]) == 3 and lower_median([]) is None
    with pytest.raises(ValueError, match=r"outside 0\.\.1"):
        order_quantile([1], 50)


def _measured(store: Store, task_id: str, d: int, per_model: dict[str, int], **kw) -> None:
    task = make_task(task_id, 4, None)
    upsert_task(store, task)
    rows = [sp.EstimateRow("", 10, d, {"solved": True, "models": list(per_model), **kw})]
    rows += [sp.EstimateRow(m, None, e) for m, e in per_model.items()]
    sp.replace_estimates(store, task_id, task.content_hash, "ladder", rows, True)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("numbers") / "depthtui.db"
    with Store(path) as store:
        for name in ("pair", "four"):
            upsert_dataset(store, name, f"/nonexistent/{name}")
        _measured(store, "pair/a", 5, {"m1": 5})
        _measured(store, "pair/b", 99, {"m1": 99})
        for i, d in enumerate([1, 2, 5, 40]):
            _measured(store, f"four/t{i}", d, {"m1": d})
    return path


def test_medians_of_d_are_lower_medians_with_a_display_field(db: Path) -> None:
    report = build_report(Store(db).conn)
    by_name = {d["dataset"]: d for d in report["datasets"]}
    assert (by_name["pair"]["median_D"], by_name["pair"]["median_D_display"]) == (5, "5")
    assert (by_name["four"]["median_D"], by_name["four"]["median_D_display"]) == (2, "2")
    # All six: 1, 2, 5, 5, 40, >80 -> the third.
    h = report["headline"]
    assert (h["median_D"], h["median_D_display"]) == (5, "5")
    tasks = {t["id"]: t for t in report["tasks"]}
    assert (tasks["pair/b"]["D"], tasks["pair/b"]["D_display"]) == (99, ">80")  # JSON keeps 99
    assert tasks["pair/b"]["estimates_display"] == {"m1": ">80"}


def test_a_median_above_80_reads_as_above_80(tmp_path: Path) -> None:
    with Store(tmp_path / "d.db") as store:
        upsert_dataset(store, "deep", "/nonexistent/deep")
        _measured(store, "deep/a", 40, {"m1": 40})
        _measured(store, "deep/b", 99, {"m1": 99})
        _measured(store, "deep/c", 99, {"m1": 99})
        h = build_report(store.conn)["headline"]
    assert (h["median_D"], h["median_D_display"]) == (99, ">80")
    text = run_cli(["report"], tmp_path / "d.db").stdout
    assert "median D >80" in text and "99" not in text


def test_report_tables_never_print_99(db: Path) -> None:
    text = run_cli(["report"], db).stdout
    assert "m1: >80" in text and "99" not in text
    assert "median D 5, median W 4.0" in text


def test_a_rerun_with_another_model_list_leaves_no_stale_estimate(tmp_path: Path) -> None:
    """The seen case: a ladder over [m1, m2], rerun over [m2] alone, left "m1: 99" beside D 40...
    The write replaces the task's estimates under the estimator, so only m2's is left."""
    with Store(tmp_path / "s.db") as store:
        task = make_task("x/t", 3, None)
        upsert_task(store, task)
        unit = SimpleNamespace(store=store)
        first = LadderState(
            True, True, 90, 40, (ModelEstimate("m1", 99, (1, 2)), ModelEstimate("m2", 40, ()))
        )
        _write_estimates(unit, task, "ladder", ["m1", "m2"], first, {})
        again = LadderState(True, True, 30, 40, (ModelEstimate("m2", 40, (1, 2, 3, 5)),))
        _write_estimates(unit, task, "ladder", ["m2"], again, {})
        stored = store.query("SELECT model, estimate FROM estimates ORDER BY model")
        assert [(r["model"], r["estimate"]) for r in stored] == [("", 40), ("m2", 40)]
        (row,) = build_report(store.conn)["tasks"]
    assert row["estimates"] == {"m2": 40} and row["D"] == min(row["estimates"].values())


def test_a_row_left_by_an_older_model_list_is_not_reported_beside_d(tmp_path: Path) -> None:
    """A store written before estimates were replaced can still hold such a row: the report
    reads only the models the summary names."""
    with Store(tmp_path / "old.db") as store:
        task = make_task("x/t", 3, None)
        upsert_task(store, task)
        for model, est, detail in [("", 40, {"solved": True, "models": ["m2"]}), ("m2", 40, {})]:
            sp.put_estimate(
                store, task.id, task.content_hash, "ladder", model,
                n_turns=30, estimate=est, finished=True, detail=detail,
            )  # fmt: skip
        sp.put_estimate(
            store, task.id, task.content_hash, "ladder", "m1",
            n_turns=90, estimate=99, finished=True, detail={},
        )  # fmt: skip
        (row,) = build_report(store.conn)["tasks"]
    assert row["estimates"] == {"m2": 40} and row["estimates_display"] == {"m2": "40"}


def test_other_searches_are_reported_apart_never_in_the_protocols_figures(tmp_path: Path) -> None:
    with Store(tmp_path / "b.db") as store:
        upsert_dataset(store, "x", "/nonexistent/x")
        _measured(store, "x/t", 20, {"m1": 20}, episodes={"a": 1, "b": 2, "c": 3})
        task = make_task("x/t", 4, None)
        rows = [
            sp.EstimateRow("", 10, 99, {"solved": True, "models": ["m1"], "episodes": {"a": 1}})
        ]
        rows.append(sp.EstimateRow("m1", 10, 99))
        sp.replace_estimates(store, "x/t", task.content_hash, "ladder/bisect", rows, True)
        report = build_report(store.conn)
    (t,) = report["tasks"]
    assert (t["protocol"], t["D"], t["estimates"], t["runs"]) == ("ladder", 20, {"m1": 20}, 3)
    assert report["headline"]["median_D"] == 20
    (b,) = report["search_estimates"]
    assert (b["estimator"], b["D"], b["D_display"], b["runs"]) == ("ladder/bisect", 99, ">80", 1)
    assert (b["protocol_D"], b["protocol_D_display"], b["protocol_runs"]) == (20, "20", 3)
