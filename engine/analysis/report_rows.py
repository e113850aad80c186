"""The report's typed parts: one frozen dataclass per table of `depthtui report`, and the whole.

A field's name is its key in the report's JSON (`--json`, summary.json, what the TUI reads), so
`to_json()` is written once, here, from the fields in their order; a part that is one
estimator's figures (`Measurement`) is spread into its row, as the JSON has always had it.
The figures are computed in engine/analysis/report.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from engine.analysis.stats import Rate

_SPREAD = {"spread": True}  # a field whose figures are keys of its row, not a nested object


def _json(value: Any) -> Any:
    if isinstance(value, Rate):
        return value.as_dict()
    if is_dataclass(value) and not isinstance(value, type):
        return value.to_json()  # type: ignore[attr-defined]
    if isinstance(value, tuple | list):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    return value


class _Part:
    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]
            value = _json(getattr(self, f.name))
            if f.metadata.get("spread"):
                out.update(value)
            else:
                out[f.name] = value
        return out


@dataclass(frozen=True)
class Measurement(_Part):
    """One estimator's figures for a task: N, D (ordinal: a cap, or 99 for ">80"), each
    model's estimate, the runs it took, whether it finished."""

    N: int | None = None
    D: int | None = None
    D_display: str = "-"
    estimates: dict[str, int | None] = field(default_factory=dict)
    estimates_display: dict[str, str] = field(default_factory=dict)
    runs: int = 0
    finished: bool = False
    solved: Any = None  # as the measurement recorded it (its detail)

    def estimates_text(self) -> str:
        """Per-model estimates as a person reads them: "alpha: 3, beta: >80"."""
        return estimates_line(self.estimates_display)


def estimates_line(display: dict[str, str]) -> str:
    return ", ".join(f"{m}: {v}" for m, v in display.items())


@dataclass(frozen=True)
class TaskRow(_Part):
    id: str
    dataset: str
    group: str | None
    segments: int
    W: int | None
    figures: Measurement = field(metadata=_SPREAD)
    protocol: str | None  # the estimator that wrote its D (PROTOCOLS), None while unmeasured
    forgeable_runs: int
    pass_rate: float | None


@dataclass(frozen=True)
class DatasetRow(_Part):
    dataset: str
    group: str | None
    tasks: int
    measured: int
    finished: int
    solved: int
    median_D: int | None
    median_D_display: str
    median_W: float | None
    share_D_le_3: float | None
    above_80: int


@dataclass(frozen=True)
class ModelRow(_Part):
    model: str
    tasks: int
    episodes: int
    pass_at_1: float | None
    pass_rate: Rate
    errors: int  # left out of the rates
    agent_errors: int  # counted as failures
    infra_errors: int
    task_broken: int
    cost_usd: float | None  # None: no price (docs/models.md), not $0


@dataclass(frozen=True)
class SpendRow(_Part):
    """What a model's finished runs used, every mode: tokens as the endpoint counted them."""

    model: str
    runs: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int  # prompt tokens the endpoint served from its cache
    cost_usd: float | None  # None: no price


@dataclass(frozen=True)
class Headline(_Part):
    measured: int
    solved: int
    solved_D_le_3: int
    share_D_le_3: float | None
    median_D: int | None
    median_D_display: str
    median_W: float | None
    rank_partial_corr_D_passrate_given_W: float | None
    rank_partial_corr_tasks: int


@dataclass(frozen=True)
class CapRate(_Part):
    model: str
    cap: int
    runs: int
    passed: int
    rate: float


@dataclass(frozen=True)
class RecoveryRow(_Part):
    task: str
    fault: str
    D_clean: int | None
    D_clean_display: str
    D_fault: int
    D_fault_display: str
    added_turns: int | None
    added_turns_display: str
    finished: bool


@dataclass(frozen=True)
class SearchEstimate(_Part):
    task: str
    estimator: str
    kind: str
    fault: str
    search: str
    figures: Measurement = field(metadata=_SPREAD)
    protocol_D: int | None
    protocol_D_display: str
    protocol_runs: int | None


@dataclass(frozen=True)
class SafetyRow(_Part):
    model: str
    prompt: str
    fault: str
    episodes: int
    errors: int  # left out of the rates
    agent_errors: int
    safe_success: Rate
    collateral: Rate
    mean_reward: float | None
    recovery_failure_after_observed: Rate
    fault_cleared: Rate


@dataclass(frozen=True)
class RLStepRow(_Part):
    """One training step of one policy's `rl` rollouts (engine/rl): what the rollouts scored.
    Infrastructure errors and broken tasks are left out of every figure and counted apart;
    an agent error is a rollout that failed and counts (docs/outcomes.md)."""

    model: str
    step: int | None  # the trainer's step; None: rollouts whose trainer gave no step
    episodes: int  # the rollouts every figure of the row is over
    tasks: int
    groups: int  # distinct group indices (rollouts per step, as the trainer numbered them)
    errors: int  # left out of the figures: infra_errors + task_broken
    agent_errors: int  # counted, as failures
    infra_errors: int
    task_broken: int
    mean_reward: float | None
    safe_success: Rate
    collateral: Rate


@dataclass(frozen=True)
class CheckRow(_Part):
    task: str
    oracle_passed: bool | None
    nop_failed: bool | None
    oracle_outcome: str | None
    nop_outcome: str | None
    ok: bool


@dataclass(frozen=True)
class Forgeable(_Part):
    """Verdicts graded as the task's own harness grades them although its tests ran
    agent-written code where it could forge them (docs/realtasks.md)."""

    runs: int
    tasks: tuple[str, ...]
    excluded: bool


@dataclass(frozen=True)
class RepeatRow(_Part):
    model: str
    runs: int
    repeat_attempts: int
    identical: int
    deterministic: bool


@dataclass(frozen=True)
class Report(_Part):
    finished: bool
    tasks: tuple[TaskRow, ...]
    datasets: tuple[DatasetRow, ...]
    models: tuple[ModelRow, ...]
    spend: tuple[SpendRow, ...]
    headline: Headline
    pass_by_cap: tuple[CapRate, ...]
    recovery_depth: tuple[RecoveryRow, ...]
    search_estimates: tuple[SearchEstimate, ...]
    safety: tuple[SafetyRow, ...]
    checks: tuple[CheckRow, ...]
    forgeable: Forgeable
    repeats: tuple[RepeatRow, ...]
    # The verifier audit (engine/analysis/verifier_audit.py): mutations, suspects, reviews.
    verifier: tuple[Any, ...] = ()
    # Per training step of `rl` rollouts (engine/analysis/rl_steps.py).
    rl_by_step: tuple[RLStepRow, ...] = ()
