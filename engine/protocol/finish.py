"""An episode's outcome columns: the reward and the outcome (engine/verify/outcome.py's rule,
with the error blamed per docs/outcomes.md), the oracle's verdict, and what the agent changed in
the home by the end."""

from __future__ import annotations

from typing import Any

from engine.agents.records import SegmentEnd
from engine.oracle import changes as oracle_changes
from engine.oracle import faults
from engine.oracle.latch import Oracle
from engine.protocol.state import EpisodeRun
from engine.verify.grade import Grade, forgeable_mark, grade_snapshot
from engine.verify.outcome import episode_outcome, outcome
from store import vocab

# final_changes marks paths that did not exist at the baseline with this pseudo-kind.
CREATED = "created"
# At most this many created paths are stored per episode; one more key counts the rest.
CREATED_STORED = 200


def error_fields(run: EpisodeRun, kind: str, detail: str) -> dict[str, Any]:
    """The outcome columns of an episode that an error ended before any grade."""
    oracle = run.oracle
    collateral = bool(oracle and oracle.latched)
    result = outcome(
        tests_passed=0,
        tests_total=0,
        collateral=collateral,
        error_kind=kind,
        error_detail=detail,
    )
    return {
        "end_reason": "error",
        "passed": False,
        "complete": False,
        "reward": result.reward,
        "safe_success": False,
        "collateral": collateral,
        "collateral_call": oracle.latched_call if oracle else None,
        "error_kind": kind,
        "error_detail": detail[:4000],
        "outcome": vocab.classify(False, kind, detail),
    }


def finish(
    run: EpisodeRun,
    grades: list[Grade],
    seg_passed: int,
    end: SegmentEnd | None,
    error: tuple[str, str] | None,
) -> dict[str, Any]:
    """The outcome columns of an episode whose segments ran (the last one run may have ended
    in `error`, the agent loop's)."""
    task, oracle = run.task, run.oracle
    collateral = bool(oracle and oracle.latched)
    result = episode_outcome(
        grades,
        segments=len(task.segments),
        segments_passed=seg_passed,
        verifier_kind=task.verifier_kind,
        multi_segment=task.multi_segment,
        reward_strategy=task.reward_strategy,
        collateral=collateral,
        error=error,
        without_agent=lambda idx: without_agent(run, idx),
    )
    fault_cleared = None
    if run.state.fault is not None and oracle is not None:
        fault_cleared = faults.fault_cleared(run.state.fault, oracle.last)
    return {
        "end_reason": "error" if error is not None or end is None else end.reason,
        # In words: the server's message for a full context, the limit that was reached.
        "end_detail": (end.detail or None) if end is not None else None,
        "segments_passed": seg_passed,
        "passed": result.passed,
        "complete": result.complete,
        "tests_passed": result.tests_passed,
        "tests_total": result.tests_total,
        "reward": result.reward,
        "safe_success": result.safe_success,
        "collateral": collateral,
        "collateral_call": oracle.latched_call if oracle else None,
        "fault_observed_call": oracle.observed_call if oracle else None,
        "fault_cleared": fault_cleared,
        "error_kind": result.error_kind,
        "error_detail": (result.error_detail or "")[:4000] or None,
        "outcome": result.outcome,
        "final_changes_json": final_changes(oracle) if oracle is not None else {},
        "graded_outputs_json": run.graded_outputs,
        **forgeable_mark(grades),
    }


def final_changes(oracle: Oracle) -> dict[str, list[str]]:
    """Every path changed from the baseline to the last check, with its kinds of change; paths
    new since the baseline as CREATED (at most CREATED_STORED, one more key counting the rest)."""
    changed: dict[str, list[str]] = {}
    for change in oracle_changes.diff(oracle.baseline, oracle.last):
        path = oracle.baseline.abspath(change.rel)
        changed.setdefault(path, []).append(change.kind)
    created = oracle_changes.created(oracle.baseline, oracle.last)
    for rel in created[:CREATED_STORED]:
        changed[oracle.baseline.abspath(rel)] = [CREATED]
    more = len(created) - CREATED_STORED + oracle.last.new_unlisted
    if more > 0:
        at_least = "at least " if oracle.last.new_capped else ""
        key = f"{oracle.baseline.home} (and {at_least}{more} more new paths)"
        changed[key] = [CREATED]
    return {k: sorted(set(v)) for k, v in changed.items()}


def without_agent(run: EpisodeRun, idx: int) -> str | None:
    """Segment `idx`'s tests on the task's own image, where the agent never ran: whether
    the tests' own files fail (docs/outcomes.md)."""
    if run.image_tag is None:
        return None
    run.event("verify", detail="the tests without the agent")
    sandbox = run.sandbox
    with run.phase("verify_without_agent"):
        grade = grade_snapshot(
            run.task,
            idx,
            run.image_tag,
            run.contract,
            run.env.job_id,
            run.eid,
            agent=(sandbox.agent_uid, sandbox.agent_gid) if sandbox else None,
            task_image=run.image_tag,
        )
    return grade.error_detail or ""
