"""The TUI on what a real model's replies look like (issue 27), through Textual's Pilot on a store
made by a real `depthtui free` run (real Docker, the scripted server on loopback): raw tool-call
markup the server's parser could not read (a `[format error]` message from the harness), replies
of tool calls only, and a command that is not found (exit 127)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.widgets import DataTable

from depthtui.app import DepthApp
from depthtui.screens.conversation import ConversationScreen
from depthtui.screens.episode import MARK_ERROR, MARK_FAILED, EpisodeScreen
from depthtui.widgets.messages import OpenEpisode
from devtools.scripted_server import ScriptedServer, calls, text
from tests.conftest import DEMO
from tests.fixtures_measure import cleanup, rows, run_cli

pytest_plugins = ["tests.fixtures_tui"]
pytestmark = pytest.mark.docker

SOLVE = (
    "mkdir -p /home/user/reports && awk '$3 == \"ERROR\"' /home/user/logs/app.log "
    "| wc -l > /home/user/reports/error_count.txt"
)
SCRIPT = [
    # What vLLM's hermes parser leaves in the text when the model's JSON is cut short.
    text('<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la /home/user/logs"'),
    calls("no-such-tool --x"),  # tool calls only, no words; exit 127
    calls(SOLVE),
    text("Done."),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("tui-real-model")
    db = work / "depthtui.db"
    owners: list[str] = []
    with ScriptedServer(SCRIPT) as server:
        models = work / "models.toml"
        models.write_text(
            f'[models.smol]\nbase_url = "{server.base_url}"\nmodel = "{server.model}"\n'
        )
        try:
            run = run_cli(
                ["free", str(DEMO / "error-count"), "-m", "smol", "--attempts", "1",
                 "--models", str(models)],
                db, owners=owners,
            )  # fmt: skip
        finally:
            cleanup(owners)
    assert run.returncode == 0, run.stderr[-3000:]
    return db


def test_turn_list_labels_tool_call_turns_and_marks_only_real_errors(tui, store: Path) -> None:
    [ep] = rows(store, "SELECT id FROM episodes WHERE mode = 'free'")
    codes = rows(
        store, "SELECT exit_code FROM calls WHERE episode_id = ? ORDER BY idx", (ep["id"],)
    )
    assert [c["exit_code"] for c in codes] == [127, 0]

    async def main() -> None:
        app = DepthApp(store, poll_seconds=0.1, start_engine=False)
        async with app.run_test(size=tui.size) as pilot:
            await tui.settle(pilot)
            app.post_message(OpenEpisode(ep["id"]))
            await tui.settle(pilot)
            screen = app.screen
            assert isinstance(screen, EpisodeScreen)
            table = screen.query_one("#turn-list", DataTable)
            labels = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
            # The malformed reply is the harness's error; exit 127 is the command's own failure.
            assert MARK_ERROR[0] in labels[0]
            assert MARK_FAILED[0] in labels[1] and MARK_ERROR[0] not in labels[1]
            assert MARK_ERROR[0] not in labels[2] and MARK_FAILED[0] not in labels[2]
            # Replies of tool calls only are labelled by their first command, not left blank.
            assert "$ no-such-tool --x" in labels[1]
            assert "$ mkdir -p /home/user/reports" in labels[2]

            await pilot.press("c")
            await tui.settle(pilot)
            talk = app.screen
            assert isinstance(talk, ConversationScreen)
            harness = [m for m in talk.messages if m.text.startswith("[format error]")]
            assert harness and all(m.what == "format error (from the harness)" for m in harness)
            assert not any(m.what.startswith("task message") for m in harness)
            # The folded line shows the prefix: not read as markup and dropped.
            shown = tui.text(app)
            assert "format error (from the harness)" in shown
            assert "[format error] Your reply contains tool-call markup" in shown

    asyncio.run(main())
