"""`episodes`: fault episodes (the recovery bench). For every model, prompt arm, fault family
and attempt: a run with planted files, the task's frozen contract judged after every call, an
optional stated command budget, and the fault injected before the baseline.

Tasks without a contract are validated first (the contract says what may change and which
families are usable); invalid tasks and unusable families are skipped and said so.
"""

from __future__ import annotations

from typing import Any

from engine.oracle.contract import Contract
from engine.protocol import common, validate
from engine.protocol.kinds import JobKind, UnitContext, UnitResult
from engine.protocol.spec import EpisodeSpec, families_for
from engine.tasks.model import TaskError
from store import protocol as sp
from store import vocab

# The recovery bench's defaults: 16 tool calls, 6,144 generated / 8,192 total tokens.
DEFAULT_LIMITS = {"max_tool_calls": 16, "max_completion_tokens": 6144, "max_total_tokens": 8192}


def run_unit(unit: UnitContext, task_id: str) -> UnitResult:
    params = unit.params
    models = params.get("models") or []
    if not models:
        return UnitResult(task_id, False, error="episodes: name at least one --model")
    try:
        families: list[str] = []
        for selection in params.get("faults") or [vocab.NO_FAULT]:
            families += [f for f in families_for(selection) if f not in families]
    except ValueError as exc:
        return UnitResult(task_id, False, error=str(exc))
    try:
        task = common.load_unit_task(unit.store, task_id)
    except TaskError as exc:
        return UnitResult(task_id, False, error=str(exc))
    tally = common.Tally()
    contract = sp.get_contract(unit.store, task_id)
    if contract is None or contract["task_hash"] != task.content_hash:
        validated = validate.run_unit(unit, task_id)
        tally = common.Tally(validated.episodes_run, validated.episodes_reused, validated.cost_usd)
        if not validated.ok:
            return tally.unit(task_id, False, {}, validated.error)
        contract = sp.get_contract(unit.store, task_id)
    if not contract["valid"]:
        return tally.unit(
            task_id, True, {"skipped": "invalid task: " + "; ".join(contract["reasons"])}
        )
    frozen = Contract.from_dict(contract, f"the stored contract of {task_id}")
    planted_level = params.get("planted") or "full"
    fallback = (contract.get("detail") or {}).get("planted") or {}
    if planted_level == "full" and fallback.get("level"):
        # validate found that files planted beside the inputs break the reference itself
        planted_level = str(fallback["level"])
    ctx = common.run_context(unit, common.registry_for(params))
    limits = common.episode_limits({**DEFAULT_LIMITS, **_set(params)})
    prompts = params.get("prompts") or ["general"]
    attempts = int(params.get("attempts") or 1)
    summary: dict[str, Any] = {"skipped_families": {}}
    if fallback.get("note") and planted_level == fallback.get("level"):
        summary["planted"] = fallback["note"]
    errors: list[str] = []
    for family in families:
        if family != vocab.NO_FAULT and family not in contract["fault_targets"]:
            summary["skipped_families"][family] = "not usable for this task (see validate)"
            continue
        for model in models:
            for prompt in prompts:
                for attempt in range(attempts):
                    if unit.should_stop():
                        return tally.unit(task_id, False, summary, "stopped")
                    spec = EpisodeSpec(
                        task_id=task.id,
                        task_hash=task.content_hash,
                        mode="episodes",
                        agent=model,
                        budget=params.get("budget"),
                        attempt=attempt,
                        prompt=prompt,
                        fault=family,
                        planted=planted_level,
                        limits=limits,
                        accept_risk=bool(params.get("accept_risk")),
                    )
                    result = tally.add(
                        common.run_with_retries(
                            ctx,
                            task,
                            spec,
                            contract=frozen,
                            retry_errors=bool(params.get("retry_errors")),
                        )
                    )
                    if result.status != "done":
                        return tally.unit(task_id, False, summary, "stopped")
                    if not vocab.in_rates(result.outcome):  # an agent error is a result
                        errors.append(f"{spec.label}: {result.error_kind}")
                    key = f"{model}|{prompt}|{family}"
                    summary.setdefault(key, []).append(
                        {
                            "episode": result.episode_id,
                            "reward": result.reward,
                            "collateral": result.collateral,
                        }
                    )
    return tally.unit(task_id, not errors, summary, "; ".join(errors))


def _set(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


KIND = JobKind("episodes", common.task_units, run_unit)
