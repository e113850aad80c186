"""The DEPTH measurement protocol as a pure decision procedure (docs/protocol.md).

Given the outcomes recorded so far for one task, `evaluate` says which run to do next, or that
measurement is finished, and what the outcomes imply. Keeping this free of Docker, models and the
store is what lets a rerun resume exactly where a crash left off (completed runs are looked up,
not repeated), lets the tests cover every branch with tables, and lets `depthtui bench search`
drive the very same code on simulated outcomes.

1. The first model runs the task twice with no stated cap (a 150-turn safety ceiling). If neither
   passes the task has no estimate. N = fewest turns among passing runs.
2. It then searches the caps below N, up to two runs per cap (the second only when the first
   fails); a cap passes when one of its runs passes. Caps at or above N count as passed.
3. Each later model searches only the caps below the smallest estimate so far, same retry rule,
   with no uncapped runs.
4. D = the smallest estimate across models; passing only above the largest cap gives D > 80,
   stored as 99.

How step 2 and 3 choose the next cap is the search (`SEARCHES`): "protocol" climbs the caps in
increasing order and stops at the first passing cap (DEPTH's own rule); "bisect" bisects them.
Each search is its own estimator: its estimates are stored and reported under its own name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from store import vocab
from store.vocab import ABOVE_LARGEST_CAP, ABOVE_LARGEST_CAP_TEXT, CAPS

UNCAPPED_RUNS = 2
RUNS_PER_CAP = 2


@dataclass(frozen=True)
class Run:
    """One episode the protocol asks for. cap None = no stated cap (safety ceiling only)."""

    model: str
    cap: int | None
    attempt: int


@dataclass(frozen=True)
class RunVerdict:
    """What one run told the ladder: whether it passed, in how many turns."""

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


# --- searching the caps below a bound ----------------------------------------------------------
#
# A search sees the caps it may try (sorted) and the results of the runs made at each so far; it
# returns the index of the cap to run next (its next attempt), or None when it has its answer.
# The shared part (`_cap_search`) keeps the retry rule (at most two runs per cap, none after a
# pass) and the answer: the smallest cap with a passing run (None: none passed). So a search only
# decides the order, and whether a failed cap gets its second run.

Tries = Mapping[int, tuple[bool, ...]]  # index into the caps -> results of its runs, in order
Chooser = Callable[[Sequence[int], Tries], int | None]


def _passed(results: Sequence[bool]) -> bool:
    return any(results)


def _bounds(caps: Sequence[int], tries: Tries, fails_needed: int) -> tuple[int, int]:
    """The range [lo, hi) of caps still undecided: above every cap that failed `fails_needed`
    times, below every cap that passed (a pass at a cap is taken to hold at every higher cap)."""
    failed = [i for i, r in tries.items() if not _passed(r) and len(r) >= fails_needed]
    passed = [i for i, r in tries.items() if _passed(r)]
    return max((i + 1 for i in failed), default=0), min(passed, default=len(caps))


def climb(caps: Sequence[int], tries: Tries) -> int | None:
    """DEPTH's rule: the caps in increasing order, two runs each before moving up, stopping at
    the first that passes."""
    lo, hi = _bounds(caps, tries, RUNS_PER_CAP)
    return lo if lo < hi else None


def bisect(caps: Sequence[int], tries: Tries) -> int | None:
    """Bisect the caps, taking one failed run as a fail while searching; then give the cap just
    below the answer its second run, as the protocol would have, and search again below it if
    that run passes.

    The protocol's second run at a failing cap is what makes climbing to D = 20 cost ten runs;
    bisection needs only about log2 of the caps below N probes, and only the boundary's second
    run decides the answer the way the protocol's retry does."""
    lo, hi = _bounds(caps, tries, 1)
    if lo < hi:
        return (lo + hi) // 2
    below = hi - 1
    if below >= 0 and len(tries.get(below, ())) < RUNS_PER_CAP:
        return below
    return None


SEARCHES: dict[str, Chooser] = {"protocol": climb, "bisect": bisect}
DEFAULT_SEARCH = "protocol"


def _cap_search(
    model: str, caps: Sequence[int], outcomes: Mapping[Run, RunVerdict], choose: Chooser
) -> tuple[int | None, Run | None, tuple[int, ...]]:
    """Search `caps` with `choose`; return (passing cap, next run needed, caps tried in order)."""
    tries: dict[int, tuple[bool, ...]] = {}
    tried: list[int] = []
    while (i := choose(caps, tries)) is not None:
        done = tries.get(i, ())
        if _passed(done) or len(done) >= RUNS_PER_CAP:
            raise ValueError(f"search chose cap {caps[i]} after it was decided")
        run = Run(model, caps[i], len(done))
        outcome = outcomes.get(run)
        if outcome is None or outcome.error:
            return None, run, tuple(tried)
        tries[i] = (*done, outcome.passed)
        if not done:
            tried.append(caps[i])
    passing = [caps[i] for i, r in tries.items() if _passed(r)]
    return (min(passing) if passing else None), None, tuple(tried)


def evaluate(
    models: Sequence[str],
    outcomes: Mapping[Run, RunVerdict],
    caps: Sequence[int] = CAPS,
    search: str = DEFAULT_SEARCH,
) -> LadderState:
    """Replay the protocol over the recorded outcomes and say where it stands."""
    if not models:
        raise ValueError("the ladder needs at least one measurement model")
    if search not in SEARCHES:
        known = ", ".join(SEARCHES)
        raise ValueError(f"unknown search '{search}' (expected one of: {known})")
    choose = SEARCHES[search]
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
    found, need, tried = _cap_search(first, below_n, outcomes, choose)
    if need is not None:
        return LadderState(False, True, n_turns, None, next=need)
    first_estimate = found if found is not None else smallest_cap_at_least(n_turns, caps)
    per_model = [ModelEstimate(first, first_estimate, tried)]
    best = first_estimate

    for model in models[1:]:
        below = tuple(c for c in caps if c < best)
        found, need, tried = _cap_search(model, below, outcomes, choose)
        if need is not None:
            return LadderState(False, True, n_turns, best, tuple(per_model), next=need)
        per_model.append(ModelEstimate(model, found, tried))
        if found is not None:
            best = min(best, found)

    return LadderState(True, True, n_turns, best, tuple(per_model))


def format_depth(depth: int | None) -> str:
    """D as a person reads it: a cap, ">80", or "-" when there is none."""
    if depth is None:
        return "-"
    return ABOVE_LARGEST_CAP_TEXT if depth == ABOVE_LARGEST_CAP else str(depth)


# --- estimator names ---------------------------------------------------------------------------
#
# The store keeps estimates under an estimator name: "<kind>[+<fault>][/<search>]", e.g.
# "ladder", "audit", "ladder+moved_input", "ladder/bisect". The protocol's own search has no
# suffix, so estimates stored before searches existed keep their meaning.


@dataclass(frozen=True)
class Estimator:
    kind: str  # ladder | audit
    fault: str = vocab.NO_FAULT
    search: str = DEFAULT_SEARCH

    @property
    def name(self) -> str:
        out = self.kind if self.fault == vocab.NO_FAULT else f"{self.kind}+{self.fault}"
        return out if self.search == DEFAULT_SEARCH else f"{out}/{self.search}"


def parse_estimator(name: str) -> Estimator:
    base, _, search = name.partition("/")
    kind, _, fault = base.partition("+")
    return Estimator(kind, fault or vocab.NO_FAULT, search or DEFAULT_SEARCH)
