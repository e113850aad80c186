"""The DEPTH measurement protocol as a pure decision procedure (SPEC §4).

Given the outcomes recorded so far for one task, `next_run` says which run to do next, or that
measurement is finished; `estimates` says what the outcomes imply. Keeping this free of Docker,
models and the store is what lets a rerun resume exactly where a crash left off (completed runs
are looked up, not repeated) and lets the tests cover every branch with tables.

1. The first model runs the task twice with no stated cap (a 150-turn safety ceiling). If neither
   passes the task has no estimate. N = fewest turns among passing runs.
2. It then tries caps below N in increasing order, up to two runs per cap (the second only when
   the first fails), stopping at the first passing cap. Caps at or above N count as passed.
3. Each later model tries only caps below the smallest estimate so far, same retry rule, with no
   uncapped runs.
4. D = the smallest estimate across models; passing only above the largest cap gives D > 80,
   stored as 99.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

CAPS: tuple[int, ...] = (1, 2, 3, 5, 10, 20, 40, 80)
UNCAPPED_RUNS = 2
RUNS_PER_CAP = 2
ABOVE_LARGEST_CAP = 99  # D > 80


@dataclass(frozen=True)
class Run:
    """One episode the protocol asks for. cap None = no stated cap (safety ceiling only)."""

    model: str
    cap: int | None
    attempt: int


@dataclass(frozen=True)
class Outcome:
    passed: bool
    turns: int
    # Harness/verifier/endpoint errors are not the model failing: the run is asked for again
    # (bounded by the caller's retry policy) instead of counting as a fail.
    error: bool = False


@dataclass(frozen=True)
class ModelEstimate:
    model: str
    estimate: int | None  # smallest passing cap; 99 = above the largest cap; None = none found
    tried: tuple[int, ...] = ()


@dataclass(frozen=True)
class LadderState:
    """What the outcomes imply so far."""

    finished: bool
    solved: bool | None  # None until the uncapped runs are in
    n_turns: int | None
    depth: int | None
    per_model: tuple[ModelEstimate, ...] = field(default_factory=tuple)
    next: Run | None = None


def smallest_cap_at_least(n: int, caps: Sequence[int] = CAPS) -> int:
    """The estimate implied by N when no cap below N passed."""
    for cap in caps:
        if cap >= n:
            return cap
    return ABOVE_LARGEST_CAP


def _cap_search(
    model: str, caps: Sequence[int], outcomes: Mapping[Run, Outcome]
) -> tuple[int | None, Run | None, tuple[int, ...]]:
    """Try `caps` in increasing order; return (passing cap, next run needed, caps tried)."""
    tried: list[int] = []
    for cap in caps:
        results = []
        for attempt in range(RUNS_PER_CAP):
            run = Run(model, cap, attempt)
            outcome = outcomes.get(run)
            if outcome is None or outcome.error:
                return None, run, tuple(tried)
            results.append(outcome.passed)
            if outcome.passed:
                break
        tried.append(cap)
        if any(results):
            return cap, None, tuple(tried)
    return None, None, tuple(tried)


def evaluate(
    models: Sequence[str], outcomes: Mapping[Run, Outcome], caps: Sequence[int] = CAPS
) -> LadderState:
    """Replay the protocol over the recorded outcomes and say where it stands."""
    if not models:
        raise ValueError("the ladder needs at least one measurement model")
    caps = tuple(sorted(caps))
    first = models[0]

    uncapped = []
    for attempt in range(UNCAPPED_RUNS):
        run = Run(first, None, attempt)
        outcome = outcomes.get(run)
        if outcome is None or outcome.error:
            return LadderState(False, None, None, None, next=run)
        uncapped.append(outcome)
    passing = [o.turns for o in uncapped if o.passed]
    if not passing:
        return LadderState(True, False, None, None)
    n_turns = min(passing)

    below_n = tuple(c for c in caps if c < n_turns)
    found, need, tried = _cap_search(first, below_n, outcomes)
    if need is not None:
        return LadderState(False, True, n_turns, None, next=need)
    first_estimate = found if found is not None else smallest_cap_at_least(n_turns, caps)
    per_model = [ModelEstimate(first, first_estimate, tried)]
    best = first_estimate

    for model in models[1:]:
        below = tuple(c for c in caps if c < best)
        found, need, tried = _cap_search(model, below, outcomes)
        if need is not None:
            return LadderState(False, True, n_turns, best, tuple(per_model), next=need)
        per_model.append(ModelEstimate(model, found, tried))
        if found is not None:
            best = min(best, found)

    return LadderState(True, True, n_turns, best, tuple(per_model))


def format_depth(depth: int | None) -> str:
    if depth is None:
        return "-"
    return ">80" if depth == ABOVE_LARGEST_CAP else str(depth)
