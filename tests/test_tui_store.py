"""The store modules behind the TUI: jobs, triage labels and queues, read views, synthetic data."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from devtools import synthetic
from store import jobs, queue, search, triage, views, vocab
from store.db import Store, open_reader

pytest_plugins = ["tests.fixtures_tui"]


@pytest.fixture
def store(db_path: Path) -> Store:
    s = Store(db_path)
    yield s
    s.close()


# --------------------------------------------------------------------------- jobs


def test_submit_then_read_a_job(store: Store) -> None:
    job_id = jobs.submit_job(
        store, "ladder", {"tasks": ["demo/a"], "models": ["m"]}, "depthtui ladder demo/a"
    )
    job = jobs.get_job(store, job_id)
    assert job is not None
    assert (job.kind, job.status, job.cli) == ("ladder", "queued", "depthtui ladder demo/a")
    assert job.params == {"models": ["m"], "tasks": ["demo/a"]}
    assert job.active and job.fraction is None
    reader = open_reader(store.path)
    assert [j.id for j in jobs.list_jobs(reader)] == [job_id]
    reader.close()


def test_submit_rejects_unknown_kinds_and_bad_params(store: Store) -> None:
    with pytest.raises(jobs.JobError, match="job kind 'bogus' is not one of check, validate"):
        jobs.submit_job(store, "bogus", {}, "x")
    with pytest.raises(jobs.JobError, match="must be a JSON object"):
        jobs.submit_job(store, "check", ["a"], "x")  # type: ignore[arg-type]
    with pytest.raises(jobs.JobError, match="not JSON-serialisable"):
        jobs.submit_job(store, "check", {"when": object()}, "x")


def test_cancel_pause_resume_follow_the_job_state(store: Store) -> None:
    queued = jobs.submit_job(store, "check", {"tasks": ["t"]}, "depthtui check t")
    paused = jobs.request_pause(store, queued)
    assert paused.status == "paused" and paused.pause_requested
    resumed = jobs.resume(store, queued)
    assert resumed.status == "queued" and not resumed.pause_requested
    cancelled = jobs.request_cancel(store, queued)
    assert cancelled.status == "cancelled" and cancelled.finished_at
    with pytest.raises(jobs.JobError, match=f"job {queued} is already cancelled"):
        jobs.request_cancel(store, queued)
    with pytest.raises(jobs.JobError, match=f"job {queued} is cancelled, not paused"):
        jobs.resume(store, queued)
    with pytest.raises(jobs.JobError, match="there is no job 999"):
        jobs.request_pause(store, 999)


def test_requests_on_a_running_job_only_set_flags(store: Store) -> None:
    job_id = jobs.submit_job(store, "free", {"tasks": ["t"]}, "depthtui free t")
    assert queue.claim_job(store, job_id, "host:1") is not None  # an engine takes it
    assert jobs.request_pause(store, job_id).status == "running"
    assert jobs.get_job(store, job_id).pause_requested
    withdrawn = jobs.resume(store, job_id)
    assert withdrawn.status == "running" and not withdrawn.pause_requested
    cancelling = jobs.request_cancel(store, job_id)
    assert cancelling.status == "running" and cancelling.cancel_requested


def test_list_jobs_changed_since_returns_only_rows_that_can_differ(store: Store) -> None:
    ids = [jobs.submit_job(store, "check", {"tasks": [str(i)]}, f"c {i}") for i in range(4)]
    for job_id in ids[:2]:  # an engine runs the first two to the end
        queue.claim_job(store, job_id, "host:1")
        queue.finish_job(store, job_id, "host:1", "done", "ok")
    changed = jobs.list_jobs(store, changed_since=ids[2], watch=(ids[1],))
    # new (id 4), still active (3), and the watched one that just finished (2)
    assert sorted(j.id for j in changed) == sorted([ids[3], ids[2], ids[1]])
    assert [j.id for j in jobs.list_jobs(store, active_only=True)] == [ids[3], ids[2]]


# --------------------------------------------------------------------------- triage


def test_queues_hold_each_kind_of_suspect(synthetic_db: Path, landmarks) -> None:
    conn = open_reader(synthetic_db)
    collateral = {i.episode_id: i for i in triage.queue_items(conn, "collateral")}
    assert landmarks.collateral in collateral
    reason = collateral[landmarks.collateral].reasons[0]
    assert reason.startswith(("deleted /home/user/", "content_changed /home/user/"))
    assert "at call" in reason
    suspects = {i.episode_id: i for i in triage.queue_items(conn, "false_positive")}
    assert (
        "moved_input fault was not cleared" in suspects[landmarks.fault_false_positive].reasons[0]
    )
    replay = suspects[landmarks.replay_disagrees].reasons
    assert replay == (f"replay of episode {landmarks.passing} failed; the original passed",)
    assert any("grader accepts mutated output" in r for i in suspects.values() for r in i.reasons)
    assert landmarks.fault_cleared not in suspects
    with pytest.raises(triage.TriageError, match="queue 'nope' is not one of"):
        triage.queue_items(conn, "nope")
    conn.close()


def test_labels_and_notes_are_stored_and_replaced(synthetic_db: Path, landmarks) -> None:
    with Store(synthetic_db) as store:
        triage.set_label(store, landmarks.collateral, "collateral", "needs_look", "check the diff")
        triage.set_label(store, landmarks.collateral, "collateral", "real")  # keeps the note
        triage.set_note(
            store, landmarks.fault_false_positive, "false_positive", "fault left in place"
        )
        labels = triage.list_labels(store)
        assert [(x.episode_id, x.queue, x.label, x.note) for x in labels] == [
            (landmarks.collateral, "collateral", "real", "check the diff"),
            (landmarks.fault_false_positive, "false_positive", "needs_look", "fault left in place"),
        ]
        assert labels[0].task_id and labels[0].agent
        with pytest.raises(triage.TriageError, match="label 'maybe' is not one of real"):
            triage.set_label(store, landmarks.collateral, "collateral", "maybe")
        with pytest.raises(triage.TriageError, match="there is no episode 999999"):
            triage.set_label(store, 999999, "collateral", "real")


# --------------------------------------------------------------------------- views


def test_search_takes_metacharacters_literally(synthetic_db: Path) -> None:
    # The TUI searches through store/search.py (its own tests cover the query syntax).
    from depthtui.screens.search import HIT_START, find

    conn = open_reader(synthetic_db)
    assert find(conn, 'AND OR NOT "unbalanced ( * :') == []
    hits = find(conn, "ERROR card")
    assert hits and all(h.kind in ("turn", "call") for h in hits)
    assert all(HIT_START in h.snippet and h.task_id and h.agent for h in hits)
    first = hits[0]
    mine = search.search(conn, "ERROR card", 1000, episode_id=first.episode_id)
    assert first.turn_idx in {h["turn_idx"] for h in mine}
    assert {h["episode_id"] for h in mine} == {first.episode_id}
    conn.close()


def test_turn_marks_and_detail_of_a_long_episode(synthetic_db: Path, landmarks) -> None:
    conn = open_reader(synthetic_db)
    marks = views.turn_marks(conn, landmarks.long)
    assert [m.idx for m in marks] == list(range(1, 151))
    assert all(m.calls == 1 for m in marks)
    assert views.turn_marks(conn, landmarks.long, after=148)[0].idx == 149
    detail = views.turn_detail(conn, landmarks.long, 150)
    assert detail is not None and detail.idx == 150 and len(detail.calls) == 1
    assert views.find_episodes(conn, min_turns=150, limit=1) == [landmarks.long]
    conn.close()


def test_collateral_turn_is_marked_and_its_diff_read(synthetic_db: Path, landmarks) -> None:
    conn = open_reader(synthetic_db)
    ep = views.episode(conn, landmarks.collateral)
    marked = [m for m in views.turn_marks(conn, landmarks.collateral) if m.collateral]
    assert len(marked) == 1
    assert marked[0].first_call <= ep.collateral_call <= marked[0].last_call
    detail = views.turn_detail(conn, landmarks.collateral, marked[0].idx)
    event = next(e for e in detail.events if e.collateral)
    assert not event.permitted and event.before is not None
    assert event.kind in ("deleted", "content_changed")
    conn.close()


def test_ladder_grid_follows_the_protocol(synthetic_db: Path, landmarks) -> None:
    conn = open_reader(synthetic_db)
    assert views.episode(conn, landmarks.cap_hit).outcome == "cap"
    grid = views.ladder(conn, landmarks.ladder_task)
    first = grid.models[0]
    assert grid.caps[-1] is None  # the uncapped column
    # the first model's uncapped runs: the ladder's two, and those `free` made (the protocol
    # reuses them, so the grid shows them whatever verb made them)
    uncapped = {
        r[0]: r[1]
        for r in conn.execute(
            "SELECT id, mode FROM episodes WHERE task_id = ? AND agent = ? AND cap IS NULL "
            "AND (mode IN ('ladder', 'audit') OR (mode = 'free' AND fault_family = 'clean'))",
            (landmarks.ladder_task, first),
        )
    }
    assert list(uncapped.values()).count("ladder") == 2
    assert [r.episode_id for r in grid.cells[(first, None)]] == sorted(uncapped)
    est = grid.estimates[first]
    assert est.n_turns is not None
    # caps at or above N without runs count as passed
    implied = [c for c in grid.caps if c is not None and grid.implied(first, c)]
    assert implied and min(implied) >= est.n_turns
    # each capped cell holds at most two attempts, and passes stop the climb
    for (_model, cap), runs in grid.cells.items():
        if cap is not None:
            assert 1 <= len(runs) <= 2
            assert all(r.outcome != "pass" for r in runs[:-1])
    conn.close()


def test_report_figures_the_screens_show(synthetic_db: Path) -> None:
    # The dashboard, tasks and reports screens take their figures from build_report.
    from depthtui.screens.figures import load_task_lines
    from depthtui.widgets.plot import depth_points
    from engine.analysis.report import build_report

    conn = open_reader(synthetic_db)
    report = build_report(conn)
    assert len(report["tasks"]) == 12
    assert {m["model"] for m in report["models"]} == {"qwen3-8b", "gpt-oss-20b", "glm-4.5-air"}
    points = depth_points(report)
    assert len(points) == report["headline"]["solved"]
    assert all(p.depth in (*vocab.CAPS, vocab.ABOVE_LARGEST_CAP) for p in points)
    lines = {t.id: t for t in load_task_lines(conn)}
    assert {t["id"]: t["D"] for t in report["tasks"]} == {i: t.d for i, t in lines.items()}
    assert {s["fault"] for s in report["safety"]} >= {
        "clean", "perm_denied", "moved_input", "blocking_fifo",
    }  # fmt: skip
    conn.close()


# --------------------------------------------------------------------------- synthetic data


def _dump(path: Path) -> list[tuple]:
    conn = sqlite3.connect(path)
    rows = []
    for table in ("tasks", "jobs", "episodes", "turns", "calls", "oracle_events", "estimates"):
        rows += [(table, *r) for r in conn.execute(f"SELECT * FROM {table} ORDER BY 1")]
    conn.close()
    return rows


def test_synthetic_stores_are_identical_row_for_row(tmp_path: Path) -> None:
    spec = synthetic.SyntheticSpec(tasks_per_dataset=2, hostile=False)
    for name in ("a.db", "b.db"):
        with Store(tmp_path / name) as store:
            synthetic.generate(store, spec)
    assert _dump(tmp_path / "a.db") == _dump(tmp_path / "b.db")


def test_bench_spec_reaches_exact_totals(tmp_path: Path) -> None:
    spec = synthetic.bench_spec(episodes=900, turns=12_000)
    spec = synthetic.SyntheticSpec(
        tasks_per_dataset=4, total_episodes=spec.total_episodes, total_turns=spec.total_turns
    )
    with Store(tmp_path / "b.db") as store:
        lm = synthetic.generate(store, spec)
        counts = store.query("SELECT (SELECT count(*) FROM episodes), (SELECT count(*) FROM turns)")
    assert (lm.episodes, lm.turns) == (900, 12_000)
    assert tuple(counts[0]) == (900, 12_000)


def test_hostile_transcript_is_in_the_synthetic_store(synthetic_db: Path, landmarks) -> None:
    conn = open_reader(synthetic_db)
    detail = views.turn_detail(conn, landmarks.hostile, 2)
    assert detail.text_length == synthetic.HOSTILE_LINE_BYTES
    assert "\n" not in detail.text and "\x1b[?1049h" in detail.text
    first = views.turn_detail(conn, landmarks.hostile, 1)
    full = views.call_output(conn, first.calls[0].id)
    assert len(full) == synthetic.HOSTILE_LINE_BYTES and b"\n" not in full and b"\x00" in full
    assert "\x1b]0;" in first.calls[0].output_head
    assert views.episode(conn, landmarks.replay_disagrees).spec["replay_of"] == landmarks.passing
    conn.close()
