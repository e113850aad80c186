"""The job runner in-process on a real store file: worker pool, progress, cost, stop reasons,
cancel and pause from the front end, reuse of finished episodes, takeover of a dead owner."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from engine.jobs.context import JobContext, budget_params
from engine.jobs.runner import JobListener, job_workers, run_job
from engine.jobs.takeover import take_over
from store.db import Store
from store.jobs import get_job, request_cancel, request_pause, resume
from store.queue import claim_episode, claim_job, claim_next_job
from tests.fixtures_jobs import resolve, submit, wait_for

OWNER = "testhost:1"


@pytest.fixture
def store(db_path: Path) -> Store:
    s = Store(db_path)
    yield s
    s.close()


def episodes(store: Store, job_id: int | None = None) -> list[dict]:
    sql = "SELECT id, run_key, status, owner, job_id FROM episodes"
    rows = store.query(sql + (" WHERE job_id = ?" if job_id else ""), (job_id,) if job_id else ())
    return [dict(r) for r in rows]


def run(store: Store, job_id: int, owner: str = OWNER, **kw):
    job = claim_job(store, job_id, owner)
    assert job is not None
    return run_job(store, job, owner, workers=kw.pop("workers", 2), resolve=resolve, **kw)


def test_a_job_runs_every_unit_and_records_progress(store: Store) -> None:
    job_id = submit(store, {"units": ["a", "b", "c"], "episodes": 2, "cost": 0.25})
    outcome = run(store, job_id)
    assert outcome.status == "done", outcome.message
    job = get_job(store, job_id)
    assert (job.status, job.progress_done, job.progress_total, job.progress_failed) == (
        "done",
        3,
        3,
        0,
    )
    assert job.cost_usd == pytest.approx(1.5)
    assert job.owner is None and job.finished_at
    eps = episodes(store, job_id)
    assert sorted(e["run_key"] for e in eps) == [f"toy:{u}:{i}" for u in "abc" for i in (0, 1)]
    assert {e["status"] for e in eps} == {"done"}
    assert "6 episode(s) run, 0 reused" in outcome.message


def test_a_second_run_reuses_finished_episodes(store: Store) -> None:
    params = {"units": ["a", "b"], "episodes": 3}
    assert run(store, submit(store, params)).status == "done"
    second = submit(store, params)
    outcome = run(store, second)
    assert outcome.status == "done"
    assert sum(r.episodes_reused for r in outcome.results) == 6
    assert sum(r.episodes_run for r in outcome.results) == 0
    done = [e for e in episodes(store) if e["status"] == "done"]
    assert len(done) == 6 and len({e["run_key"] for e in done}) == 6


def test_a_failing_unit_fails_the_job_with_a_clear_message(store: Store) -> None:
    job_id = submit(store, {"units": ["a", "b", "c"], "fail": ["b"], "raise": ["c"]})
    outcome = run(store, job_id)
    assert outcome.status == "failed"
    assert "2 of 3 unit(s) failed" in outcome.message
    assert "b: toy unit b: infrastructure down" in outcome.message
    assert "c: RuntimeError: toy unit c blew up" in outcome.message
    job = get_job(store, job_id)
    assert (job.status, job.progress_done, job.progress_failed) == ("failed", 3, 2)
    assert job.message == outcome.message


def test_an_unknown_kind_or_bad_params_fail_the_job(store: Store) -> None:
    job_id = submit(store, {"units": "not a list"})
    outcome = run(store, job_id)
    assert outcome.status == "failed"
    assert "parameter 'units': expected a non-empty list" in get_job(store, job_id).message
    job_id = submit(store, {"units": ["a"], "workers": 0})
    assert run(store, job_id).status == "failed"
    assert "'workers': expected an integer >= 1, got 0" in get_job(store, job_id).message
    job_id = submit(store, {"units": ["a"], "max_cost": "lots"})
    assert run(store, job_id).status == "failed"
    assert "'max_cost': expected a number >= 0, got 'lots'" in get_job(store, job_id).message


def test_cancel_from_the_front_end_stops_the_job_and_interrupts_episodes(store: Store) -> None:
    job_id = submit(
        store, {"units": ["a", "b", "c", "d"], "episodes": 5, "turns": 50, "turn_s": 0.05}
    )
    result = {}
    thread = threading.Thread(target=lambda: result.update(o=run(store, job_id, workers=2)))
    thread.start()
    wait_for(lambda: any(e["status"] == "running" for e in episodes(store, job_id)))
    request_cancel(store, job_id)
    thread.join(60)
    assert not thread.is_alive()
    assert result["o"].status == "cancelled"
    job = get_job(store, job_id)
    assert job.status == "cancelled" and job.message.startswith("cancelled (requested)")
    statuses = [e["status"] for e in episodes(store, job_id)]
    assert "running" not in statuses
    assert "interrupted" in statuses


def test_pause_then_resume_completes_with_exactly_the_expected_episodes(store: Store) -> None:
    params = {"units": ["a", "b", "c"], "episodes": 4, "turns": 25, "turn_s": 0.05}
    job_id = submit(store, params)
    result = {}
    thread = threading.Thread(target=lambda: result.update(o=run(store, job_id)))
    thread.start()
    wait_for(lambda: any(e["status"] == "done" for e in episodes(store, job_id)))
    request_pause(store, job_id)
    thread.join(60)
    assert result["o"].status == "paused"
    job = get_job(store, job_id)
    assert job.status == "paused" and not job.pause_requested and job.owner is None
    resume(store, job_id)
    outcome = run(store, job_id)
    assert outcome.status == "done", outcome.message
    done = [e["run_key"] for e in episodes(store, job_id) if e["status"] == "done"]
    assert sorted(done) == sorted(f"toy:{u}:{i}" for u in "abc" for i in range(4))
    assert sum(r.episodes_reused for r in outcome.results) >= 1


def test_a_stop_file_pauses_the_job_before_new_episodes(store: Store, tmp_path: Path) -> None:
    stop = tmp_path / "STOP"
    stop.write_text("")
    job_id = submit(store, {"units": ["a", "b"], "episodes": 2, "stop_file": str(stop)})
    outcome = run(store, job_id)
    assert outcome.status == "paused"
    assert f"stop file {stop} exists" in outcome.message
    assert episodes(store, job_id) == []
    stop.unlink()
    resume(store, job_id)
    assert run(store, job_id).status == "done"
    assert len(episodes(store, job_id)) == 4


def test_max_cost_and_reserve_stop_new_episodes(store: Store) -> None:
    # Each episode costs 1; with max 5 and reserve 2 new episodes start only while 5 - spent >= 2.
    params = {"units": ["a"], "episodes": 10, "cost": 1.0, "max_cost": 5.0, "reserve": 2.0}
    job_id = submit(store, params)
    outcome = run(store, job_id, workers=1)
    assert outcome.status == "paused"
    assert "budget: spent $4.0000 of --max-cost $5.0000 (reserve $2.0000)" in outcome.message
    assert len(episodes(store, job_id)) == 4
    assert get_job(store, job_id).cost_usd == pytest.approx(4.0)


def test_a_unit_cut_short_by_a_stop_is_unfinished_not_failed(store: Store) -> None:
    params = {"units": ["a", "b"], "episodes": 5, "cost": 1.0, "max_cost": 3.0}
    job_id = submit(store, {**params, "fail_when_stopped": True})
    outcome = run(store, job_id, workers=1)
    assert outcome.status == "paused", outcome.message
    assert outcome.message.startswith("stopped: budget: spent $3.0000")
    job = get_job(store, job_id)
    assert (job.progress_done, job.progress_failed) == (0, 0)


def test_budget_params_are_validated() -> None:
    assert budget_params({}) == (None, 0.0, None)
    assert budget_params({"max_cost": 3, "reserve": 0.5, "stop_file": "/x"}) == (3.0, 0.5, "/x")
    with pytest.raises(ValueError, match="'reserve': expected a number >= 0, got -1"):
        budget_params({"reserve": -1})
    with pytest.raises(ValueError, match="'stop_file': expected a path, got 3"):
        budget_params({"stop_file": 3})
    assert job_workers({}, 3) == 3 and job_workers({"workers": 2}, 3) == 2


def test_the_context_counts_cost_and_passes_events(store: Store) -> None:
    seen = []
    ctx = JobContext(store, None, {"max_cost": 1.0}, OWNER, on_event=seen.append)
    assert ctx.should_stop() is None
    ctx.add_cost(0.6)
    ctx.add_cost(0.6)
    assert ctx.should_stop().startswith("budget: spent $1.2000")
    assert ctx.should_abort() is None  # a budget never ends episodes in flight
    ctx.abort("cancelled (Ctrl-C)")
    ctx.abort("paused (requested)")
    assert ctx.should_abort() == "cancelled (Ctrl-C)"


def test_listener_sees_units_and_events(store: Store) -> None:
    calls: list[tuple] = []

    class Recorder(JobListener):
        def job_started(self, job, units):
            calls.append(("job", tuple(units)))

        def unit_finished(self, unit, result):
            calls.append(("unit", unit, result.ok))

        def event(self, event):
            if event.phase == "agent":
                calls.append(("turn", event.unit, event.turn, event.cap))

    job_id = submit(store, {"units": ["a", "b"], "turns": 2})
    run(store, job_id, listener=Recorder())
    assert calls[0] == ("job", ("a", "b"))
    assert {c for c in calls if c[0] == "unit"} == {("unit", "a", True), ("unit", "b", True)}
    assert ("turn", "a", 2, 2) in calls


def test_claims_are_exclusive(store: Store) -> None:
    ids = [submit(store, {"units": ["a"]}) for _ in range(3)]
    first = claim_next_job(store, "h:1")
    second = claim_next_job(store, "h:2")
    assert (first.id, second.id) == (ids[0], ids[1])
    assert claim_job(store, ids[0], "h:3") is None
    assert claim_next_job(store, "h:3").id == ids[2]
    assert claim_next_job(store, "h:4") is None
    fields = {"task_id": "t", "task_hash": "h", "mode": "check", "agent": "toy"}
    a = claim_episode(store, "k", "h:1", fields)
    b = claim_episode(store, "k", "h:2", fields)
    assert (a.state, b.state, b.episode_id) == ("claimed", "busy", a.episode_id)
    # A running episode whose owner is dead is claimed anew (it is interrupted by takeover).
    c = claim_episode(store, "k", "h:2", fields, owner_alive=lambda owner: False)
    assert c.state == "claimed" and c.episode_id != a.episode_id


def test_takeover_requeues_a_dead_owners_job_and_its_episodes_run_again(store: Store) -> None:
    params = {"units": ["a", "b"], "episodes": 2}
    job_id = submit(store, params)
    dead = "deadhost:4242"
    claim_job(store, job_id, dead)
    fields = {"job_id": job_id, "task_id": "a", "task_hash": "h", "mode": "check", "agent": "t"}
    stale = claim_episode(store, "toy:a:0", dead, fields)

    alive_calls = []

    def alive(owner, heartbeat):
        alive_calls.append(owner)
        return owner != dead

    report = take_over(store, alive=alive)
    assert report.jobs_requeued == (job_id,)
    assert report.episodes_interrupted == (stale.episode_id,)
    job = get_job(store, job_id)
    assert job.status == "queued" and job.owner is None
    assert "its process deadhost:4242 died" in job.message
    assert not take_over(store, alive=alive)  # nothing left to take over
    outcome = run(store, job_id)
    assert outcome.status == "done"
    eps = episodes(store, job_id)
    assert [e["status"] for e in eps if e["id"] == stale.episode_id] == ["interrupted"]
    done = sorted(e["run_key"] for e in eps if e["status"] == "done")
    assert done == ["toy:a:0", "toy:a:1", "toy:b:0", "toy:b:1"]


def test_a_job_taken_over_meanwhile_is_left_to_its_new_owner(store: Store) -> None:
    job_id = submit(store, {"units": ["a"], "episodes": 3, "turns": 40, "turn_s": 0.05})
    result = {}
    thread = threading.Thread(target=lambda: result.update(o=run(store, job_id)))
    thread.start()
    wait_for(lambda: episodes(store, job_id))
    # Another engine wrongly decided we were dead and requeued the job. Only this job's owner
    # is judged dead: anything else on the machine (other tests' containers) stays alive.
    wait_for(lambda: get_job(store, job_id).owner)
    ours = get_job(store, job_id).owner
    take_over(store, alive=lambda owner, hb: owner != ours)
    thread.join(60)
    assert result["o"].status == "lost"
    assert get_job(store, job_id).status == "queued"
