"""`check`: the reference solution passes every segment and doing nothing fails (DEPTH's
harness check). One oracle episode and one nop episode per task."""

from __future__ import annotations

from typing import Any

from engine.protocol import common
from engine.protocol.kinds import JobKind, UnitContext, UnitResult
from engine.protocol.spec import EpisodeSpec
from engine.tasks.model import TaskError
from store import vocab


def run_unit(unit: UnitContext, task_id: str) -> UnitResult:
    params = unit.params
    try:
        task = common.load_unit_task(unit.store, task_id)
    except TaskError as exc:
        return UnitResult(task_id, ok=False, error=str(exc))
    ctx = common.run_context(unit, common.registry_for(params))
    limits = common.episode_limits(params)
    summary: dict[str, Any] = {"W": task.work, "segments": len(task.segments)}
    tally = common.Tally()
    # Without a reference solution there is nothing for the oracle to run; doing nothing is
    # still worth knowing about.
    agents = ("oracle", "nop") if task.work is not None else ("nop",)
    for agent in agents:
        if unit.should_stop():
            return tally.unit(task_id, False, summary, "stopped")
        spec = EpisodeSpec(
            task_id=task.id,
            task_hash=task.content_hash,
            mode="check",
            agent=agent,
            limits=limits,
            accept_risk=bool(params.get("accept_risk")),
        )
        result = tally.add(
            common.run_with_retries(ctx, task, spec, retry_errors=bool(params.get("retry_errors")))
        )
        if result.status != "done":
            return tally.unit(task_id, False, summary, "interrupted")
        summary[agent] = {
            "episode": result.episode_id,
            "outcome": result.outcome,
            "passed": result.passed,
            "error": result.error_kind,
            "detail": result.error_detail,
        }
    nop = summary["nop"]
    oracle = summary.get("oracle") or {"outcome": None, "error": None, "detail": None}
    problems = []
    for name, run in (("reference", oracle), ("no-op", nop)):
        if run["outcome"] is not None and not vocab.in_rates(run["outcome"]):
            what = vocab.label(run["outcome"], run["error"])
            problems.append(f"{name} run: {what}: {run['detail']}")
    if task.work is None:
        missing = [s.name for s in task.segments if s.solution_script is None]
        problems.append(
            "no reference solution: no solve.sh for "
            + ("the task" if not task.multi_segment else f"step(s) {', '.join(missing)}")
        )
    elif vocab.in_rates(oracle["outcome"]) and not vocab.passed(oracle["outcome"]):
        problems.append(
            "the reference solution does not pass"
            + (f" ({oracle['error']}: {oracle['detail']})" if oracle["error"] else "")
        )
    if vocab.passed(nop["outcome"]):
        problems.append("doing nothing passes (the grader accepts the untouched environment)")
    summary["ok"] = not problems
    summary["problems"] = problems
    # The unit could not finish only when infrastructure failed; a broken task is a finding.
    infra = vocab.INFRA_ERROR in (oracle["outcome"], nop["outcome"])
    return tally.unit(task_id, not infra, summary, "; ".join(problems))


KIND = JobKind("check", common.task_units, run_unit)
