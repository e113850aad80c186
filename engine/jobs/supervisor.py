"""One job's supervision, the same sequence for the background engine and a foreground verb:
claim the job, run it (the runner heartbeats the row and handles cancel and pause), turn a late
Ctrl-C into a recorded cancel, and record the end again while the store refuses it.

What differs between the two callers stays with them: the engine's polling and backoff loop and
its own heartbeat (engine/jobs/engine.py), the foreground's progress bars (depthtui/progress.py,
a `JobListener`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from engine.jobs.executor import LOCAL_CHOICE, ExecutorChoice, executor_problem, make_executor
from engine.jobs.runner import JobListener, JobOutcome, record_end, run_job
from engine.protocol.kinds import JobKind
from engine.protocol.registry import get_kind
from store.db import Store
from store.queue import ClaimedJob, claim_job, claim_next_job


class Supervisor:
    """Runs jobs for one owner ("host:pid") on one store, with one executor choice."""

    def __init__(
        self,
        store: Store,
        owner: str,
        *,
        workers: int,
        resolve: Callable[[str], JobKind] = get_kind,
        executor: ExecutorChoice = LOCAL_CHOICE,
        external_stop: Callable[[], str | None] | None = None,
    ) -> None:
        self.store, self.owner, self.workers = store, owner, workers
        self.resolve = resolve
        self.executor = executor
        # Polled while a job runs: a reason ("engine stopping") ends it and queues it again.
        self.external_stop = external_stop

    def problem(self) -> str | None:
        """Why episodes cannot start now (no Docker, no Ray cluster), or None."""
        return executor_problem(self.executor)

    def claim(self, job_id: int | None = None) -> ClaimedJob | None:
        """Claim job `job_id`, or the oldest queued job; None when it is not (or none is) queued."""
        if job_id is None:
            return claim_next_job(self.store, self.owner)
        return claim_job(self.store, job_id, self.owner)

    def run(self, job: ClaimedJob, listener: JobListener | None = None) -> JobOutcome:
        """Run a claimed job to its end and record that end; how it ended. A Ctrl-C that lands
        outside the runner's own handling cancels the job. When the store refused the end (disk
        full), the outcome says so (`unrecorded`) and `record_again` tries once more."""
        try:
            outcome = run_job(
                self.store,
                job,
                self.owner,
                workers=self.workers,
                listener=listener,
                external_stop=self.external_stop,
                resolve=self.resolve,
                executor=make_executor(self.executor),
            )
        except KeyboardInterrupt:
            outcome = self.cancel(job)
        return outcome

    def cancel(self, job: ClaimedJob) -> JobOutcome:
        """Record a claimed job as cancelled by Ctrl-C (one that landed outside the runner)."""
        return record_end(self.store, job, self.owner, "cancelled", "cancelled (Ctrl-C)")

    def record_again(
        self, job: ClaimedJob, outcome: JobOutcome, *, tries: int = 1, wait_s: float = 0.0
    ) -> JobOutcome:
        """Record an end the store refused, up to `tries` times `wait_s` apart (a full disk may
        take it a moment later); the outcome as it stands then, still `unrecorded` if refused."""
        for _ in range(tries):
            if not outcome.unrecorded:
                break
            time.sleep(wait_s)
            outcome = record_end(
                self.store, job, self.owner, outcome.status, outcome.message, outcome.results
            )
        return outcome
