"""Every branch of the depth protocol (docs/protocol.md), on synthetic outcomes, and the bisect
search that shares its retry rule and bookkeeping."""

from __future__ import annotations

import pytest

from engine.protocol.ladder import (
    ABOVE_LARGEST_CAP,
    Run,
    RunVerdict,
    evaluate,
    format_depth,
    smallest_cap_at_least,
)

A, B, C = "model-a", "model-b", "model-c"
P = RunVerdict(passed=True, turns=0)
F = RunVerdict(passed=False, turns=0)


def ok(turns: int) -> RunVerdict:
    return RunVerdict(passed=True, turns=turns)


def drive(models, script, search="protocol"):
    """Run the protocol to the end, answering each requested run from `script`
    ({(model, cap): [outcome of attempt 0, outcome of attempt 1]}); return state and runs made."""
    outcomes = {}
    asked = []
    for _ in range(100):
        state = evaluate(models, outcomes, search=search)
        if state.finished:
            return state, asked
        run = state.next
        asked.append((run.model, run.cap, run.attempt))
        outcomes[run] = script[(run.model, run.cap)][run.attempt]
    raise AssertionError("protocol did not finish")


def test_unsolved_when_neither_uncapped_run_passes():
    state, asked = drive([A, B], {(A, None): [F, F]})
    assert state.solved is False and state.depth is None and state.n_turns is None
    assert asked == [(A, None, 0), (A, None, 1)]


def test_both_uncapped_runs_are_made_even_when_the_first_passes():
    state, asked = drive([A], {(A, None): [ok(4), ok(2)], (A, 1): [F, F]})
    assert asked[:2] == [(A, None, 0), (A, None, 1)]
    assert state.n_turns == 2


def test_n_is_fewest_turns_among_passing_runs():
    state, _ = drive([A], {(A, None): [ok(7), F], **{(A, c): [F, F] for c in (1, 2, 3, 5)}})
    assert state.n_turns == 7
    # no cap below 7 passed: the smallest cap >= N counts as passed
    assert state.depth == 10


def test_caps_tried_in_increasing_order_second_run_only_after_a_fail():
    script = {(A, None): [ok(12), ok(15)], (A, 1): [F, F], (A, 2): [F, P], (A, 3): [P, P]}
    state, asked = drive([A], script)
    assert asked == [
        (A, None, 0),
        (A, None, 1),
        (A, 1, 0),
        (A, 1, 1),
        (A, 2, 0),
        (A, 2, 1),
    ]
    assert state.depth == 2 and state.finished


def test_first_run_pass_skips_the_second():
    state, asked = drive([A], {(A, None): [ok(3), F], (A, 1): [P, F]})
    assert asked == [(A, None, 0), (A, None, 1), (A, 1, 0)]
    assert state.depth == 1


def test_n_of_one_needs_no_capped_runs():
    state, asked = drive([A], {(A, None): [ok(1), ok(1)]})
    assert asked == [(A, None, 0), (A, None, 1)]
    assert state.depth == 1


def test_later_model_tries_only_caps_below_the_smallest_estimate():
    script = {
        (A, None): [ok(6), F],
        **{(A, c): [F, F] for c in (1, 2, 3, 5)},  # A's estimate: 10 (smallest cap >= 6)
        (B, 1): [F, F],
        (B, 2): [F, F],
        (B, 3): [F, P],
    }
    state, asked = drive([A, B], script)
    b_runs = [r for r in asked if r[0] == B]
    assert b_runs == [(B, 1, 0), (B, 1, 1), (B, 2, 0), (B, 2, 1), (B, 3, 0), (B, 3, 1)]
    assert all(r[1] is not None for r in b_runs), "later models make no uncapped runs"
    assert [(m.model, m.estimate) for m in state.per_model] == [(A, 10), (B, 3)]
    assert state.depth == 3


def test_third_model_is_bounded_by_the_best_estimate_so_far():
    script = {
        (A, None): [ok(30), F],
        **{(A, c): [F, F] for c in (1, 2, 3, 5, 10, 20)},  # A: 40
        **{(B, c): [F, F] for c in (1, 2, 3)},
        (B, 5): [P, F],  # B: 5
        (C, 1): [F, F],
        (C, 2): [F, F],
        (C, 3): [F, F],
    }
    state, asked = drive([A, B, C], script)
    assert {r[1] for r in asked if r[0] == C} == {1, 2, 3}
    assert state.per_model[2].estimate is None
    assert state.depth == 5


def test_later_model_that_finds_nothing_below_keeps_the_estimate():
    script = {(A, None): [ok(2), F], (A, 1): [F, F], (B, 1): [F, F]}
    state, _ = drive([A, B], script)
    assert state.depth == 2 and state.per_model[1].estimate is None


def test_passing_only_above_the_largest_cap_is_reported_as_above_80():
    script = {(A, None): [ok(120), F], **{(A, c): [F, F] for c in (1, 2, 3, 5, 10, 20, 40, 80)}}
    state, asked = drive([A], script)
    assert state.depth == ABOVE_LARGEST_CAP and format_depth(state.depth) == ">80"
    assert len([r for r in asked if r[1] is not None]) == 16


def test_later_model_can_bring_a_task_below_80():
    script = {
        (A, None): [ok(100), F],
        **{(A, c): [F, F] for c in (1, 2, 3, 5, 10, 20, 40, 80)},
        **{(B, c): [F, F] for c in (1, 2, 3, 5, 10, 20)},
        (B, 40): [F, P],
    }
    state, _ = drive([A, B], script)
    assert state.depth == 40


def test_an_errored_run_is_asked_for_again_not_counted_as_a_fail():
    outcomes = {Run(A, None, 0): RunVerdict(False, 0, error=True)}
    state = evaluate([A], outcomes)
    assert not state.finished and state.next == Run(A, None, 0)


def test_partial_outcomes_report_unfinished_with_the_next_run():
    outcomes = {Run(A, None, 0): ok(5), Run(A, None, 1): F, Run(A, 1, 0): F}
    state = evaluate([A, B], outcomes)
    assert not state.finished and state.solved and state.n_turns == 5
    assert state.next == Run(A, 1, 1)


@pytest.mark.parametrize(
    ("n", "expected"), [(1, 1), (2, 2), (4, 5), (5, 5), (6, 10), (80, 80), (81, 99), (150, 99)]
)
def test_smallest_cap_at_least(n, expected):
    assert smallest_cap_at_least(n) == expected


def test_no_models_is_an_error():
    with pytest.raises(ValueError, match="at least one"):
        evaluate([], {})


# --- bisect ---------------------------------------------------------------------------------


def test_bisect_probes_the_middle_and_gives_only_the_boundary_its_second_run():
    # N 30: caps below are 1 2 3 5 10 20 (indices 0..5). Middle (0+6)//2 = 3 -> cap 5 fails
    # once; (4+6)//2 = 5 -> cap 20 passes; then cap 10 fails once; cap 10 is just below the
    # answer, so it gets its second run, which fails: the estimate is 20 in 5 capped runs
    # (the protocol: 11).
    script = {
        (A, None): [ok(30), F],
        **{(A, c): [F, F] for c in (1, 2, 3, 5, 10)},
        (A, 20): [P, P],
    }
    state, asked = drive([A], script, "bisect")
    assert asked[2:] == [(A, 5, 0), (A, 20, 0), (A, 10, 0), (A, 10, 1)]
    assert state.depth == 20 and state.per_model[0].tried == (5, 20, 10)
    protocol, p_asked = drive([A], script)
    assert protocol.depth == 20 and len(p_asked) - 2 == 11


def test_bisect_searches_below_a_boundary_whose_second_run_passes():
    # Caps below N 6: 1 2 3 5. Middle 2 -> cap 3 fails once; (3+4)//2 = 3 -> cap 5 passes; cap 3
    # is just below: its second run passes, so the search goes on below it (cap 2, then cap 2's
    # second run as the new boundary) and ends at 3.
    script = {(A, None): [ok(6), F], (A, 1): [F, F], (A, 2): [F, F], (A, 3): [F, P], (A, 5): [P]}
    state, asked = drive([A], script, "bisect")
    assert asked[2:] == [(A, 3, 0), (A, 5, 0), (A, 3, 1), (A, 2, 0), (A, 2, 1)]
    assert state.depth == 3


def test_bisect_bounds_later_models_like_the_protocol_and_redoes_errored_runs():
    script = {
        (A, None): [ok(6), F],
        **{(A, c): [F, F] for c in (1, 2, 3, 5)},  # A: 10 (smallest cap >= 6)
        **{(B, c): [F, F] for c in (1, 2)},
        (B, 3): [P],
        (B, 5): [P],
    }
    state, asked = drive([A, B], script, "bisect")
    assert {r[1] for r in asked if r[0] == B} <= {1, 2, 3, 5}
    assert [(m.model, m.estimate) for m in state.per_model] == [(A, 10), (B, 3)]
    outcomes = {
        Run(A, None, 0): ok(6),
        Run(A, None, 1): F,
        Run(A, 3, 0): RunVerdict(False, 0, True),
    }
    again = evaluate([A], outcomes, search="bisect")
    assert not again.finished and again.next == Run(A, 3, 0)


def test_unknown_search_is_an_error():
    with pytest.raises(ValueError, match="unknown search 'binary'"):
        evaluate([A], {}, search="binary")
