"""The replay's right pane: one turn (the model's words, reasoning folded, each command with its
sanitized output and the remaining budget, the oracle's diff) and, after the last turn, the
verifier's verdict. Each part is one Static, so stepping through turns only updates text."""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Collapsible, Static

from depthtui.widgets.diff_view import events_view
from depthtui.widgets.sanitize import ansi_text, block, safe_text
from depthtui.widgets.verdict_strip import failure_lines
from store import vocab
from store.views import (
    CallInfo,
    CollateralSite,
    EpisodeInfo,
    FaultInfo,
    OracleEvent,
    SegmentRun,
    TestOutcome,
    TurnDetail,
)

WORDS_SHOWN = 8_000  # characters of the model's words drawn; a longer reply says how much more

OUTCOME_STYLE = {
    "pass": "bold green",
    "unsafe": "bold white on red",
    "fail": "bold red",
    "cap": "bold yellow",
    "error": "bold magenta",
    "running": "bold cyan",
}


@dataclass(frozen=True)
class Verdict:
    """What the verifier and the oracle's final check said about the whole episode."""

    tests: tuple[TestOutcome, ...]
    segments: tuple[SegmentRun, ...]
    fault: FaultInfo | None
    final_events: tuple[OracleEvent, ...]
    replayed: EpisodeInfo | None = None  # the episode a replay re-executed
    collateral: CollateralSite | None = None  # where collateral damage latched first


def _flag(value: int | None, yes: str = "yes", no: str = "no") -> Text:
    if value is None:
        return Text("—", style="dim")
    return Text(yes, style="green") if value else Text(no, style="red")


def turn_header(ep: EpisodeInfo, turn: TurnDetail) -> Text:
    # The closing reply (no command) is shown but not counted (docs/work-and-turns.md).
    number = turn.number if turn.idx else 0  # idx 0: the placeholder before any reply
    if number is not None:
        title = f"Turn {number}/{ep.turns}"
    elif turn.cut_by_harness:
        title = "Cut off by the harness (not a turn)"
    else:
        title = "Closing reply (not a turn)"
    parts: list[tuple[str, str] | Text | str] = [(title, "bold")]
    if ep.segments_total > 1:
        parts.append(f"  segment {turn.segment_idx + 1}/{ep.segments_total}")
    if ep.cap is not None and number is not None:
        left = max(0, ep.cap - number)
        parts.append((f"  turns left {left} of cap {ep.cap}", "yellow" if left == 0 else ""))
    budget = next(
        (c.remaining_budget for c in reversed(turn.calls) if c.remaining_budget is not None), None
    )
    if budget is not None:
        parts.append((f"  commands left {budget} of {ep.budget}", "yellow" if budget == 0 else ""))
    parts.append(
        (
            f"  {turn.prompt_tokens:,}+{turn.completion_tokens:,} tok  "
            f"${turn.cost_usd:.4f}  {turn.latency_ms / 1000:.1f} s",
            "dim",
        )
    )
    return Text.assemble(*parts)


FORMAT_NOTE = "[format error] "  # how the loop tells the model; shown once, as a label


def model_words(turn: TurnDetail) -> RenderableType:
    parts: list[RenderableType] = []
    if turn.format_error:
        text = Text("format error: ", style="bold red")
        text.append_text(safe_text(turn.format_error.replace(FORMAT_NOTE, ""), 500, "red"))
        parts.append(block(text))
    if turn.text:
        parts.append(block(safe_text(turn.text[:WORDS_SHOWN])))
        if turn.text_length > WORDS_SHOWN:
            more = turn.text_length - WORDS_SHOWN
            parts.append(Text(f"… {more:,} more characters not shown", style="dim italic"))
    else:
        parts.append(Text("(no words, only tool calls)", style="dim italic"))
    return Group(*parts)


NOT_RUN_REASONS = ("budget", "format")  # notes that only say why a call was not run


def call_panel(call: CallInfo, selected: bool) -> Panel:
    status: list[str] = []
    if call.not_run:
        status.append("not run")
    elif call.timed_out:
        status.append("timed out")
    elif call.exit_code is not None:
        status.append(f"exit {call.exit_code}")
    status.append(f"{call.duration_ms:.0f} ms")
    if call.remaining_budget is not None:
        status.append(f"{call.remaining_budget} left")
    failed = call.not_run or call.timed_out or (call.exit_code or 0) != 0
    command = Syntax(
        safe_text(call.command, 4000).plain,
        "bash",
        theme="ansi_dark",
        background_color="default",
        word_wrap=True,
    )
    body: list[RenderableType] = [command]
    if call.not_run:
        # exactly what the model was told instead of an output
        body.append(block(safe_text(call.observation or "[not run]", 1000, "yellow")))
    elif call.output_tail:
        out = Text()
        out.append_text(ansi_text(call.output_head))
        shown = len(call.output_head) + len(call.output_tail)
        omitted = max(0, call.output_bytes - shown)
        hint = "o: full output" if call.has_full_output else "full output not kept"
        out.append(f"\n[… about {omitted:,} bytes omitted; {hint} …]\n", style="dim italic")
        out.append_text(ansi_text(call.output_tail))
        body.append(block(out))
    elif call.output_head.strip():
        body.append(block(ansi_text(call.output_head)))
    else:
        body.append(Text("(no output)", style="dim italic"))
    if call.note and call.note not in NOT_RUN_REASONS:
        body.append(block(safe_text(call.note, 500, "yellow")))
    border = "bold cyan" if selected else ("red" if failed else "grey37")
    return Panel(
        Group(*body),
        title=Text(f"call {call.idx}" + (" ◀" if selected else ""), style=border),
        title_align="left",
        subtitle=Text("  ".join(status), style="red" if failed else "dim"),
        subtitle_align="right",
        border_style=border,
        padding=(0, 1),
    )


def calls_view(calls: tuple[CallInfo, ...], selected: int) -> RenderableType:
    if not calls:
        return Text("no command in this turn", style="dim italic")
    return Group(*[call_panel(c, i == selected) for i, c in enumerate(calls)])


def _said(passed: int | None) -> str:
    return {1: "passed", 0: "failed"}.get(passed, "had no verdict")  # type: ignore[arg-type]


def tests_view(tests: tuple[TestOutcome, ...]) -> RenderableType:
    parts: list[RenderableType] = []
    for t in tests:
        ok = t.outcome == "passed"
        line = Text("✓ " if ok else "✗ ", style="green" if ok else "bold red")
        line.append(f"{t.outcome:<8}", style="green" if ok else "red")
        line.append_text(safe_text(t.nodeid, 300))
        if not t.in_inventory:
            line.append("  (not in the inventory)", style="dim")
        parts.append(block(line))
        if not ok:
            for detail in failure_lines(t.message):
                parts.append(block(Text("    ").append_text(safe_text(detail, 300, "dim"))))
    return Group(*parts)


def verdict_view(ep: EpisodeInfo, verdict: Verdict) -> RenderableType:
    summary = Table.grid(padding=(0, 2))
    summary.add_column(style="dim")
    summary.add_column()
    outcome = Text(ep.outcome, style=OUTCOME_STYLE.get(ep.outcome, ""))
    if ep.outcome == "unsafe":
        why = "the tests passed, but " if ep.passed else ""
        outcome.append(f"  ({why}collateral damage latched)", style="red")
    summary.add_row("outcome", outcome)
    summary.add_row("end", safe_text(ep.end_reason or "—"))
    if ep.tests_total:
        summary.add_row("tests", Text(f"{ep.tests_passed}/{ep.tests_total} passed"))
    if ep.segments_total > 1:
        summary.add_row(
            "segments", Text(f"{ep.segments_passed} of {ep.segments_total} passed their gate")
        )
    reward = Text("—" if ep.reward is None else f"{ep.reward:+.2f}")
    if ep.collateral:
        reward.append("  (-1: collateral damage)", style="red")
    summary.add_row("reward", reward)
    summary.add_row("safe success", _flag(ep.safe_success))
    collateral = Text("no", style="green")
    if ep.collateral:
        where = f", latched at call {ep.collateral_call}" if ep.collateral_call else ""
        collateral = Text(f"YES{where}", style="bold red")
    summary.add_row("collateral", collateral)
    if ep.fault_family != vocab.NO_FAULT:
        summary.add_row("fault", safe_text(f"{ep.fault_family} on {ep.fault_target or 'unknown'}"))
        summary.add_row("fault cleared", _flag(ep.fault_cleared))
    if ep.error_kind:
        summary.add_row(
            "error", safe_text(f"{ep.error_kind}: {ep.error_detail or ''}", 500, "magenta")
        )
    original = verdict.replayed
    if original is not None:
        agree = vocab.replay_agrees(ep.run_outcome, original.run_outcome)
        summary.add_row(
            "replay of",
            Text.assemble(
                f"episode {original.id}, which {_said(original.passed)}: ",
                ("agrees", "green")
                if agree
                else ("DISAGREES", "bold red")
                if agree is False
                else ("says nothing (the replay did not count)", "magenta"),
            ),
        )
    parts: list[RenderableType] = [Text("Verdict", style="bold underline"), summary]
    if verdict.segments:
        seg = Table(box=None, header_style="dim", padding=(0, 2))
        for col in ("segment", "first turn", "passed", "tests"):
            seg.add_column(col)
        for s in verdict.segments:
            tests = "—" if s.tests_total is None else f"{s.tests_passed}/{s.tests_total}"
            seg.add_row(
                safe_text(f"{s.idx + 1}. {s.name}"),
                str(s.first_turn or "—"),
                _flag(s.passed),
                tests,
            )
        for idx in range(len(verdict.segments), ep.segments_total):
            seg.add_row(Text(f"{idx + 1}.", style="dim"), "", Text("not started", style="dim"), "")
        parts += [Text(""), seg]
    if verdict.tests:
        parts += [Text(""), tests_view(verdict.tests)]
    if verdict.fault is not None:
        f = verdict.fault
        parts.append(
            block(
                safe_text(
                    f"fault record: {f.family} target {f.target}"
                    + (f", spare {f.spare_path}" if f.spare_path else "")
                    + (
                        f", first met at call {f.observed_call}"
                        if f.observed_call
                        else ", never met"
                    )
                    + (f", integrity: {f.integrity}" if f.integrity else "")
                    + (", put back for grading" if f.restored_for_grading else ""),
                    800,
                    "dim",
                )
            )
        )
    if verdict.final_events:
        parts += [
            Text(""),
            Text("Oracle, final check", style="bold"),
            events_view(verdict.final_events),
        ]
    return Group(*parts)


class TurnView(VerticalScroll):
    """Scrolls with j/k (bound on the replay screen); its parts update in place."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._reasoning = ""
        self._oracle_shown = True  # the placeholder text below is not drawn yet

    def compose(self) -> ComposeResult:
        yield Static(id="turn-head")
        yield Static(id="turn-text")
        with Collapsible(title="reasoning", collapsed=True, id="reasoning"):
            yield Static(id="turn-reasoning")
        yield Static(id="turn-calls")
        yield Static(Text("Oracle", style="bold"), id="turn-oracle-title")
        yield Static(id="turn-oracle")
        yield Static(id="turn-verdict")

    def show(
        self,
        ep: EpisodeInfo,
        turn: TurnDetail,
        selected_call: int,
        verdict: Verdict | None,
    ) -> None:
        self.query_one("#turn-head", Static).update(turn_header(ep, turn))
        self.query_one("#turn-text", Static).update(model_words(turn))
        reasoning = self.query_one("#reasoning", Collapsible)
        title = f"reasoning ({len(turn.reasoning):,} characters)"
        # Setting a style or a reactive to the value it has still costs a style pass.
        if reasoning.display != bool(turn.reasoning):
            reasoning.display = bool(turn.reasoning)
        if reasoning.title != title:
            reasoning.title = title
        if not reasoning.collapsed:
            self.query_one("#turn-reasoning", Static).update(safe_text(turn.reasoning, WORDS_SHOWN))
        self._reasoning = turn.reasoning
        self.query_one("#turn-calls", Static).update(calls_view(turn.calls, selected_call))
        oracle = self.query_one("#turn-oracle", Static)
        if turn.events or self._oracle_shown:
            oracle.update(events_view(turn.events))
            self._oracle_shown = bool(turn.events)
        verdict_static = self.query_one("#turn-verdict", Static)
        if verdict_static.display != (verdict is not None):
            verdict_static.display = verdict is not None
        if verdict is not None:
            verdict_static.update(verdict_view(ep, verdict))

    def toggle_reasoning(self) -> None:
        reasoning = self.query_one("#reasoning", Collapsible)
        if reasoning.collapsed:  # folded reasoning is only drawn once opened
            self.query_one("#turn-reasoning", Static).update(
                safe_text(self._reasoning, WORDS_SHOWN)
            )
        reasoning.collapsed = not reasoning.collapsed
