"""Report statistics checked against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from engine.analysis.stats import (
    cluster_rate,
    pearson,
    percentile,
    rank_partial_correlation,
    ranks,
)


def test_ranks_share_ties():
    assert ranks([10, 20, 20, 5]) == [2.0, 3.5, 3.5, 1.0]


def test_pearson_perfect_and_undefined():
    assert pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert pearson([1, 1, 1], [1, 2, 3]) is None


def test_rank_partial_correlation_matches_residual_method():
    rng = np.random.default_rng(3)
    work = rng.integers(1, 300, 40).astype(float)
    depth = work * 0.1 + rng.normal(0, 5, 40)
    pass_rate = -0.5 * depth + 0.01 * work + rng.normal(0, 2, 40)
    got = rank_partial_correlation(depth, pass_rate, work)
    # independent check: regress the ranks on the ranks of work, correlate the residuals
    rx, ry, rz = (np.array(ranks(list(v))) for v in (depth, pass_rate, work))
    design = np.column_stack([np.ones(40), rz])
    res_x = rx - design @ np.linalg.lstsq(design, rx, rcond=None)[0]
    res_y = ry - design @ np.linalg.lstsq(design, ry, rcond=None)[0]
    expected = float(np.corrcoef(res_x, res_y)[0, 1])
    assert got == pytest.approx(expected, abs=1e-9)
    assert got < 0


def test_rank_partial_correlation_hand_computed():
    # x, y, z are already ranks; deviations from 3 give r_xy = 8/10, r_xz = 6/10, r_yz = 5/10
    x, y, z = [1, 2, 3, 4, 5], [2, 1, 4, 3, 5], [3, 1, 2, 5, 4]
    rxy, rxz, ryz = 0.8, 0.6, 0.5
    assert pearson(x, y) == pytest.approx(rxy)
    assert pearson(x, z) == pytest.approx(rxz)
    assert pearson(y, z) == pytest.approx(ryz)
    expected = (rxy - rxz * ryz) / ((1 - rxz**2) * (1 - ryz**2)) ** 0.5
    assert rank_partial_correlation(x, y, z) == pytest.approx(expected)


def test_rank_partial_correlation_needs_four_points():
    assert rank_partial_correlation([1, 2, 3], [3, 2, 1], [1, 1, 2]) is None


def test_cluster_rate_pools_episodes_and_resamples_tasks():
    rate = cluster_rate({"t1": [True, True], "t2": [False, False], "t3": [True, False]})
    assert rate.value == pytest.approx(3 / 6)
    assert rate.successes == 3 and rate.episodes == 6 and rate.tasks == 3
    assert 0.0 <= rate.low <= rate.value <= rate.high <= 1.0
    assert rate.low < rate.high


def test_cluster_rate_is_deterministic_and_degenerate_cases():
    data = {f"t{i}": [i % 3 == 0, i % 2 == 0] for i in range(12)}
    assert cluster_rate(data) == cluster_rate(data)
    assert cluster_rate({}).value is None
    all_pass = cluster_rate({"a": [True], "b": [True, True]})
    assert (all_pass.value, all_pass.low, all_pass.high) == (1.0, 1.0, 1.0)


def test_percentile_matches_numpy():
    values = [3, 1, 4, 1, 5, 9, 2, 6]
    for q in (0, 10, 50, 90, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
    assert percentile([], 50) is None
