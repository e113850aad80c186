"""The loop's bounds on what one reply may cost, and what the harness owns: a trickling endpoint
meets a deadline on the whole request, a reply's calls beyond CALLS_PER_REPLY are refused, a
reply the harness cut short is not the model's format error, and bash's line numbers of the
framing never reach the model (docs/work-and-turns.md). Real HTTP on loopback (the scripted
server), a fake sandbox."""

from __future__ import annotations

import json
import time

from devtools.scripted_server import ScriptedReply, ScriptedServer, calls, text, trickle
from engine.agents.actions import BASH_TOOL, CALLS_PER_REPLY
from engine.agents.chat import RetryPolicy
from engine.agents.loop import EpisodeLimits
from tests.test_agents_loop import Run

ONE_TRY = RetryPolicy(max_attempts=2, base_delay_s=0.01, max_delay_s=0.05)


def test_a_trickling_endpoint_ends_as_a_model_endpoint_error_within_the_request_timeout():
    # 200 at once, then a byte every 0.3 s: each wait between bytes is far below the 1 s
    # timeout, so only a deadline on the whole request ends it.
    script = [trickle(0.3, calls("ls")), trickle(0.3, calls("ls"))]
    with ScriptedServer(script) as server:
        run = Run(server, retry=ONE_TRY, request_timeout_s=1.0)
        started = time.monotonic()
        end = run.segment()
        took = time.monotonic() - started
    assert end.reason == "error" and end.error_kind == "model_endpoint", end
    assert "no complete reply within 1 s" in (end.error_detail or "")
    # Two tries of about a second each (plus one byte's wait), not the body's ~60 s.
    assert took < 6, took
    assert run.sandbox.ran == []


def test_calls_beyond_the_per_reply_bound_are_refused_stored_short_and_told_in_one_line():
    long_tail = "echo " + "x" * 5000
    commands = [f"echo {i}" for i in range(CALLS_PER_REPLY)] + [long_tail] * 8
    with ScriptedServer([calls(*commands), text("done")]) as server:
        run = Run(server)
        end = run.segment()
        sent = server.chat_requests[1].body["messages"]
    assert end.reason == "no_tool_call" and end.calls == CALLS_PER_REPLY + 8
    assert [c for c, _ in run.sandbox.ran] == commands[:CALLS_PER_REPLY]
    first = run.turns[0]
    refused = [c for c in first.calls if c.not_run]
    assert len(refused) == 8 and {c.not_run_reason for c in refused} == {"per_reply"}
    assert all(len(c.command) == 200 and long_tail.startswith(c.command) for c in refused)
    # Every call id is answered (the protocol wants it), and one line says what happened.
    tool_msgs = [m for m in sent if m["role"] == "tool"]
    assert len(tool_msgs) == CALLS_PER_REPLY + 8
    notes = [m["content"] for m in sent if m["role"] == "user"][1:]
    assert notes == [
        f"[8 command(s) of this reply were not run: at most {CALLS_PER_REPLY} commands of one "
        "reply are run]"
    ]
    # The model is told the bound before it meets it.
    assert f"At most {CALLS_PER_REPLY} calls of one reply are run" in json.dumps(BASH_TOOL)
    assert str(CALLS_PER_REPLY) in json.dumps(server.chat_requests[0].body["tools"])


def test_text_formats_state_the_bound_and_list_only_the_calls_run():
    blocks = "".join(f"<command>echo {i}</command>\n" for i in range(CALLS_PER_REPLY + 3))
    with ScriptedServer([text(blocks), text("done")]) as server:
        run = Run(server, action_format="tags")
        run.segment()
        system = server.chat_requests[0].body["messages"][0]["content"]
        results = server.chat_requests[1].body["messages"][-1]["content"]
    assert f"at most {CALLS_PER_REPLY} are run" in system
    assert len(run.sandbox.ran) == CALLS_PER_REPLY
    assert results.count("Result of command") == CALLS_PER_REPLY
    assert "[3 command(s) of this reply were not run" in results


# A reply the harness cut: max_tokens was lowered to the room left in the context (50 tokens)
# and the model used it, leaving half a Hermes tool call in its text.
PARTIAL_MARKUP = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls -'


def test_a_reply_the_harness_cut_short_is_not_a_format_error_nor_a_turn():
    script = [
        calls("ls", usage={"prompt_tokens": 900, "completion_tokens": 50}),
        ScriptedReply(
            content=PARTIAL_MARKUP,
            finish_reason="length",
            usage={"prompt_tokens": 950, "completion_tokens": 50},
        ),
    ]
    with ScriptedServer(script) as server:
        run = Run(server, EpisodeLimits(max_total_tokens=1000))
        end = run.segment()
        assert server.chat_requests[1].body["max_tokens"] == 50
    cut = run.turns[1]
    assert cut.cut_by_harness and cut.row()["cut_by_harness"] == 1
    assert cut.format_error is None and not cut.counted
    # The full context ends the run as `context_length`, and only the model's own turn counts.
    assert end.reason == "context_length" and end.turns == 1
    assert "50 token(s) left" in end.detail
    # What the model would be shown next says it was cut off, never that it wrote bad markup.
    told = run.conv.messages[-1]["content"]
    assert told.startswith("[cut off]") and "no room left" in told
    assert not any((m.get("content") or "").startswith("[format error]") for m in run.conv.messages)


def test_a_reply_cut_at_the_models_own_max_tokens_is_still_a_format_error():
    # The entry's own max_tokens (20) binds, not the room left (1000): the model's cut.
    from engine.agents.registry import Sampling

    script = [ScriptedReply(content=PARTIAL_MARKUP, finish_reason="length"), text("done")]
    with ScriptedServer(script) as server:
        run = Run(server, EpisodeLimits(max_total_tokens=100_000), sampling=Sampling(max_tokens=20))
        run.segment()
    first = run.turns[0]
    assert not first.cut_by_harness and first.counted and first.format_error


def test_the_framings_line_numbers_never_reach_the_model():
    with ScriptedServer([calls("start.sh", "bash -c 'nope'"), text("done")]) as server:
        run = Run(server)
        run.sandbox.outputs["start.sh"] = ("bash: line 78: start.sh: command not found\n", 127)
        run.sandbox.outputs["bash -c 'nope'"] = (
            "bash: eval: line 3: syntax error near unexpected token `)'\n",
            2,
        )
        run.segment()
        sent = server.chat_requests[1].body["messages"]
    shown = [m["content"] for m in sent if m["role"] == "tool"]
    assert shown == [
        "bash: start.sh: command not found\n[exit code 127]",
        "bash: syntax error near unexpected token `)'\n[exit code 2]",
    ]
    # What is stored as shown is what was sent.
    assert [c.observation for c in run.turns[0].calls] == shown


def test_no_price_is_said_only_when_the_runs_that_know_say_so():
    from engine.analysis.run_rates import spend

    def run(agent: str, priced: int | None, cost: float = 0.0) -> dict:
        tokens = {"prompt_tokens": 10, "completion_tokens": 5, "cached_tokens": 2}
        return {"agent": agent, "cost_usd": cost, "priced": priced, **tokens}

    rows = spend(
        [
            run("local", 0),
            run("local", None),  # ended before any reply: says nothing about a price
            run("priced", 1, 0.5),
            run("priced", 0),
            run("old", None, 0.25),  # from before the store recorded it: shown as stored
        ]
    )
    by = {r.model: r for r in rows}
    assert by["local"].cost_usd is None and by["local"].runs == 2
    assert (by["local"].prompt_tokens, by["local"].completion_tokens) == (20, 10)
    assert by["local"].cached_tokens == 4
    assert by["priced"].cost_usd == 0.5 and by["old"].cost_usd == 0.25
