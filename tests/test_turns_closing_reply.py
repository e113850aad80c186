"""The closing reply is recorded and shown but not counted (docs/work-and-turns.md): the store's
episode turns, the replay's turn numbers and its header, on a real SQLite file."""

from __future__ import annotations

from pathlib import Path

from depthtui.widgets.turn_view import turn_header
from engine.tasks.loader import load_task
from store import episodes as ep
from store import tasks as task_store
from store import views
from store.db import Store
from tests.conftest import ROOT

TASK = ROOT / "tests" / "fixtures" / "tasks" / "formats" / "harbor-steps"


def test_closing_replies_are_shown_unnumbered_and_not_counted(tmp_path: Path) -> None:
    # Two segments: a command turn and a closing reply, then two command turns (the cap of 3
    # is reached) -- replies 1..4, turns 1, -, 2, 3.
    with Store(tmp_path / "t.db") as store:
        task_store.upsert_task(store, load_task(TASK))
        eid = ep.create_episode(
            store, run_key="k", task_id="formats/harbor-steps", task_hash="h", mode="ladder",
            agent="m", cap=3,
        )  # fmt: skip
        replies = [(1, 0, True), (2, 0, False), (3, 1, True), (4, 1, True)]
        for idx, segment, counted in replies:
            calls = [{"idx": idx, "command": f"echo {idx}"}] if counted else []
            turn = {"idx": idx, "segment_idx": segment, "counted": int(counted), "text": "t"}
            ep.record_turn(store, eid, turn, calls)
        ep.finish_episode(store, eid, passed=True, segments_total=2)
        info = views.episode(store.conn, eid)
        details = [views.turn_detail(store.conn, eid, i) for i, _, _ in replies]
    assert info.turns == 3
    assert [d.number for d in details] == [1, None, 2, 3]
    headers = [turn_header(info, d).plain for d in details]
    assert headers[0].startswith("Turn 1/3") and "turns left 2 of cap 3" in headers[0]
    assert headers[1].startswith("Closing reply (not a turn)") and "turns left" not in headers[1]
    assert headers[3].startswith("Turn 3/3") and "turns left 0 of cap 3" in headers[3]
