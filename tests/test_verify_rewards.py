"""Harbor reward files, the min_reward gate, the multi-step strategy, and the episode outcome and
RL reward (docs/verifier.md), table-tested."""

from __future__ import annotations

import math

import pytest

from engine.verify.outcome import outcome, outcome_of
from engine.verify.rewards import (
    RewardError,
    combine_steps,
    gate_decision,
    gate_passes,
    parse_rewards,
)
from engine.verify.verdict import Verdict, failed_closed


@pytest.mark.parametrize(
    ("json_bytes", "txt_bytes", "expected"),
    [
        (None, b"1\n", {"reward": 1.0}),
        (None, b" 0.25 ", {"reward": 0.25}),
        (b'{"reward": 0.5, "style": 1}', b"0", {"reward": 0.5, "style": 1.0}),
        (b'{"accuracy": 3}', None, {"accuracy": 3.0}),
    ],
)
def test_parse_rewards(json_bytes, txt_bytes, expected):
    assert parse_rewards(json_bytes, txt_bytes) == expected


@pytest.mark.parametrize(
    ("json_bytes", "txt_bytes", "needle"),
    [
        (None, None, "neither"),
        (None, b"", "reward.txt is empty"),
        (None, b"pass", "expected one number"),
        (None, b"nan", "finite"),
        (b"", b"1", "reward.json is empty"),  # an empty reward.json does not fall back
        (b"{}", None, "non-empty"),
        (b"[1]", None, "flat JSON object"),
        (b"{not json", None, "not JSON"),
        (b'{"reward": true}', None, "expected a number"),
        (b'{"reward": "1"}', None, "expected a number"),
        (b'{"reward": {"a": 1}}', None, "expected a number"),
        (b'{"reward": Infinity}', None, "finite"),
    ],
)
def test_bad_reward_files(json_bytes, txt_bytes, needle):
    with pytest.raises(RewardError, match=needle):
        parse_rewards(json_bytes, txt_bytes)


@pytest.mark.parametrize(
    ("rewards", "min_reward", "passes"),
    [
        ({"reward": 1.0}, None, True),
        ({"reward": 0.9}, None, False),
        ({"reward": 0.5}, 0.5, True),
        ({"reward": 0.49}, 0.5, False),
        ({"other": 1.0}, 0.5, False),  # a missing key counts as -inf
        (None, 0.0, False),  # a missing result counts as -inf
        (None, None, False),
        ({"a": 1.0, "b": 0.2}, {"a": 1.0, "b": 0.0}, True),
        ({"a": 1.0, "b": -0.1}, {"a": 1.0, "b": 0.0}, False),
        ({"a": 1.0}, {"a": 1.0, "b": -100.0}, False),
        ({"reward": -5.0}, {}, True),  # an empty table gates nothing
        # Several keys and no min_reward: every key must be full (issue 25).
        ({"correctness": 1.0, "performance": 1.0}, None, True),
        ({"correctness": 1.0, "performance": 0.5}, None, False),
        ({"reward": 1.0, "style": 0.0}, None, True),  # a 'reward' key decides alone
    ],
)
def test_gate(rewards, min_reward, passes):
    assert gate_passes(rewards, min_reward) is passes


def test_gate_says_which_key_decided():
    passed, why = gate_decision({"correctness": 1.0, "performance": 0.25}, None)
    assert not passed
    assert why.endswith("every key must be at least 1; 'performance' is 0.25 < 1")
    passed, why = gate_decision({"a": 0.7}, {"a": 0.5, "b": 0.1})
    assert not passed and why.endswith("'b' is missing < 0.1")
    passed, why = gate_decision({"reward": 0.6}, 0.5)
    assert passed and why == "min_reward 0.5 gates 'reward'; 'reward' 0.6"


def test_combine_steps():
    steps = [{"reward": 1.0, "style": 0.5}, None, {"reward": 0.0}]
    # mean over steps with a result; a key a step lacks counts 0
    assert combine_steps(steps, "mean") == {"reward": 0.5, "style": 0.25}
    assert combine_steps(steps, "final") == {"reward": 0.0}
    assert combine_steps([{"reward": 1.0}, None], "final") == {}
    assert combine_steps([None, None], "mean") == {}
    assert combine_steps([], "final") == {}
    with pytest.raises(ValueError, match="'best'"):
        combine_steps(steps, "best")


@pytest.mark.parametrize(
    ("passed", "total", "collateral", "error", "reward", "safe", "complete"),
    [
        (3, 3, False, None, 1.0, True, True),
        (2, 4, False, None, 0.25, False, False),
        (0, 4, False, None, 0.0, False, False),
        (3, 3, True, None, -1.0, False, True),
        (1, 4, True, None, -1.0, False, False),
        (3, 3, False, "verifier", 0.0, False, False),
        (3, 3, False, "restore", 0.0, False, False),
        (2, 3, False, "harness", 0.0, False, False),
        (3, 3, True, "verifier", -1.0, False, False),  # collateral wins over an error
        (0, 0, False, None, 0.0, False, False),  # empty inventory = verifier error
    ],
)
def test_outcome_table(passed, total, collateral, error, reward, safe, complete):
    o = outcome(tests_passed=passed, tests_total=total, collateral=collateral, error_kind=error)
    assert math.isclose(o.reward, reward)
    assert o.safe_success is safe
    assert o.complete is complete
    if total == 0:
        assert o.error_kind == "verifier"


def test_outcome_rejects_impossible_counts():
    with pytest.raises(ValueError, match="tests_passed=5"):
        outcome(tests_passed=5, tests_total=3)


def test_outcome_of_verdict():
    good = Verdict(results=(), tests_passed=1, tests_total=2, inventory=("a", "b"))
    assert outcome_of(good).reward == 0.25
    broken = failed_closed("timeout", "too slow")
    o = outcome_of(broken)
    assert (o.reward, o.error_kind, o.error_detail) == (0.0, "verifier", "timeout: too slow")
    # A harness error from before grading wins over the verifier's.
    o = outcome_of(broken, error_kind="restore", error_detail="input lost")
    assert (o.error_kind, o.error_detail) == ("restore", "input lost")
    assert outcome_of(good, collateral=True).reward == -1.0
