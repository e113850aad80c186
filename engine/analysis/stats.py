"""Statistics used by reports: task-cluster bootstrap intervals and rank partial correlation.

Plain functions over plain lists; every random draw comes from a seeded generator so a report
printed twice shows the same interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

BOOTSTRAP_SAMPLES = 2000
BOOTSTRAP_SEED = 20260


@dataclass(frozen=True)
class Rate:
    """A rate over episodes with a 95% interval from resampling whole tasks."""

    value: float | None
    low: float | None
    high: float | None
    successes: int
    episodes: int
    tasks: int

    def as_dict(self) -> dict:
        return {
            "value": self.value,
            "ci95": [self.low, self.high],
            "successes": self.successes,
            "episodes": self.episodes,
            "tasks": self.tasks,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Rate:
        """The rate back from its `as_dict()` form (the report's JSON)."""
        low, high = data["ci95"]
        return cls(data["value"], low, high, data["successes"], data["episodes"], data["tasks"])

    def __str__(self) -> str:
        if self.value is None:
            return "-"
        return (
            f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}] ({self.successes}/{self.episodes})"
        )


def cluster_rate(
    by_task: Mapping[str, Sequence[bool]],
    samples: int = BOOTSTRAP_SAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Rate:
    """Pooled success rate over all episodes, with a 95% percentile interval from resampling
    tasks (clusters) with replacement: episodes of one task are not independent."""
    clusters = [(sum(v), len(v)) for v in by_task.values() if len(v) > 0]
    successes = sum(s for s, _ in clusters)
    episodes = sum(n for _, n in clusters)
    if episodes == 0:
        return Rate(None, None, None, 0, 0, 0)
    value = successes / episodes
    draws = sorted(_bootstrap_draws(clusters, samples, seed))
    low = draws[int(0.025 * (samples - 1))]
    high = draws[math.ceil(0.975 * (samples - 1))]
    return Rate(value, low, high, successes, episodes, len(clusters))


def _bootstrap_draws(clusters: list[tuple[int, int]], samples: int, seed: int) -> list[float]:
    """The pooled rate of `samples` resamples of the clusters. Vectorized: a report has a few
    dozen rates over hundreds of tasks, which drawing one index at a time took seconds for.
    Drawn in blocks so that thousands of tasks stay within a few megabytes."""
    import numpy as np

    rng = np.random.default_rng(seed)
    k = len(clusters)
    succ = np.array([s for s, _ in clusters], dtype=np.int64)
    size = np.array([n for _, n in clusters], dtype=np.int64)
    block = max(1, 500_000 // k)
    out: list[float] = []
    for start in range(0, samples, block):
        picks = rng.integers(0, k, size=(min(block, samples - start), k))
        out += (succ[picks].sum(axis=1) / size[picks].sum(axis=1)).tolist()
    return out


def ranks(values: Sequence[float]) -> list[float]:
    """Average ranks (1-based), ties sharing the mean of their positions."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        mean_rank = (i + j) / 2 + 1
        for k in range(i, j + 1):
            out[order[k]] = mean_rank
        i = j + 1
    return out


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    n = len(x)
    if n < 2 or n != len(y):
        return None
    mx, my = sum(x) / n, sum(y) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def rank_partial_correlation(
    x: Sequence[float], y: Sequence[float], z: Sequence[float]
) -> float | None:
    """Spearman partial correlation of x and y given z (depth and pass rate given work).
    None when it is undefined (fewer than 4 points, or a constant variable)."""
    if len(x) < 4:
        return None
    rx, ry, rz = ranks(x), ranks(y), ranks(z)
    rxy, rxz, ryz = pearson(rx, ry), pearson(rx, rz), pearson(ry, rz)
    if rxy is None or rxz is None or ryz is None:
        return None
    denominator = math.sqrt((1 - rxz**2) * (1 - ryz**2))
    if denominator == 0:
        return None
    return (rxy - rxz * ryz) / denominator


def median_or_none(values: Sequence[float]) -> float | None:
    """The arithmetic median (for counts such as W), None for no values."""
    return median(values) if values else None


def order_quantile(values: Sequence[int], q: float) -> int | None:
    """The q-quantile (q in 0..1) as an order statistic: the smallest value with at least a
    share q of the values at or below it (numpy's "inverted_cdf"). For ordinal figures such as D
    (caps, and 99 for ">80"), whose averages mean nothing: the answer is always one of the
    values. q = 0.5 gives the lower median for an even count."""
    if not values:
        return None
    if not 0 <= q <= 1:
        raise ValueError(f"quantile {q} is outside 0..1")
    data = sorted(values)
    return data[max(math.ceil(q * len(data)) - 1, 0)]


def lower_median(values: Sequence[int]) -> int | None:
    """The median of an ordinal figure: the middle value, the lower of the two for an even
    count (D of 5 and >80 gives 5)."""
    return order_quantile(values, 0.5)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100), as numpy's default; for counts (W), not
    for D (see order_quantile)."""
    if not values:
        return None
    data = sorted(values)
    pos = (len(data) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)
