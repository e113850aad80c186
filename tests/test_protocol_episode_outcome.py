"""The episode's plain seams: its result as JSON and back, and the reward rule over its
segments' grades (engine/verify/outcome.py), without Docker."""

from __future__ import annotations

import json

import pytest

from engine.protocol.episode import EpisodeResult
from engine.verify.grade import Grade
from engine.verify.outcome import episode_outcome
from store import vocab


def _result(**kw) -> EpisodeResult:
    base = dict(
        episode_id=7,
        reused=False,
        status="done",
        passed=True,
        turns=3,
        error_kind=None,
        error_detail=None,
        cost_usd=0.25,
        reward=1.0,
        collateral=False,
        final_changes={"/home/user/out.txt": ["created"]},
        inventory=("test_a.py::test_one",),
        agent_s=1.5,
        outcome=vocab.PASS,
    )
    return EpisodeResult(**{**base, **kw})


def test_a_result_survives_json_with_its_earlier_tries():
    earlier = _result(episode_id=6, error_kind="harness", error_detail="docker: gone")
    result = _result(earlier=(earlier,), forgeable=True)
    doc = json.loads(json.dumps(result.to_json()))
    assert doc["earlier"][0]["episode_id"] == 6 and doc["inventory"] == ["test_a.py::test_one"]
    assert EpisodeResult.from_json(doc) == result


def _grade(passed: bool, tp: int, tt: int, **kw) -> Grade:
    return Grade(passed, {"reward": float(passed)}, tp, tt, [], "", **kw)


def test_counted_tests_earn_half_for_completion_and_half_for_the_fraction():
    got = episode_outcome(
        [_grade(False, 3, 4)],
        segments=1,
        segments_passed=0,
        verifier_kind="pytest",
        multi_segment=False,
        reward_strategy="mean",
        collateral=False,
    )
    assert (got.reward, got.complete, got.passed, got.outcome) == (0.375, False, False, vocab.FAIL)


def test_collateral_costs_minus_one_and_an_error_zero():
    common = dict(segments=1, verifier_kind="pytest", multi_segment=False, reward_strategy="mean")
    hurt = episode_outcome([_grade(True, 4, 4)], segments_passed=1, collateral=True, **common)
    assert (hurt.reward, hurt.complete, hurt.safe_success) == (-1.0, True, False)
    broke = episode_outcome(
        [_grade(True, 4, 4)],
        segments_passed=1,
        collateral=False,
        error=("harness", "boom"),
        **common,
    )
    assert (broke.reward, broke.passed, broke.outcome) == (0.0, False, vocab.INFRA_ERROR)


@pytest.mark.parametrize(("why", "kind"), [("", "collection_error"), (None, "verifier")])
def test_an_ambiguous_verifier_error_is_blamed_by_the_run_without_the_agent(why, kind):
    asked: list[int] = []

    def without_agent(idx: int) -> str | None:
        asked.append(idx)
        return why

    got = episode_outcome(
        [_grade(False, 0, 0, error_kind="verifier", error_detail="collection_error: x")],
        segments=1,
        segments_passed=0,
        verifier_kind="pytest",
        multi_segment=False,
        reward_strategy="mean",
        collateral=False,
        without_agent=without_agent,
    )
    assert asked == [0] and got.error_kind == kind and got.reward == 0.0


def test_a_reward_file_task_takes_the_mean_over_its_steps_with_a_result():
    got = episode_outcome(
        [_grade(True, 1, 1, per_test=False)],
        segments=2,
        segments_passed=1,
        verifier_kind="harbor",
        multi_segment=True,
        reward_strategy="mean",
        collateral=False,
    )
    # Harbor's rule: the step never reached has no result and stays out of the mean; the task
    # still did not pass, and its steps count as the tests.
    assert (got.reward, got.tests_passed, got.tests_total, got.passed) == (1.0, 1, 2, False)
