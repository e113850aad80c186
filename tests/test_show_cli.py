"""`depthtui show`: one episode read from the shell, on a store made by a real run (`depthtui
free` on a demo task, real Docker, the scripted OpenAI-compatible server on loopback), through
the console script as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devtools.scripted_server import ScriptedServer, bad_json, calls, text
from tests.conftest import DEMO
from tests.fixtures_measure import cleanup, rows, run_cli

pytestmark = pytest.mark.docker

LOG = "/home/user/logs/app.log"
SOLVE = (
    "mkdir -p /home/user/reports && awk '$3 == \"ERROR\"' /home/user/logs/app.log "
    "| wc -l > /home/user/reports/error_count.txt"
)
# Words a model may well write that look like Rich markup: they must print as they are.
MARKUP_WORDS = "Looking at [bold]the logs[/bold] and [red]errors[/]."
# Output that would set the reader's terminal title: shown inert.
TITLE = r"printf '\033]0;pwned\007 done\n'"
SCRIPT = [
    bad_json('{"command": "ls -la', content="Let me look."),
    calls(f"ls -la {LOG}", "no-such-tool --x", TITLE, content=MARKUP_WORDS),
    calls(SOLVE, content="Counting now."),
    text("The count is written. Done."),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("show")
    db = work / "depthtui.db"
    owners: list[str] = []
    with ScriptedServer(SCRIPT) as server:
        models = work / "models.toml"
        models.write_text(
            f'[models.scripted]\nbase_url = "{server.base_url}"\nmodel = "{server.model}"\n'
        )
        try:
            run = run_cli(
                ["free", str(DEMO / "error-count"), "-m", "scripted", "--attempts", "1",
                 "--models", str(models)],
                db, owners=owners,
            )  # fmt: skip
        finally:
            cleanup(owners)
    assert run.returncode == 0, run.stderr[-3000:]
    return db


def _episode(db: Path) -> dict:
    [ep] = rows(db, "SELECT * FROM episodes WHERE mode = 'free'")
    return ep


def test_show_prints_the_transcript_and_the_verdict(store: Path) -> None:
    ep = _episode(store)
    result = run_cli(["show", str(ep["id"])], store)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # What the agent was told, each reply's words (markup-looking text verbatim) and commands.
    assert "task message:" in out and "error_count.txt" in out
    assert MARKUP_WORDS in out
    assert f"$ ls -la {LOG}" in out and "$ no-such-tool --x" in out and f"$ {SOLVE}" in out
    # The outputs as the commands gave them, with their exit codes.
    assert "app.log" in out.split(f"$ ls -la {LOG}", 1)[1]
    assert "command not found" in out and "exit 127" in out and "exit 0" in out
    assert "\x1b" not in out and "\x07" not in out and "␛]0;pwned␇ done" in out
    # The malformed call is shown as the harness judged it.
    assert "[format error]" in out and "not run: " in out
    # The oracle saw the report written; the tests and the verdict close the transcript.
    assert "/home/user/reports/error_count.txt (permitted)" in out
    sql = "SELECT nodeid, outcome FROM test_results WHERE episode_id = ?"
    tests = rows(store, sql, (ep["id"],))
    assert tests and all(f"{t['outcome']:<8} seg 1 {t['nodeid']}" in out for t in tests)
    last = out.strip().splitlines()[-1]
    assert last.startswith(f"verdict: {ep['outcome']}") and f"ended by {ep['end_reason']}" in last
    assert ep["outcome"] == "pass"
    # The closing reply is shown but is no turn; every counted turn is numbered.
    assert "closing reply (not counted)" in out
    assert f"turn {ep['turns']} " in out and f"turn {ep['turns'] + 1} " not in out


def test_show_json_holds_every_reply_call_event_and_test(store: Path) -> None:
    ep = _episode(store)
    result = run_cli(["show", str(ep["id"]), "--json"], store)
    assert result.returncode == 0, result.stderr
    doc = result.json()
    assert doc["episode"]["id"] == ep["id"] and doc["episode"]["outcome"] == ep["outcome"]
    turns = doc["turns"]
    stored = rows(store, "SELECT idx, format_error FROM turns WHERE episode_id = ?", (ep["id"],))
    assert [t["idx"] for t in turns] == [r["idx"] for r in stored]
    # The malformed call is kept, never run, with what the model was told about it.
    assert turns[0]["format_error"] and [c["exit_code"] for c in turns[0]["calls"]] == [None]
    assert "not valid JSON" in turns[0]["calls"][0]["observation"]
    commands = [c["command"] for t in turns[1:] for c in t["calls"]]
    assert commands == [f"ls -la {LOG}", "no-such-tool --x", TITLE, SOLVE]
    codes = [c["exit_code"] for t in turns[1:] for c in t["calls"]]
    assert codes == [0, 127, 0, 0]
    events = [e for t in turns for c in t["calls"] for e in c["events"]]
    assert any(e["path"] == "/home/user/reports/error_count.txt" for e in events)
    sql = "SELECT count(*) AS n FROM test_results WHERE episode_id = ?"
    n_tests = rows(store, sql, (ep["id"],))
    assert len(doc["tests"]) == n_tests[0]["n"] > 0
    assert [t["number"] for t in turns] == [1, 2, 3, None]
    json.dumps(doc)  # plain data


def test_show_by_task_and_model_finds_the_newest(store: Path) -> None:
    ep = _episode(store)
    for args in (
        ["show", "--task", "demo/error-count", "--model", "scripted", "--json"],
        ["show", "--task", "error-count", "--json"],
    ):
        result = run_cli(args, store)
        assert result.returncode == 0, result.stderr
        assert result.json()["episode"]["id"] == ep["id"]


def test_show_names_what_is_wrong(store: Path) -> None:
    cases = [
        (["show", "999"], "no episode 999 in"),
        (["show", "--task", "error-count", "--model", "nobody"], "by model 'nobody'"),
        (["show"], "give an EPISODE id, or --task T"),
        (["show", "1", "--task", "error-count"], "give an EPISODE id, or --task T"),
        (["show", "--model", "scripted"], "give an EPISODE id"),
    ]
    for args, message in cases:
        result = run_cli(args, store)
        assert result.returncode == 1 and message in " ".join(result.stderr.split()), (
            args,
            result.stderr,
        )
    missing = run_cli(["show", "1"], store.parent / "none.db")
    assert missing.returncode == 1 and "no store here yet" in missing.stderr
