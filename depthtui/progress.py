"""Foreground runs: a queued job run in this process, with rich progress bars.

`run_foreground` is what the running verbs (check, validate, free, ladder, audit, episodes) call
when not given `--detach`. One bar for the job (units done of all), one line per unit in flight
showing its episode's phase: building, starting, turn k of cap (a bar), verifying. The claim,
run and record sequence is the engine's own (engine/jobs/supervisor.py); this module holds only
what a person at the terminal sees.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from engine.jobs.executor import LOCAL_CHOICE, ExecutorChoice
from engine.jobs.runner import JobListener, JobOutcome, describe_event
from engine.jobs.supervisor import Supervisor
from engine.jobs.takeover import take_over
from engine.protocol.kinds import JobKind, ProgressEvent, UnitResult
from engine.protocol.registry import get_kind
from engine.sandbox.labels import this_owner
from store.db import Store
from store.queue import ClaimedJob, job_state, set_job_message

STATUS_STYLE = {
    "done": "bold green",
    "failed": "bold red",
    "cancelled": "yellow",
    "paused": "yellow",
    "queued": "yellow",
    "lost": "red",
    "running": "cyan",
}


class JobNotRunnable(RuntimeError):
    """The job cannot run here: unknown, or not queued (another process has it, or it ended)."""


class RichJobDisplay(JobListener):
    """Progress bars fed by the runner; safe to call from worker threads (rich locks)."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.bars = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(bar_width=24),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            transient=False,
        )
        self._job: TaskID | None = None
        self._units: dict[str, TaskID] = {}
        self._warned: set[tuple[str, str]] = set()

    def __enter__(self) -> RichJobDisplay:
        self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bars.stop()

    def job_started(self, job: ClaimedJob, units: list[str]) -> None:
        self._job = self.bars.add_task(f"job {job.id} [bold]{job.kind}[/]", total=len(units))

    def unit_started(self, unit: str) -> None:
        self._line(unit, "starting")

    def event(self, event: ProgressEvent) -> None:
        if event.phase == "warning":
            # Said once per job: every episode of a task meets the same substituted image.
            if (event.unit, event.detail) not in self._warned:
                self._warned.add((event.unit, event.detail))
                self.console.print(f"[yellow]warning:[/] {event.detail}", highlight=False)
            return
        line = self._line(event.unit, describe_event(event))
        if event.phase == "agent" and event.turn is not None and event.cap:
            self.bars.update(line, total=event.cap, completed=min(event.turn, event.cap))
        else:
            self.bars.update(line, total=None, completed=0)

    def unit_finished(self, unit: str, result: UnitResult | None) -> None:
        line = self._units.pop(unit, None)
        if line is not None:
            self.bars.remove_task(line)
        if self._job is not None:
            self.bars.advance(self._job)
        if result is None:
            return
        self.console.print(unit_line(unit, result), highlight=False, markup=True)

    def stopping(self, reason: str) -> None:
        self.console.print(f"[yellow]stopping:[/] {reason}", highlight=False)

    def _line(self, unit: str, text: str) -> TaskID:
        line = self._units.get(unit)
        description = f"  {unit}  [dim]{text}[/]"
        if line is None:
            line = self._units[unit] = self.bars.add_task(description, total=None)
        else:
            self.bars.update(line, description=description)
        return line


def unit_line(unit: str, result: UnitResult) -> str:
    """What a finished unit's line says: ✓ only for a unit whose task came out well (it ran,
    checks out, is valid); a unit that ran but found its task wanting gets ✗ and why; a skipped
    one gets – and why (issue 25)."""
    from rich.markup import escape

    counts = f"{result.episodes_run} run, {result.episodes_reused} reused"
    if not result.ok:
        return f"[red]✗[/] {escape(unit)}: {escape(result.error or 'failed')} ({counts})"
    finding = unit_finding(result.summary)
    skipped = result.summary.get("skipped_families") or {}
    if finding is None and skipped:
        note = "; ".join(f"{family} skipped: {why}" for family, why in sorted(skipped.items()))
        if result.episodes_run + result.episodes_reused == 0:
            finding = ("–", note)  # nothing ran at all: not a ✓
        else:
            return f"[green]✓[/] {escape(unit)}: {counts}; {escape(note)}"
    if finding is None:
        notes = "".join(f"; note: {escape(n)}" for n in result.summary.get("notes") or [])
        planted = result.summary.get("planted")
        notes += f"; {escape(planted)}" if planted else ""
        return f"[green]✓[/] {escape(unit)}: {counts}{notes}"
    mark, why = finding
    style = "red" if mark == "✗" else "yellow"
    return f"[{style}]{mark}[/] {escape(unit)}: {counts}; {escape(why)}"


def unit_finding(summary: dict) -> tuple[str, str] | None:
    """(mark, why) for a unit that ran to its end yet did not come out well, from its summary:
    a skipped task (episodes), a task that does not check out (check), an invalid or
    unvalidated one (validate); None when it came out well."""
    if summary.get("skipped"):
        return "–", f"skipped: {summary['skipped']}"
    if summary.get("ok") is False:
        return "✗", "does not check out: " + "; ".join(summary.get("problems") or ["(no reason)"])
    if "valid" in summary and summary["valid"] is not True:
        why = "; ".join(summary.get("reasons") or []) or "(no reason)"
        if summary["valid"] is None:
            return "–", f"not validated: {why}"
        return "✗", f"invalid: {why}"
    return None


def run_foreground(
    store: Store,
    job_id: int,
    workers: int,
    *,
    console: Console | None = None,
    check_docker: bool = True,
    resolve: Callable[[str], JobKind] = get_kind,
    executor: ExecutorChoice = LOCAL_CHOICE,
) -> str:
    """Run queued job `job_id` in this process with progress bars; its final status.
    `executor` says where episodes run (here, or on a Ray cluster: docs/ray.md).

    Ctrl-C cancels (episodes in flight are marked interrupted and their containers removed; a
    second Ctrl-C stops waiting). With no Docker engine the job stays queued and the status is
    'queued'. When a background engine claimed the job first, this follows its progress instead
    (Ctrl-C then asks that engine to cancel). Raises JobNotRunnable for a job that is neither
    queued nor running."""
    console = console or Console(stderr=True)
    supervisor = Supervisor(
        store, this_owner(), workers=workers, resolve=resolve, executor=executor
    )
    if check_docker:
        problem = supervisor.problem()
        if problem:
            set_job_message(store, job_id, f"not started: {problem}")
            console.print(
                f"[bold red]error:[/] {problem}; job {job_id} stays queued", highlight=False
            )
            return "queued"
    report = take_over(store)  # what an earlier, killed run left: containers, episodes
    if report:
        console.print(f"[dim]{report.describe()}[/]", highlight=False)
    job = supervisor.claim(job_id)
    if job is None:
        state = job_state(store, job_id)
        if state is None:
            raise JobNotRunnable(f"job {job_id}: no such job")
        status, holder = state
        if status == "running":
            return follow_job(store, job_id, console)
        raise JobNotRunnable(
            f"job {job_id} is {status}" + (f" (owner {holder})" if holder else "") + ", not queued"
        )
    started = time.monotonic()
    try:  # (a Ctrl-C as the display opens or closes, outside the run, cancels the job too)
        with RichJobDisplay(console) as display:
            outcome = supervisor.run(job, display)
    except KeyboardInterrupt:
        outcome = supervisor.cancel(job)
    outcome = supervisor.record_again(job, outcome, tries=3, wait_s=1.0)
    _print_outcome(console, job, outcome, time.monotonic() - started)
    if outcome.unrecorded:
        console.print(
            f"[bold red]error:[/] the job's end could not be recorded: {outcome.unrecorded}; "
            "it shows as running until an engine or the next foreground run takes it over",
            highlight=False,
        )
    return outcome.status


def follow_job(store: Store, job_id: int, console: Console, every_s: float = 0.5) -> str:
    """Show the progress of a job another process runs until it stops running; its status.
    Ctrl-C asks for a cancel (the owner stops it within seconds)."""
    from store.jobs import JobError, get_job, request_cancel

    job = get_job(store, job_id)
    console.print(f"job {job_id} is run by {job.owner}; following it", highlight=False)
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(bar_width=24),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as bars:
        line = bars.add_task(f"job {job_id} {job.kind}", total=None)
        while True:
            try:
                job = get_job(store, job_id)
                bars.update(
                    line,
                    total=job.progress_total or None,
                    completed=job.progress_done,
                    description=f"job {job_id} {job.kind} [dim]{job.message[:60]}[/]",
                )
                if job.status != "running":
                    break
                time.sleep(every_s)
            except KeyboardInterrupt:
                try:
                    request_cancel(store, job_id)
                except JobError:
                    continue  # it ended meanwhile
                console.print("cancel requested; waiting for the engine to stop the job")
    style = STATUS_STYLE.get(job.status, "bold")
    console.print(f"job {job_id} [{style}]{job.status}[/]: {job.message}", highlight=False)
    return job.status


def _print_outcome(console: Console, job: ClaimedJob, outcome: JobOutcome, seconds: float) -> None:
    style = STATUS_STYLE.get(outcome.status, "bold")
    console.print(
        f"job {job.id} [{style}]{outcome.status}[/] after {seconds:.1f} s: {outcome.message}",
        highlight=False,
    )
