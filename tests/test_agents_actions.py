"""Text action formats (fenced ```bash blocks, <command> tags) and native tool-call parsing."""

from __future__ import annotations

import json

import pytest

from devtools.scripted_server import ScriptedServer, text, truncated
from engine.agents.actions import parse_text_actions, parse_tool_calls
from engine.agents.chat import ChatAgent
from engine.agents.loop import Conversation, EpisodeLimits, Hooks, run_segment
from tests.fixtures_agents import FakeSandbox, scripted_config


def _commands(reply):
    return [c.command for c in reply.commands]


def test_fenced_blocks_in_order_other_fences_ignored():
    reply = parse_text_actions(
        "First look:\n```bash\nls -la\n```\nthen\n```python\nprint(1)\n```\n"
        "```sh\ncat a.txt |\n  wc -l\n```\n",
        "fenced",
    )
    assert _commands(reply) == ["ls -la", "cat a.txt |\n  wc -l"]
    assert reply.format_error is None


def test_fenced_unclosed_block_is_a_format_error_and_earlier_blocks_still_count():
    reply = parse_text_actions("```bash\necho one\n```\n```bash\necho tw", "fenced")
    assert _commands(reply) == ["echo one"]
    assert "not closed" in reply.format_error


def test_tags_in_order_and_unclosed():
    reply = parse_text_actions("<command>ls</command> and <command>pwd\n</command>", "tags")
    assert _commands(reply) == ["ls", "pwd"]
    bad = parse_text_actions("<command>echo hi", "tags")
    assert bad.commands == () and "not closed" in bad.format_error


def test_commands_inside_thinking_are_not_commands():
    body = "<think>maybe ```bash\nrm -rf /\n``` no</think>\nDone, nothing to run."
    assert parse_text_actions(body, "fenced").commands == ()
    assert parse_text_actions("<think><command>rm x</command></think>", "tags").commands == ()


def test_no_block_means_finished():
    reply = parse_text_actions("The task is complete.", "fenced")
    assert reply.commands == () and reply.format_error is None


def test_tool_call_parsing_cases():
    good = {"id": "1", "function": {"name": "bash", "arguments": json.dumps({"command": "ls"})}}
    dict_args = {"id": "2", "function": {"name": "bash", "arguments": {"command": "pwd"}}}
    empty = {"id": "3", "function": {"name": "bash", "arguments": '{"command": "  "}'}}
    reply = parse_tool_calls([good, dict_args, empty], None)
    assert [c.command for c in reply.commands] == ["ls", "pwd", None]
    assert "empty" in reply.commands[2].error
    markup = parse_tool_calls([], "<function=bash><parameter=command>ls</parameter></function>")
    assert markup.commands == () and "markup" in markup.format_error
    assert parse_tool_calls([], "All done, no commands.").format_error is None


@pytest.mark.parametrize(
    "fmt, reply_text, marker",
    [
        ("fenced", "Let me check.\n```bash\nls\n```\n```bash\npwd\n```", "```bash"),
        ("tags", "Let me check. <command>ls</command><command>pwd</command>", "<command>"),
    ],
)
def test_text_format_episode(fmt, reply_text, marker):
    with ScriptedServer([text(reply_text), text("Finished.")]) as server:
        agent = ChatAgent(scripted_config(server, action_format=fmt))
        conv = Conversation.start(agent, "You are a terminal agent.")
        sandbox = FakeSandbox()
        turns = []
        end = run_segment(
            agent,
            sandbox,
            conv,
            "Task.",
            EpisodeLimits(command_budget=5),
            Hooks(on_turn=turns.append),
        )
    # One turn with both commands; the closing reply is recorded, not counted.
    assert end.reason == "no_tool_call" and end.turns == 1
    assert [c for c, _ in sandbox.ran] == ["ls", "pwd"]
    first_body = server.chat_requests[0].body
    assert "tools" not in first_body
    assert marker in first_body["messages"][0]["content"]  # the system prompt explains the format
    results = server.chat_requests[1].body["messages"][-1]
    assert results["role"] == "user"
    assert results["content"] == (
        "Result of command 1:\n$ ls\nran: ls\n[exit code 0]; 4 command(s) left\n\n"
        "Result of command 2:\n$ pwd\nran: pwd\n[exit code 0]; 3 command(s) left"
    )
    assert [c.observation for c in turns[0].calls] == [
        "ran: ls\n[exit code 0]; 4 command(s) left",
        "ran: pwd\n[exit code 0]; 3 command(s) left",
    ]


def test_text_format_cut_off_reply_is_not_finished():
    with ScriptedServer([truncated("```bash\nls -"), text("```bash\nls\n```"), text("ok")]) as s:
        agent = ChatAgent(scripted_config(s, action_format="fenced"))
        conv = Conversation.start(agent, "sys")
        turns = []
        end = run_segment(
            agent, FakeSandbox(), conv, "Task.", EpisodeLimits(), Hooks(on_turn=turns.append)
        )
    # The cut-off reply counts as a turn (a format error), the `ls` reply too; "ok" closes.
    assert end.turns == 2 and end.reason == "no_tool_call"
    assert "not closed" in turns[0].format_error
    assert s.chat_requests[1].body["messages"][-1]["content"].startswith("[format error]")
