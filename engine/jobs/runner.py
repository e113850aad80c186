"""Running one claimed job: its units over a pool of worker threads, with a heartbeat.

The calling thread watches the pool: it collects unit results, heartbeats the job row (which is
also how it learns of cancel and pause), and decides the job's final status. Workers are daemon
threads, so a unit stuck in a model call can never keep the process alive after the job has been
given up. The sequence around a run (claim, record the end again while the store refuses it) is
engine/jobs/supervisor.py.

Stopping has two steps. First the context says stop: units start no new episode and, for cancel,
pause and shutdown, end the ones in flight at their next turn. If units are still busy after
GRACE_S, the watching thread marks this owner's running episodes interrupted and removes their
containers, which makes whatever a worker is waiting on fail fast.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from engine.jobs.containers import remove_containers
from engine.jobs.context import JobContext
from engine.jobs.owner import HEARTBEAT_S
from engine.protocol.execute import Executor
from engine.protocol.kinds import JobKind, ProgressEvent, UnitResult
from engine.protocol.registry import get_kind
from store.db import Store, StoreError
from store.queue import ClaimedJob, finish_job, heartbeat_job, interrupt_episodes, set_progress

log = logging.getLogger("depthtui.engine")

GRACE_S = 5.0  # how long units get to stop by themselves before their containers are removed
FORCE_WAIT_S = 10.0  # after that, how long to wait for worker threads before giving them up


class JobListener(Protocol):
    """What a live display of a running job is told (the foreground's progress bars). Every
    method does nothing by default, so a display subclasses this and overrides what it shows."""

    def job_started(self, job: ClaimedJob, units: list[str]) -> None: ...

    def unit_started(self, unit: str) -> None: ...

    def event(self, event: ProgressEvent) -> None: ...

    def unit_finished(self, unit: str, result: UnitResult | None) -> None:
        """`result` is None when the unit was skipped because the job was stopping."""

    def stopping(self, reason: str) -> None: ...


class _Quiet(JobListener):
    """No display (the background engine)."""


@dataclass(frozen=True)
class JobOutcome:
    status: str  # done | failed | cancelled | paused | queued (released) | lost (taken over)
    message: str
    results: tuple[UnitResult, ...] = ()
    # Empty when the end is in the store; otherwise why the store refused it (disk full): the
    # job row still says running, and the caller may try `record_end` again later.
    unrecorded: str = ""


def job_workers(params: dict, default: int) -> int:
    """The pool size: the job's own `workers` parameter when it has one, else the runner's."""
    value = params.get("workers")
    if value is None:
        return max(1, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"job parameter 'workers': expected an integer >= 1, got {value!r}")
    return value


def run_job(
    store: Store,
    job: ClaimedJob,
    owner: str,
    *,
    workers: int,
    listener: JobListener | None = None,
    external_stop: Callable[[], str | None] | None = None,
    resolve: Callable[[str], JobKind] = get_kind,
    executor: Executor | None = None,
) -> JobOutcome:
    """Run a job that `owner` has claimed, record its end in the store, and say how it ended.
    The job's own `workers` parameter, when set, wins over `workers`.

    `external_stop` is polled by the watching thread: a reason ("engine stopping") ends the job and
    puts it back in the queue. Ctrl-C (KeyboardInterrupt in the calling thread) cancels the job;
    a second Ctrl-C stops waiting for units at once. `executor` runs the episodes' bodies
    (engine/jobs/executor.py); None runs them in the pool's threads.
    """
    listener = listener or _Quiet()
    try:
        kind = resolve(job.kind)
        ctx = JobContext(
            store,
            job.id,
            job.params,
            owner,
            spent_before=job.cost_usd,
            on_event=listener.event,
            executor=executor,
        )
        units = list(kind.units(store, job.params))
        workers = job_workers(job.params, workers)
    except KeyboardInterrupt:
        return record_end(store, job, owner, "cancelled", "cancelled (Ctrl-C) before it started")
    except Exception as exc:
        log.info("job %s: cannot start", job.id, exc_info=True)
        return record_end(store, job, owner, "failed", f"cannot start: {_one_line(exc)}")
    listener.job_started(job, units)
    try:
        set_progress(store, job.id, owner, done=0, total=len(units), failed=0)
    except StoreError as exc:
        return record_end(store, job, owner, "failed", f"the store failed: {exc}")
    pool = _UnitPool(store, job, owner, ctx, kind, units, listener, external_stop)
    pool.run(workers)
    status, message = pool.verdict()
    return record_end(store, job, owner, status, message, pool.results_in_order())


class _UnitPool:
    def __init__(
        self,
        store: Store,
        job: ClaimedJob,
        owner: str,
        ctx: JobContext,
        kind: JobKind,
        units: list[str],
        listener: JobListener,
        external_stop: Callable[[], str | None] | None,
    ) -> None:
        self.store, self.job, self.owner, self.ctx = store, job, owner, ctx
        self.kind, self.units, self.listener = kind, units, listener
        self.external_stop = external_stop
        self.results: dict[str, UnitResult | None] = {}
        self.stopped: set[str] = set()  # units that returned unfinished because of a stop
        self.store_error: str | None = None
        self.lost = False
        self._todo: queue.SimpleQueue[str] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[tuple[str, UnitResult | None]] = queue.SimpleQueue()
        self._last_message: str | None = None

    # --- the pool ------------------------------------------------------------------------------

    def run(self, workers: int) -> None:
        for unit in self.units:
            self._todo.put(unit)
        threads = [
            threading.Thread(target=self._work, name=f"job{self.job.id}-w{i}", daemon=True)
            for i in range(min(workers, len(self.units)))
        ]
        for t in threads:
            t.start()
        abort_at: float | None = None
        forced_at: float | None = None
        next_beat = 0.0
        while len(self.results) < len(self.units):
            try:
                try:
                    unit, result = self._done.get(timeout=0.25)
                except queue.Empty:
                    pass
                else:
                    self._record(unit, result)
                if time.monotonic() >= next_beat:
                    next_beat = time.monotonic() + HEARTBEAT_S
                    self._heartbeat()
                reason = self.external_stop() if self.external_stop else None
                if reason:
                    self._abort(reason)
            except KeyboardInterrupt:
                if self.ctx.should_abort():
                    if forced_at is None:
                        self._force("second Ctrl-C")
                    log.info("job %s: not waiting for %d unit(s)", self.job.id, self._busy())
                    break
                self._abort("cancelled (Ctrl-C)")
            if self.ctx.should_abort() and abort_at is None:
                abort_at = time.monotonic()
            if abort_at is not None and forced_at is None and time.monotonic() - abort_at > GRACE_S:
                forced_at = self._force(f"units did not stop within {GRACE_S:.0f} s")
            if forced_at is not None and time.monotonic() - forced_at > FORCE_WAIT_S:
                log.info("job %s: giving up on %d busy worker(s)", self.job.id, self._busy())
                break

    def _work(self) -> None:
        while True:
            try:
                unit = self._todo.get_nowait()
            except queue.Empty:
                return
            if self.ctx.should_stop():
                self._done.put((unit, None))
                continue
            self.listener.unit_started(unit)
            try:
                result = self.kind.run_unit(self.ctx, unit)
            except Exception as exc:
                log.info("job %s unit %s raised", self.job.id, unit, exc_info=True)
                result = UnitResult(unit=unit, ok=False, error=_one_line(exc))
            if not result.ok and self.ctx.should_stop():
                # A unit that gave up because the job is stopping did not fail: it is unfinished,
                # and a resumed job runs it again.
                self.stopped.add(unit)
            self._done.put((unit, result))

    def _busy(self) -> int:
        return len(self.units) - len(self.results)

    def _record(self, unit: str, result: UnitResult | None) -> None:
        self.results[unit] = result
        self.ctx.latest.pop(unit, None)
        self.listener.unit_finished(unit, None if unit in self.stopped else result)
        finished = self.results_in_order()
        try:
            set_progress(
                self.store,
                self.job.id,
                self.owner,
                done=len(finished),
                total=len(self.units),
                failed=sum(1 for r in finished if not r.ok),
            )
        except StoreError as exc:
            self._store_failed(exc)

    # --- heartbeat and stopping ----------------------------------------------------------------

    def _heartbeat(self) -> None:
        message = self._live_message()
        try:
            controls = heartbeat_job(
                self.store,
                self.job.id,
                self.owner,
                message if message != self._last_message else None,
            )
        except StoreError as exc:
            self._store_failed(exc)
            return
        self._last_message = message
        if controls.owner != self.owner or controls.status != "running":
            if controls.status == "cancelled" or controls.cancel_requested:
                self._abort("cancelled (requested)")
            else:
                self.lost = True
                self._abort(f"lost: job is now {controls.status}, owner {controls.owner}")
        elif controls.cancel_requested:
            self._abort("cancelled (requested)")
        elif controls.pause_requested:
            self._abort("paused (requested)")

    def _live_message(self) -> str:
        parts = []
        for unit, ev in sorted(self.ctx.latest.items()):
            parts.append(f"{unit}: {describe_event(ev)}")
        return "running " + "; ".join(parts) if parts else ""

    def _store_failed(self, exc: StoreError) -> None:
        if self.store_error is None:
            self.store_error = str(exc)
            log.info("job %s: store failed: %s", self.job.id, exc)
        self._abort(f"lost: the store failed ({exc})")

    def _abort(self, reason: str) -> None:
        if self.ctx.should_abort() is None:
            log.info("job %s: stopping: %s", self.job.id, reason)
            self.listener.stopping(reason)
        self.ctx.abort(reason)

    def _force(self, why: str) -> float:
        """Interrupt this job's episodes in flight and remove their containers."""
        log.info("job %s: forcing the stop (%s)", self.job.id, why)
        self.listener.stopping(f"stopping now ({why}): removing containers")
        try:
            gone = interrupt_episodes(self.store, self.owner, self.job.id, self.ctx.should_abort())
        except StoreError as exc:
            self._store_failed(exc)
            gone = []
        _, errors = remove_containers(g.container_id for g in gone)
        for e in errors:
            log.info("job %s: %s", self.job.id, e)
        return time.monotonic()

    # --- the verdict -----------------------------------------------------------------------------

    def results_in_order(self) -> tuple[UnitResult, ...]:
        """The units that finished (ok or failed), in unit order; not the skipped or stopped."""
        return tuple(
            r
            for u in self.units
            if (r := self.results.get(u)) is not None and u not in self.stopped
        )

    def verdict(self) -> tuple[str, str]:
        done = self.results_in_order()
        failed = [r for r in done if not r.ok]
        not_run = len(self.units) - len(done)
        reason = self.ctx.should_abort() or self.ctx.first_stop or ""
        returned = tuple(r for r in self.results.values() if r is not None)
        counts = _counts(len(done), returned, len(self.units), self.ctx.spent)
        if self.store_error:
            return "failed", f"the store failed: {self.store_error}; {counts}"
        if self.lost:
            return "lost", f"{reason}; {counts}"
        if reason.startswith("cancelled"):
            return "cancelled", f"{reason}; {counts}"
        if reason.startswith("paused"):
            return "paused", f"{reason}; {counts}"
        if reason.startswith("engine stopping"):
            return "queued", f"{reason}: queued again; {counts}"
        if failed:
            # First lines only: a unit's whole error (a build log's tail) was said as it ended.
            shown = "; ".join(
                f"{r.unit}: {(r.error or 'failed').splitlines()[0]}" for r in failed[:5]
            )
            more = f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""
            return "failed", f"{len(failed)} of {len(self.units)} unit(s) failed: {shown}{more}"
        if reason and (not_run or self.ctx.first_stop):
            return "paused", (
                f"stopped: {reason}; {counts}; `depthtui jobs resume {self.job.id}` goes on "
                "(completed runs are reused)"
            )
        return "done", counts


def describe_event(ev: ProgressEvent) -> str:
    """A few words for a progress event: 'oracle: turn 3 of 5', 'model-a: verifying'."""
    phase = {
        "image": "building",
        "start": "starting",
        "plant": "planting",
        "baseline": "baseline",
        "verify": "verifying",
        "reused": "reused",
    }.get(ev.phase, ev.phase)
    if ev.phase == "agent" and ev.turn is not None:
        phase = f"turn {ev.turn}" + (f" of {ev.cap}" if ev.cap else "")
    text = f"{ev.label}: {phase}" if ev.label else phase
    return f"{text} ({ev.detail})" if ev.detail else text


def _counts(finished: int, returned: tuple[UnitResult, ...], total: int, spent: float) -> str:
    run = sum(r.episodes_run for r in returned)
    reused = sum(r.episodes_reused for r in returned)
    return (
        f"{finished} of {total} unit(s) finished, {run} episode(s) run, {reused} reused, "
        f"${spent:.4f}"
    )


def record_end(
    store: Store,
    job: ClaimedJob,
    owner: str,
    status: str,
    message: str,
    results: tuple[UnitResult, ...] = (),
) -> JobOutcome:
    """Write how `owner`'s run of a job ended: episodes still marked running become interrupted
    (their containers are removed), then the job row gets its status and message. When the
    store refuses (disk full) nothing is half-written and `unrecorded` says why."""
    if status == "lost":
        return JobOutcome("lost", message, results)
    try:
        gone = interrupt_episodes(store, owner, job.id, f"job ended ({status})")
        if gone:
            _, errors = remove_containers(g.container_id for g in gone)
            message += f"; {len(gone)} episode(s) in flight marked interrupted"
            message += f" ({'; '.join(errors)})" if errors else ""
        ours = finish_job(store, job.id, owner, status, message)
    except StoreError as exc:
        return JobOutcome(status, message, results, unrecorded=str(exc))
    if not ours:
        return JobOutcome("lost", f"another process took job {job.id} over; {message}", results)
    return JobOutcome(status, message, results)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
