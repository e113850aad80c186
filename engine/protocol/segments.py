"""The body of one episode: set-up (setup.py), then per segment its set-up, the user message,
the agent loop with the safety oracle after every executed call and one store record per turn,
the seal (seal.py) and the grade; the run stops at the first failed segment. Then the outcome
columns (finish.py).

Trouble ends the episode with error_kind/error_detail set and an explicit outcome: never an
exception out of `run_body`. A cancel or pause interrupts it (None comes back)."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from engine.agents.loop import Conversation, EpisodeLimits, Hooks, run_segment
from engine.agents.prompts import compose_user_message
from engine.agents.records import SegmentEnd, TurnRecord
from engine.oracle import faults
from engine.protocol.finish import error_fields, finish
from engine.protocol.kinds import ProgressEvent
from engine.protocol.seal import final_check, frozen, grade, seal, stop_agent
from engine.protocol.setup import prepare_segment, setup
from engine.protocol.state import AfterAgent, EpisodeRun, Interrupted
from engine.sandbox.base import CallResult, SandboxError, ShellForgery
from engine.verify.grade import Grade, note_changes_before_agent


def run_body(run: EpisodeRun, prompt_text: str, after_agent: AfterAgent | None) -> dict | None:
    """The whole episode's outcome columns; None when it was interrupted."""
    try:
        setup(run)
        return segments(run, prompt_text, after_agent)
    except Interrupted as exc:
        run.rec.interrupt(str(exc))
        return None
    except (SandboxError, faults.FaultError) as exc:
        return error_fields(run, exc.kind, str(exc))
    except Exception as exc:  # a harness bug must not kill the job
        return error_fields(run, "harness", f"{type(exc).__name__}: {exc}")


def segments(run: EpisodeRun, prompt_text: str, after_agent: AfterAgent | None) -> dict[str, Any]:
    task, spec = run.task, run.spec
    assert run.agent is not None and run.sandbox is not None
    conv = Conversation.start(run.agent, prompt_text)
    run.state.conv = conv
    limits = spec.limits
    seg_passed = 0
    grades: list[Grade] = []
    end: SegmentEnd | None = None
    graded_final = False
    hooks = Hooks(
        after_call=lambda idx, result: after_call(run, idx, result),
        on_turn=lambda turn: on_turn(run, turn),
        should_stop=run.env.should_stop,
    )
    for idx, segment in enumerate(task.segments):
        run.check_stop()
        last = idx == len(task.segments) - 1
        with run.phase("segment_setup"):
            try:
                prepare_segment(run, idx)
            except SandboxError as exc:
                if idx == 0 or exc.kind not in ("setup", "healthcheck"):
                    raise
                # A later segment's setup meets the state the agent left: its failure.
                raise SandboxError("setup_after_agent", str(exc)) from exc
            if idx == 0:
                # Once: before a later segment, the agent's processes have run (they live on).
                note_changes_before_agent(run.sandbox, task)
        message = compose_user_message(
            segment.instruction,
            turn_cap=spec.cap,
            command_budget=spec.budget,
            turns_used=conv.turns,
            commands_used=conv.executed,
        )
        run.rec.add_segment_run(idx, message, name=segment.name, first_turn=conv.replies + 1)
        seg_limits = segment_limits(
            limits, segment.agent_timeout_sec or task.limits.agent_timeout_sec
        )
        started = time.monotonic()
        run.event("agent", turn=conv.turns, cap=spec.cap)
        end = run_segment(run.agent, run.sandbox, conv, message, seg_limits, hooks, segment_idx=idx)
        run.state.time("agent", time.monotonic() - started)
        if end.reason == "stopped":
            raise Interrupted(end.detail or "stopped")
        if end.reason != "error":
            end = probe_shell(run, end)
        if end.reason == "error":
            if end.error_kind == ShellForgery.KIND:
                # The agent's failure, not an infrastructure one: what its processes did is
                # still judged, so that ending the episode this way hides no collateral.
                stop_agent(run)
                with frozen(run):
                    final_check(run)
            run.rec.finish_segment_run(
                idx,
                error_kind=end.error_kind,
                error_detail=end.error_detail,
                duration_s=time.monotonic() - started,
            )
            return finish(
                run,
                grades,
                seg_passed,
                end,
                error=(end.error_kind or "harness", end.error_detail or ""),
            )
        sealed = seal(run, last, after_agent)
        graded_final = graded_final or last
        graded = grade(run, idx, last, sealed) if isinstance(sealed, str) else sealed
        grades.append(graded)
        run.rec.finish_segment_run(
            idx,
            passed=graded.passed,
            rewards_json=graded.rewards,
            tests_passed=graded.tests_passed,
            tests_total=graded.tests_total,
            verifier_output=graded.output[-8000:],
            error_kind=graded.error_kind,
            error_detail=graded.error_detail,
            forgeable=bool(graded.forgeable),
            duration_s=time.monotonic() - started,
        )
        if graded.results:
            run.rec.add_test_results(graded.results, segment_idx=idx)
        if graded.error_kind is not None or not graded.passed:
            break
        seg_passed += 1
        if not last and not end.finished and end.reason not in ("time", "budget"):
            # The cap, token or cost limit covers the whole task: later segments cannot run.
            break
    if not graded_final:
        stop_agent(run)
        with frozen(run):
            final_check(run)
    return finish(run, grades, seg_passed, end, error=None)


def probe_shell(run: EpisodeRun, end: SegmentEnd) -> SegmentEnd:
    """One frame that runs nothing through the agent's shell after the segment's last call, so
    that a forged end mark on that call is caught like one on any other (engine/sandbox/framing.py):
    the segment then ends in the agent's error, shell_forgery (docs/outcomes.md)."""
    assert run.sandbox is not None
    with run.phase("shell_probe"):
        try:
            run.sandbox.probe_shell()
        except ShellForgery as exc:
            run.event("warning", detail=exc.detail)
            return replace(end, reason="error", error_kind=exc.kind, error_detail=exc.detail)
    return end


def after_call(run: EpisodeRun, call_idx: int, result: CallResult) -> None:
    """The safety oracle after every executed call; its events wait for the turn's record."""
    assert run.oracle is not None
    started = time.monotonic()
    check = run.oracle.after_call(call_idx, result.command, result.observation)
    run.state.time("oracle", time.monotonic() - started)
    run.state.events_by_call[call_idx] = [e.row() for e in check.events]
    if check.observed_now:
        run.rec.update_running(fault_observed_call=call_idx)
    if check.latched_now:
        run.rec.update_running(collateral=1, collateral_call=call_idx)


def on_turn(run: EpisodeRun, turn: TurnRecord) -> None:
    """One store record per turn: the turn, its calls and outputs, the oracle's events."""
    events: list[dict] = []
    for call in turn.calls:
        events += run.state.events_by_call.pop(call.idx, [])
    run.state.time("calls", sum(c.result.duration_s for c in turn.calls if c.result))
    run.state.time("model", turn.latency_ms / 1000)
    run.rec.record_turn(turn.row(), turn.call_rows(), turn.outputs(), events)
    run.env.progress(
        ProgressEvent(
            run.task.id, "agent", run.eid, run.spec.label, turn=turn.idx, cap=run.spec.cap
        )
    )


def teardown(run: EpisodeRun) -> None:
    """The agent closed and the container (with its snapshots) removed, whatever happened."""
    close = getattr(run.agent, "close", None)
    if close is not None:
        close()
    if run.sandbox is not None:
        started = time.monotonic()
        try:
            run.sandbox.close(remove_snapshots=True)
        except SandboxError:
            pass  # gc removes it by its labels later
        run.state.time("teardown", time.monotonic() - started)


def segment_limits(limits: EpisodeLimits, task_limit_s: float | None) -> EpisodeLimits:
    """The protocol's per-segment time limit wins; else the task's own."""
    if limits.segment_time_limit_s is not None or task_limit_s is None:
        return limits
    return replace(limits, segment_time_limit_s=task_limit_s)
