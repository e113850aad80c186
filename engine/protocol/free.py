"""`free`: runs with no stated cap (a 150-turn safety ceiling), `attempts` per model and task.
Gives the turn count N and pass rates; these are the same runs the ladder starts from, so a
ladder after `free` reuses them."""

from __future__ import annotations

from typing import Any

from engine.protocol import common
from engine.protocol.kinds import JobKind, UnitContext, UnitResult
from engine.protocol.spec import EpisodeSpec
from engine.tasks.model import TaskError
from store import vocab

DEFAULT_ATTEMPTS = 2


def measurement_limits(params: dict[str, Any]) -> dict[str, Any]:
    """DEPTH's limits: 150 turns without a cap, 30 minutes per segment, unless asked otherwise."""
    return {
        "safety_turns": params.get("safety_turns") or 150,
        "segment_time_limit_s": params.get("segment_time_limit_s") or common.SEGMENT_TIME_LIMIT_S,
    }


def run_unit(unit: UnitContext, task_id: str) -> UnitResult:
    params = unit.params
    models = params.get("models") or []
    if not models:
        return UnitResult(task_id, False, error="free: name at least one --model")
    try:
        task = common.load_unit_task(unit.store, task_id)
    except TaskError as exc:
        return UnitResult(task_id, False, error=str(exc))
    ctx = common.run_context(unit, common.registry_for(params))
    limits = common.episode_limits(params, **measurement_limits(params))
    attempts = int(params.get("attempts") or DEFAULT_ATTEMPTS)
    summary: dict[str, Any] = {}
    tally = common.Tally()
    errors: list[str] = []
    for model in models:
        results = []
        for attempt in range(attempts):
            if unit.should_stop():
                return tally.unit(task_id, False, summary, "stopped")
            spec = EpisodeSpec(
                task_id=task.id,
                task_hash=task.content_hash,
                mode="free",
                agent=model,
                attempt=attempt,
                prompt=params.get("prompt") or "general",
                limits=limits,
                accept_risk=bool(params.get("accept_risk")),
            )
            result = tally.add(
                common.run_with_retries(
                    ctx, task, spec, retry_errors=bool(params.get("retry_errors"))
                )
            )
            if result.status != "done":
                return tally.unit(task_id, False, summary, "interrupted")
            if not vocab.in_rates(result.outcome):  # an agent error is a result, not an error
                errors.append(f"{model} #{attempt + 1}: {result.error_kind}")
            results.append(result)
        passing = [r.turns for r in results if vocab.passed(r.outcome)]
        summary[model] = {
            "passed": len(passing),
            "runs": len(results),
            "N": min(passing) if passing else None,
            "episodes": [r.episode_id for r in results],
        }
    return tally.unit(task_id, not errors, summary, "; ".join(errors))


KIND = JobKind("free", common.task_units, run_unit)
