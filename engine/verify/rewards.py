"""Harbor's reward convention (docs/verifier.md): reading reward.json /
reward.txt, the per-step min_reward gate, and the multi-step reward strategy."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

Rewards = dict[str, float]
# depthtui's pass rule for a step without min_reward (Harbor has no "pass" there): full reward.
DEFAULT_PASS_REWARD = 1.0


class RewardError(ValueError):
    """The verifier wrote no usable reward: a verifier error, never a model failure."""


def parse_rewards(reward_json: bytes | None, reward_txt: bytes | None) -> Rewards:
    """reward.json (a flat object of finite numbers) wins over reward.txt (one number, which
    becomes {"reward": x}); `None` means the file does not exist. Missing, empty or garbage
    raises RewardError naming the file and what was expected."""
    if reward_json is not None:
        return _parse_json(reward_json)
    if reward_txt is not None:
        return _parse_txt(reward_txt)
    raise RewardError(
        "neither /logs/verifier/reward.json nor /logs/verifier/reward.txt was written"
    )


def _parse_json(data: bytes) -> Rewards:
    where = "/logs/verifier/reward.json"
    text = data.decode("utf-8", "replace").strip()
    if not text:
        raise RewardError(f"{where} is empty; expected a flat JSON object of finite numbers")
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise RewardError(f"{where} is not JSON ({exc}): {text[:80]!r}") from exc
    if not isinstance(obj, dict) or not obj:
        raise RewardError(f"{where} holds {text[:80]!r}; expected a non-empty flat JSON object")
    rewards: Rewards = {}
    for key, value in obj.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RewardError(f"{where}: key '{key}' is {value!r}; expected a number")
        if not math.isfinite(value):
            raise RewardError(f"{where}: key '{key}' is {value!r}; expected a finite number")
        rewards[str(key)] = float(value)
    return rewards


def _parse_txt(data: bytes) -> Rewards:
    where = "/logs/verifier/reward.txt"
    text = data.decode("utf-8", "replace").strip()
    if not text:
        raise RewardError(f"{where} is empty; expected one number")
    try:
        value = float(text)
    except ValueError as exc:
        raise RewardError(f"{where} holds {text[:80]!r}; expected one number") from exc
    if not math.isfinite(value):
        raise RewardError(f"{where} holds {text!r}; expected a finite number")
    return {"reward": value}


def gate_passes(
    rewards: Mapping[str, float] | None, min_reward: float | Mapping[str, float] | None
) -> bool:
    """Harbor's min_reward gate (gate_decision says which key decided)."""
    return gate_decision(rewards, min_reward)[0]


def gate_decision(
    rewards: Mapping[str, float] | None, min_reward: float | Mapping[str, float] | None
) -> tuple[bool, str]:
    """Whether a step passes, and which key decided, in words.

    Harbor's min_reward gate: a float gates the 'reward' key, a table gates each of its keys
    (all must hold), and a missing result (or key) counts as -inf. Without min_reward, depthtui
    asks for full reward: the 'reward' key at least 1.0 when the result has one; a result of
    several keys and no 'reward' (`{"correctness": 1.0, "performance": 1.0}`) is read as
    Harbor reads a min_reward table, every key at least 1.0 (issue 25)."""
    got = dict(rewards or {})
    if min_reward is None:
        if "reward" in got or not got:
            gates = {"reward": DEFAULT_PASS_REWARD}
            rule = "no min_reward: 'reward' must be at least 1"
        else:
            gates = dict.fromkeys(got, DEFAULT_PASS_REWARD)
            rule = "no min_reward and no 'reward' key: every key must be at least 1"
    elif isinstance(min_reward, Mapping):
        gates = {str(k): float(v) for k, v in min_reward.items()}
        rule = "min_reward table: every key must meet its threshold"
    else:
        gates = {"reward": float(min_reward)}
        rule = f"min_reward {float(min_reward):g} gates 'reward'"
    failing = [k for k, low in gates.items() if got.get(k, -math.inf) < low]
    if failing:
        key = failing[0]
        value = f"{got[key]:g}" if key in got else "missing"
        return False, f"{rule}; '{key}' is {value} < {gates[key]:g}"
    keys = ", ".join(f"'{k}' {got[k]:g}" for k in gates)
    return True, f"{rule}; {keys}"


def combine_steps(steps: Sequence[Mapping[str, float] | None], strategy: str) -> Rewards:
    """The trial-level reward of a multi-step run from each executed step's result (None: the
    step has no result, e.g. its verifier failed).

    "mean": per key, the mean over the steps that have a result, a key a step lacks counting 0
    (Harbor's rule). "final": the last executed step's result as it is ({} when it has none)."""
    if strategy == "final":
        return dict(steps[-1] or {}) if steps else {}
    if strategy != "mean":
        raise ValueError(f"multi_step_reward_strategy '{strategy}': expected 'mean' or 'final'")
    with_result = [s for s in steps if s is not None]
    if not with_result:
        return {}
    keys = list(dict.fromkeys(k for s in with_result for k in s))
    return {k: sum(float(s.get(k, 0.0)) for s in with_result) / len(with_result) for k in keys}
