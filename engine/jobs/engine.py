"""The background engine: one process that takes queued jobs from a store and runs them.

Run as `python -m engine.jobs.engine --db PATH [--workers N]` (what `depthtui engine start` and
`ensure_engine` launch). It registers itself in the `engines` table and heartbeats there, takes
over what dead engines left, then loops: when jobs are queued and Docker answers, claim the oldest
one and run it. SIGTERM or SIGINT (or `engines.status = 'stopping'`, set by `depthtui engine
stop`) ends the job in hand, puts it back in the queue and exits. An engine that has had no job
for its idle limit (`--idle-s`, else $DEPTHTUI_ENGINE_IDLE_S, else IDLE_S; 0: never) stops by
itself, saying so in its `engines` row: an engine left behind by a front end that quit must not
heartbeat into the store for ever.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from engine.jobs.executor import EXECUTORS, LOCAL_CHOICE, ExecutorChoice, executor_problem
from engine.jobs.owner import HEARTBEAT_S
from engine.jobs.runner import JobOutcome
from engine.jobs.supervisor import Supervisor
from engine.jobs.takeover import take_over
from engine.protocol.kinds import JobKind
from engine.protocol.registry import get_kind
from engine.sandbox.labels import this_owner
from store.db import Store, StoreError
from store.queue import (
    ClaimedJob,
    heartbeat_engine,
    note_queued,
    queued_count,
    register_engine,
    set_engine_status,
)

log = logging.getLogger("depthtui.engine")

POLL_S = 1.0  # how often an idle engine looks for queued jobs
TAKEOVER_EVERY_S = 15.0  # how often a running engine looks for dead engines' leftovers
BACKOFF_S = (5.0, 10.0, 20.0, 40.0, 60.0)  # waits while Docker or the store keeps failing
IDLE_S = 600.0  # an engine with no job this long stops by itself (0: never)
IDLE_ENV = "DEPTHTUI_ENGINE_IDLE_S"
IDLE_MESSAGE = "stopped: no job for {:.0f} s (idle limit)"


def idle_limit(value: str | float | None = None) -> float:
    """The idle limit in seconds: `value` (an option), else $DEPTHTUI_ENGINE_IDLE_S, else IDLE_S.
    Raises ValueError naming the setting when it is not a number >= 0."""
    source = "--idle-s"
    if value is None:
        value, source = os.environ.get(IDLE_ENV), IDLE_ENV
    if value is None or value == "":
        return IDLE_S
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"{source}: expected seconds (a number >= 0), got {value!r}") from None
    if not seconds >= 0:  # (also NaN)
        raise ValueError(f"{source}: expected seconds (a number >= 0), got {value!r}")
    return seconds


def engine_log_path(db_path: Path) -> Path:
    """The engine's log, beside the store."""
    return db_path.with_name(db_path.name + ".engine.log")


class Engine:
    def __init__(
        self,
        db_path: Path,
        workers: int,
        *,
        resolve: Callable[[str], JobKind] = get_kind,
        docker_check: Callable[[], str | None] | None = None,
        executor: ExecutorChoice = LOCAL_CHOICE,
        idle_s: float | None = None,
    ) -> None:
        self.db_path = db_path
        self.idle_s = idle_limit() if idle_s is None else idle_s
        self.workers = workers
        self.resolve = resolve
        # Where episodes run (a runtime setting: docs/ray.md); the check says why they cannot.
        self.executor = executor
        self.docker_check = docker_check or (lambda: executor_problem(executor))
        self.owner = this_owner()
        self.stop_event = threading.Event()
        self.job_id: int | None = None
        self.store: Store | None = None
        self._closed = False
        self.stop_message = "stopped"  # what the engine row says once it has stopped
        # Jobs whose end the store refused to record (disk full): retried with the backoff.
        self._unrecorded: list[tuple[ClaimedJob, JobOutcome]] = []

    def request_stop(self, *_: object) -> None:
        self.stop_event.set()

    def serve(self) -> None:
        """Run until asked to stop. Raises StoreError when the store cannot be opened."""
        store = self.store = Store(self.db_path)
        register_engine(
            store,
            self.owner,
            socket.gethostname(),
            _pid(self.owner),
            self.workers,
            str(engine_log_path(self.db_path)),
        )
        log.info(
            "engine %s started on %s, %d worker(s), %s executor",
            self.owner,
            self.db_path,
            self.workers,
            self.executor.kind,
        )
        supervisor = Supervisor(
            store,
            self.owner,
            workers=self.workers,
            resolve=self.resolve,
            executor=self.executor,
            external_stop=lambda: "engine stopping" if self.stop_event.is_set() else None,
        )
        beat = threading.Thread(target=self._heartbeat, name="engine-heartbeat", daemon=True)
        beat.start()
        failures = 0
        next_takeover = 0.0
        sweep = True  # the first look also sweeps containers of dead owners by label
        idle_since = time.monotonic()  # no job in hand since
        try:
            while not self.stop_event.is_set():
                try:
                    if self._unrecorded:
                        self._record_ends(supervisor)
                    if time.monotonic() >= next_takeover:
                        next_takeover = time.monotonic() + TAKEOVER_EVERY_S
                        report = take_over(store, sweep=sweep)
                        sweep = False
                        if report:
                            log.info("%s", report.describe())
                    if queued_count(store) == 0:
                        if self.idle_s and time.monotonic() - idle_since >= self.idle_s:
                            self.stop_message = IDLE_MESSAGE.format(self.idle_s)
                            log.info("no job for %.0f s: stopping (the idle limit)", self.idle_s)
                            break
                        self.stop_event.wait(POLL_S)
                        continue
                    problem = self.docker_check()
                    if problem:
                        wait = BACKOFF_S[min(failures, len(BACKOFF_S) - 1)]
                        failures += 1
                        note_queued(
                            store,
                            f"waiting: {problem}; engine {self.owner} tries again in "
                            f"{wait:.0f} s (the job stays queued)",
                        )
                        log.warning(
                            "not starting queued jobs: %s; retrying in %.0f s", problem, wait
                        )
                        self.stop_event.wait(wait)
                        continue
                    failures = 0
                    job = supervisor.claim()
                    if job is None:
                        continue
                    try:
                        self._run(supervisor, job)
                    finally:
                        idle_since = time.monotonic()
                except StoreError as exc:
                    wait = BACKOFF_S[min(failures, len(BACKOFF_S) - 1)]
                    failures += 1
                    log.error("the store failed: %s; retrying in %.0f s", exc, wait)
                    self.stop_event.wait(wait)
        finally:
            self.job_id = None
            try:
                set_engine_status(store, self.owner, "stopped", self.stop_message)
            except StoreError as exc:
                log.error("could not record the engine's stop: %s", exc)
            log.info("engine %s stopped", self.owner)
            self._closed = True
            store.close()

    def _run(self, supervisor: Supervisor, job: ClaimedJob) -> None:
        self.job_id = job.id
        log.info("job %s (%s) claimed: %s", job.id, job.kind, job.cli)
        try:
            outcome = supervisor.run(job)
        finally:
            self.job_id = None
        log.info("job %s ended %s: %s", job.id, outcome.status, outcome.message)
        if outcome.unrecorded:
            log.error(
                "job %s: could not record its end (%s); it stays marked running until the "
                "store takes writes again",
                job.id,
                outcome.unrecorded,
            )
            self._unrecorded.append((job, outcome))
            raise StoreError(outcome.unrecorded)  # the loop backs off

    def _record_ends(self, supervisor: Supervisor) -> None:
        for job, outcome in list(self._unrecorded):
            again = supervisor.record_again(job, outcome)
            if again.unrecorded:
                raise StoreError(again.unrecorded)
            self._unrecorded.remove((job, outcome))
            log.info("job %s: its end is recorded now (%s)", job.id, again.status)

    def _heartbeat(self) -> None:
        assert self.store is not None
        failing = False  # log a failing store once, and its recovery, not every beat
        while not self._closed:
            try:
                status = heartbeat_engine(self.store, self.owner, self.job_id)
            except StoreError as exc:
                if self._closed:
                    return
                if not failing:
                    log.error("engine heartbeat failed: %s", exc)
                failing = True
                status = "running"
            else:
                if failing:
                    log.info("engine heartbeat recorded again")
                failing = False
            if status != "running" and not self.stop_event.is_set():
                # `depthtui engine stop` from another host can only say so in the store.
                log.info("asked to stop (the engine row says %s)", status)
                self.stop_event.set()
            time.sleep(HEARTBEAT_S)


def _pid(owner: str) -> int:
    return int(owner.rpartition(":")[2])


def main(argv: list[str] | None = None, *, kinds: Mapping[str, JobKind] | None = None) -> int:
    """The engine process. `kinds` adds job kinds, or replaces registered ones of the same name,
    for a program that embeds the engine with kinds of its own (the test suite's
    tests/engine_main.py); the command line cannot name code to import."""
    parser = argparse.ArgumentParser(prog="python -m engine.jobs.engine", description=__doc__)
    parser.add_argument("--db", type=Path, required=True, help="the store (SQLite file)")
    parser.add_argument("--workers", type=int, default=1, help="units run at once (default 1)")
    parser.add_argument("--executor", choices=EXECUTORS, default="local", help="where episodes run")
    parser.add_argument("--ray-address", default=None, help="the Ray cluster (--executor ray)")
    parser.add_argument(
        "--idle-s",
        default=None,
        help=f"stop after this many seconds with no job (default ${IDLE_ENV}, else {IDLE_S:.0f}; "
        "0: never)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(message)s",
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per model request is noise
    if args.workers < 1:
        log.error("--workers: expected an integer >= 1, got %d", args.workers)
        return 2
    try:
        idle_s = idle_limit(args.idle_s)
    except ValueError as exc:
        log.error("%s", exc)
        return 2
    extra = dict(kinds or {})

    def resolve(kind: str) -> JobKind:
        return extra[kind] if kind in extra else get_kind(kind)

    try:
        choice = ExecutorChoice(args.executor, args.ray_address)
    except ValueError as exc:
        log.error("%s", exc)
        return 2
    engine = Engine(
        args.db.expanduser().resolve(),
        args.workers,
        resolve=resolve,
        executor=choice,
        idle_s=idle_s,
    )
    signal.signal(signal.SIGTERM, engine.request_stop)
    signal.signal(signal.SIGINT, engine.request_stop)
    try:
        engine.serve()
    except StoreError as exc:
        log.error("%s", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
