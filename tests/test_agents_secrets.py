"""A planted API key never reaches a TurnRecord, the store or a log line."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from devtools.scripted_server import ScriptedServer, bad_json, calls, error, text
from engine.agents.chat import ChatAgent, RetryPolicy
from engine.agents.loop import Conversation, EpisodeLimits, Hooks, run_segment
from store import episodes
from store.db import Store
from tests.fixtures_agents import FakeSandbox, scripted_config

PLANTED = "sk-planted-7f3a9c1e5b2d4f60a8e7"


def test_planted_key_is_used_but_never_recorded(db_path: Path, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("PLANTED_KEY", PLANTED)
    script = [
        calls("ls", "pwd"),
        error(429, retry_after=0),
        bad_json(),
        # An endpoint that echoes the key back (in the text and the reasoning) is scrubbed too.
        text(f"echo: Bearer {PLANTED}", reasoning=f"the key is {PLANTED}"),
    ]
    store = Store(db_path)
    eid = episodes.create_episode(
        store, run_key="k", task_id="t", task_hash="h", mode="free", agent="scripted"
    )
    turns = []

    def on_turn(turn):
        turns.append(turn)
        episodes.record_turn(store, eid, turn.row(), turn.call_rows(), turn.outputs())

    with ScriptedServer(script, api_key=PLANTED) as server:
        agent = ChatAgent(
            scripted_config(server, api_key_env="PLANTED_KEY"),
            RetryPolicy(base_delay_s=0.01),
        )
        conv = Conversation.start(agent, "system")
        end = run_segment(
            agent, FakeSandbox(), conv, "Task.", EpisodeLimits(), Hooks(on_turn=on_turn)
        )
    episodes.finish_episode(store, eid, end_reason=end.reason)
    assert end.reason == "no_tool_call" and len(turns) == 3
    # The key was really used: the server checked it on every request.
    assert all(r.headers["authorization"] == f"Bearer {PLANTED}" for r in server.chat_requests)

    assert PLANTED not in json.dumps([t.row() for t in turns], default=str)
    assert PLANTED not in repr(turns) and PLANTED not in json.dumps(conv.messages)
    assert "[redacted]" in turns[-1].text
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.conn.close()
    for path in db_path.parent.iterdir():
        if path.name.startswith(db_path.name):
            assert PLANTED.encode() not in path.read_bytes(), path
    assert PLANTED not in caplog.text


def test_key_in_an_error_message_is_scrubbed(monkeypatch):
    monkeypatch.setenv("PLANTED_KEY", PLANTED)
    with ScriptedServer([error(403, f"key {PLANTED} is disabled")], api_key=PLANTED) as server:
        agent = ChatAgent(scripted_config(server, api_key_env="PLANTED_KEY"))
        end = run_segment(agent, FakeSandbox(), Conversation(), "Task.", EpisodeLimits())
    assert end.error_kind == "model_endpoint" and "HTTP 403" in end.error_detail
    assert PLANTED not in end.error_detail and "$PLANTED_KEY" in end.error_detail
