"""Triage with counts and filters, a fault column, export from the TUI with reasons and paths,
and empty queues that say what would land there."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from textual.widgets import DataTable, Input, Static, Tab

from depthtui.app import DepthApp
from depthtui.screens.triage import QUEUE_HOLDS
from store import triage, views
from store.db import Store, open_reader

pytest_plugins = ["tests.fixtures_tui"]


def test_counts_filters_fault_column_and_export(tui, synthetic_db: Path, landmarks) -> None:
    conn = open_reader(synthetic_db)
    queues = {q: triage.queue_items(conn, q) for q in triage.QUEUES}
    site = views.collateral_site(conn, landmarks.collateral)
    conn.close()
    clean = [i.episode_id for i in queues["collateral"] if i.fault_family == "clean"]
    assert clean and len(clean) < len(queues["collateral"])

    async def main() -> None:
        app = DepthApp(synthetic_db, poll_seconds=0.1, start_engine=False)
        async with app.run_test(size=tui.size) as pilot:
            await tui.settle(pilot)
            await pilot.press("3")
            await tui.settle(pilot)
            screen = app.screen
            for q, items in queues.items():
                label = str(screen.query_one(f"#{q}", Tab).label)
                assert f"({len(items)}, {len(items)} unlabelled)" in label
            table = screen.query_one("#triage", DataTable)
            assert [str(c.label) for c in table.ordered_columns][4] == "fault"
            # filter by fault family: only those rows, and the count says of how many
            await pilot.press("f")
            assert isinstance(app.focused, Input)
            await pilot.press(*"fault:clean")
            await pilot.pause()
            assert [int(str(k.value)) for k in table.rows] == clean
            counts = str(screen.query_one("#triage-counts", Static).render())
            assert f"{len(clean)} of {len(queues['collateral'])}" in counts
            screen.query_one("#triage-filter", Input).value = "model:no-such-model"
            await pilot.pause()
            assert table.row_count == 0
            assert "nothing matches" in str(screen.query_one("#triage-detail").render())
            screen.query_one("#triage-filter", Input).value = ""
            await pilot.press("escape")  # out of the filter: keys label again
            table.move_cursor(
                row=[int(str(k.value)) for k in table.rows].index(landmarks.collateral)
            )
            await pilot.press("r")
            await pilot.pause()
            await pilot.press("x")
            await pilot.pause()

    asyncio.run(main())
    exports = sorted(synthetic_db.parent.glob("triage-labels-*.json"))
    assert len(exports) == 1
    rows = json.loads(exports[0].read_text())
    assert [(r["episode_id"], r["label"]) for r in rows] == [(landmarks.collateral, "real")]
    assert rows[0]["path"] == site.path and site.path in rows[0]["reasons"]


def test_an_empty_queue_says_what_lands_there(tui, tmp_path: Path) -> None:
    db = tmp_path / "empty.db"
    Store(db).close()

    async def main() -> None:
        app = DepthApp(db, start_engine=False)
        async with app.run_test(size=tui.size) as pilot:
            await tui.settle(pilot)
            await pilot.press("3")
            await tui.settle(pilot)
            said = " ".join(tui.text(app).split())
            assert (
                "This queue is empty. It holds " + " ".join(QUEUE_HOLDS["collateral"].split())[:60]
                in said
            )

    asyncio.run(main())
