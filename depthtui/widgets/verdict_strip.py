"""The verdict strip: the few lines at the top of an episode that say why it ended as it did.

Built from the episode row and its verdict (tests, segments, fault record, collateral site), so
the answer to "why did it fail" never needs scrolling to the last turn.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from depthtui.widgets.sanitize import safe_text
from store.views import CollateralSite, EpisodeInfo, FaultInfo, SegmentRun, TestOutcome

CLASS_LABEL = {
    "pass": ("PASS", "bold black on green"),
    "fail": ("FAIL", "bold white on red"),
    "unsafe": ("UNSAFE", "bold white on red"),
    "agent_error": ("ERROR (agent)", "bold white on magenta"),
    "infra_error": ("ERROR (infrastructure, not counted)", "bold white on magenta"),
    "task_broken": ("TASK BROKEN (its own files)", "bold white on magenta"),
    "running": ("RUNNING", "bold black on cyan"),
}
LINE_CHARS = 400  # a strip line is cut here; the full text is in the verdict at the last turn


@dataclass(frozen=True)
class SegmentWords:
    idx: int
    name: str
    passed: int | None
    said: str  # the line of the verifier's output that says what went wrong (or its summary)


@dataclass(frozen=True)
class VerdictFacts:
    """What the strip shows; every field comes from the store as it is."""

    outcome_class: str  # views.outcome_class: pass | fail | unsafe | *_error | task_broken
    end_reason: str
    error: str  # "kind: detail" of a recorded error, else ""
    reward: float | None
    first_failure: tuple[str, str] | None  # (test id, what it said)
    collateral: CollateralSite | None
    fault: FaultInfo | None
    fault_call_command: str  # the command of the call where the fault was first met
    limit: str  # "cap 5", "budget 16", "no stated cap"
    turns: int
    calls: int
    segments: tuple[SegmentWords, ...]
    segments_total: int
    # The tests ran agent-written code where it could forge this grade (docs/realtasks.md).
    forgeable_by_agent: bool = False
    oracle_way: str = ""  # how the safety oracle checked the home (episodes.oracle_way)
    end_detail: str = ""  # why it ended, in words (episodes.end_detail)


# episodes.oracle_way in words (engine/oracle/manifest.py `way`).
ORACLE_WAYS = {
    "upper": "upper-layer change set (overlay)",
    "walk": "full walk of the merged folder",
    "tar": "full read of the daemon's tar stream",
}


def failure_lines(message: str, most: int = 3) -> list[str]:
    """The lines of a verifier's words that say what went wrong: pytest's `E ` lines, else
    assertion or error lines, else the last line."""
    lines = [line.rstrip() for line in message.splitlines() if line.strip()]
    wanted = [line.lstrip()[2:].strip() for line in lines if line.lstrip().startswith("E ")]
    if not wanted:
        wanted = [
            line.strip()
            for line in lines
            if any(word in line for word in ("Error", "assert", "FAILED", "contains"))
        ]
    return (wanted or [line.strip() for line in lines[-1:]])[:most]


def _segment_words(s: SegmentRun, running: bool = False) -> SegmentWords:
    if s.error_kind:
        said = f"{s.error_kind}: {s.error_detail or ''}"
    elif s.passed is None and running:
        said = "not graded yet (the episode is running)"
    elif s.passed is None:
        said = "not graded (an earlier segment failed, or the episode ended first)"
    elif s.passed:
        said = (s.verifier_output.strip().splitlines() or ["passed"])[-1].strip("= ")
    else:
        said = " · ".join(failure_lines(s.verifier_output, 2)) or "failed (no verifier output)"
    return SegmentWords(s.idx, s.name, s.passed, said.strip())


def verdict_facts(
    ep: EpisodeInfo,
    tests: tuple[TestOutcome, ...],
    segments: tuple[SegmentRun, ...],
    fault: FaultInfo | None,
    collateral: CollateralSite | None,
    fault_call_command: str = "",
) -> VerdictFacts:
    failing = next((t for t in tests if t.outcome != "passed"), None)
    first_failure = None
    if failing is not None:
        first_failure = (failing.nodeid, " · ".join(failure_lines(failing.message, 2)))
    if ep.cap is not None:
        limit = f"cap {ep.cap}"
    elif ep.budget is not None:
        limit = f"budget {ep.budget}"
    else:
        limit = "no stated cap"
    error = f"{ep.error_kind}: {ep.error_detail or ''}".strip() if ep.error_kind else ""
    return VerdictFacts(
        outcome_class=ep.outcome_class,
        end_reason=ep.end_reason or "",
        error=error,
        reward=ep.reward,
        first_failure=first_failure,
        collateral=collateral,
        fault=fault,
        fault_call_command=fault_call_command,
        limit=limit,
        turns=ep.turns,
        calls=ep.calls,
        # a segment that only repeats the episode's error says nothing more
        segments=tuple(
            _segment_words(s, running=ep.status == "running")
            for s in segments
            if not (ep.error_kind and s.error_kind == ep.error_kind)
        ),
        segments_total=ep.segments_total,
        forgeable_by_agent=bool(ep.forgeable),
        oracle_way=ep.oracle_way or "",
        end_detail=ep.end_detail or "",
    )


def _used(facts: VerdictFacts) -> str:
    if facts.limit.startswith("cap "):
        return f"{facts.turns} of {facts.limit} turns · {facts.calls} calls"
    if facts.limit.startswith("budget "):
        return f"{facts.calls} of {facts.limit} commands · {facts.turns} turns"
    return f"{facts.turns} turns ({facts.limit}) · {facts.calls} calls"


def strip_text(facts: VerdictFacts) -> Text:
    """The strip's lines: the outcome line first, then one line per thing that explains it."""
    label, style = CLASS_LABEL.get(facts.outcome_class, (facts.outcome_class.upper(), "bold"))
    text = Text.assemble((f" {label} ", style))
    if facts.outcome_class == "infra_error":
        text.append("  reward —", style="dim")  # not counted: no reward to speak of
    elif facts.reward is not None:
        text.append(f"  reward {facts.reward:+.2f}")
    text.append(f"  {_used(facts)}")
    if facts.end_reason:
        text.append(f"  ended: {facts.end_reason}", style="dim")
    if facts.forgeable_by_agent:
        text.append("  ⚠ grade forgeable by agent code", style="bold yellow")
    lines: list[Text] = []
    if facts.error:
        lines.append(_line("error", facts.error, "magenta"))
    elif facts.end_reason == "context_length" and facts.end_detail:
        # The server's own words for a full context (or which limit filled it).
        lines.append(_line("context full", facts.end_detail, "yellow"))
    if facts.first_failure is not None:
        nodeid, said = facts.first_failure
        lines.append(_line("first failing test", f"{nodeid} — {said}", "red"))
    if facts.collateral is not None:
        c = facts.collateral
        where = f" at call {c.call_idx}" if c.call_idx is not None else " (final check)"
        call = f": {c.command}" if c.command else ""
        lines.append(_line("collateral", f"{c.kind} {c.path}{where}{call}", "bold red"))
    if facts.oracle_way:
        way = ORACLE_WAYS.get(facts.oracle_way, facts.oracle_way)
        lines.append(_line("safety checks", way, "dim"))
    if facts.fault is not None:
        f = facts.fault
        # whether it was cleared before the command: a long command must not push it away
        cleared = {1: "cleared", 0: "not cleared"}.get(f.cleared, "cleared: unknown")  # type: ignore[arg-type]
        if f.observed_call is not None:
            met = f"first met at call {f.observed_call}"
            if facts.fault_call_command:
                met += f" ({facts.fault_call_command})"
        else:
            met = "never met"
        lines.append(_line("fault", f"{f.family} on {f.target}, {cleared}, {met}", "yellow"))
    for s in facts.segments:
        mark = "✓" if s.passed else ("·" if s.passed is None else "✗")
        name = f"§{s.idx + 1} {s.name}" if facts.segments_total > 1 else "verifier"
        style = "green" if s.passed else ("dim" if s.passed is None else "red")
        lines.append(_line(f"{mark} {name}", s.said, style))
    graded = {s.idx for s in facts.segments}
    later = [
        i for i in range(facts.segments_total) if i not in graded and i > max(graded, default=-1)
    ]
    if later and facts.segments_total > 1 and facts.outcome_class != "running":
        names = ", ".join(f"§{i + 1}" for i in later)
        lines.append(Text(f"· {names}: not started", style="dim"))
    for line in lines:
        text.append("\n")
        text.append_text(line)
    return text


def _line(head: str, body: str, style: str) -> Text:
    line = Text(f"{head}: ", style=style)
    line.append_text(safe_text(body.replace("\n", " "), LINE_CHARS))
    return line
