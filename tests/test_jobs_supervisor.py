"""The one supervision sequence of the engine and the foreground verbs (engine/jobs/supervisor.py)
in-process on a real store file: claim, run to a recorded end, an external stop, and recording
an end the store refused before."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.jobs.runner import JobListener, JobOutcome
from engine.jobs.supervisor import Supervisor
from store.db import Store
from store.jobs import get_job
from tests.fixtures_jobs import resolve, submit

OWNER = "testhost:7"


@pytest.fixture
def store(db_path: Path) -> Store:
    s = Store(db_path)
    yield s
    s.close()


def test_claims_the_named_job_or_the_oldest_and_nothing_twice(store: Store) -> None:
    first, second = submit(store, {"units": ["a"]}), submit(store, {"units": ["b"]})
    sup = Supervisor(store, OWNER, workers=1, resolve=resolve)
    assert sup.claim(second).id == second
    assert sup.claim(second) is None
    assert sup.claim().id == first
    assert sup.claim() is None


def test_a_claimed_job_runs_to_a_recorded_end_with_its_display_told(store: Store) -> None:
    seen: list[str] = []

    class Display(JobListener):
        def job_started(self, job, units):
            seen.append(f"job {job.id}: {','.join(units)}")

        def unit_finished(self, unit, result):
            seen.append(f"{unit} ok={result.ok}")

    job_id = submit(store, {"units": ["a", "b"], "episodes": 1})
    sup = Supervisor(store, OWNER, workers=2, resolve=resolve)
    outcome = sup.run(sup.claim(job_id), Display())
    assert (outcome.status, outcome.unrecorded) == ("done", "")
    assert seen[0] == f"job {job_id}: a,b" and sorted(seen[1:]) == ["a ok=True", "b ok=True"]
    job = get_job(store, job_id)
    assert (job.status, job.owner, job.progress_done) == ("done", None, 2)


def test_an_external_stop_puts_the_job_back_in_the_queue(store: Store) -> None:
    job_id = submit(store, {"units": ["a", "b", "c"], "episodes": 2, "turns": 3, "turn_s": 0.2})
    sup = Supervisor(
        store, OWNER, workers=1, resolve=resolve, external_stop=lambda: "engine stopping"
    )
    outcome = sup.run(sup.claim(job_id))
    assert outcome.status == "queued" and "engine stopping: queued again" in outcome.message
    assert get_job(store, job_id).status == "queued"


def test_an_end_the_store_refused_is_recorded_again(store: Store) -> None:
    job_id = submit(store, {"units": ["a"]})
    sup = Supervisor(store, OWNER, workers=1, resolve=resolve)
    job = sup.claim(job_id)
    refused = JobOutcome("failed", "the store failed: disk full", unrecorded="disk full")
    assert sup.record_again(job, refused, tries=0) == refused
    assert get_job(store, job_id).status == "running"
    again = sup.record_again(job, refused, tries=3, wait_s=0.0)
    assert (again.status, again.unrecorded) == ("failed", "")
    assert get_job(store, job_id).status == "failed"
    # Once recorded, a further try changes nothing.
    assert sup.record_again(job, again, tries=3) == again
