"""The agent loop against real HTTP on loopback (the scripted server) and a fake sandbox."""

from __future__ import annotations

import json
import random

import pytest

from devtools.scripted_server import (
    ScriptedReply,
    ScriptedServer,
    bad_json,
    calls,
    error,
    slow,
    text,
    truncated,
)
from engine.agents.chat import ChatAgent, RetryPolicy
from engine.agents.loop import Conversation, EpisodeLimits, Hooks, run_segment
from engine.agents.prompts import compose_user_message, load_prompt
from engine.agents.records import expand_requests
from engine.agents.registry import Price
from tests.fixtures_agents import FakeSandbox, scripted_config

FAST_RETRY = RetryPolicy(max_attempts=4, base_delay_s=0.01, max_delay_s=0.05)


class Run:
    """One episode's worth of loop plumbing, with everything the hooks saw."""

    def __init__(self, server, limits=EpisodeLimits(), retry=FAST_RETRY, **cfg):
        self.sleeps: list[float] = []
        self.agent = ChatAgent(
            scripted_config(server, **cfg), retry, sleep=self.sleeps.append, rng=random.Random(7)
        )
        self.sandbox = FakeSandbox()
        self.limits = limits
        self.turns = []
        self.after = []
        self.conv = Conversation.start(self.agent, load_prompt("general")[1])

    def segment(self, message="Do the task.", idx=0, **kw):
        hooks = Hooks(
            after_call=lambda i, r: self.after.append((i, r.command)),
            on_turn=self.turns.append,
            **kw,
        )
        return run_segment(
            self.agent, self.sandbox, self.conv, message, self.limits, hooks, segment_idx=idx
        )


def test_several_calls_in_one_turn_run_in_order_and_return_as_tool_messages():
    with ScriptedServer([calls("ls", "pwd", "whoami"), text("All done.")]) as server:
        run = Run(server)
        end = run.segment()
    assert end.reason == "no_tool_call" and end.finished
    # One turn: the reply with the commands. The closing reply is recorded, not counted.
    assert (end.turns, end.calls) == (1, 3)
    assert [c for c, _ in run.sandbox.ran] == ["ls", "pwd", "whoami"]
    assert run.after == [(1, "ls"), (2, "pwd"), (3, "whoami")]
    first, last = run.turns
    assert [c.idx for c in first.calls] == [1, 2, 3] and last.calls == ()
    assert last.text == "All done." and last.idx == 2
    assert first.counted and not last.counted and last.row()["counted"] == 0
    # The second request carries one tool message per call, in order, answering each call id.
    sent = server.chat_requests[1].body["messages"]
    tool_msgs = [m for m in sent if m["role"] == "tool"]
    assert [m["content"] for m in tool_msgs] == [
        "ran: ls\n[exit code 0]",
        "ran: pwd\n[exit code 0]",
        "ran: whoami\n[exit code 0]",
    ]
    assistant = next(m for m in sent if m["role"] == "assistant")
    assert [t["id"] for t in assistant["tool_calls"]] == [m["tool_call_id"] for m in tool_msgs]
    assert [c.tool_call_id for c in first.calls] == [m["tool_call_id"] for m in tool_msgs]


def test_turn_cap_is_stated_and_ends_the_episode():
    script = [calls("ls"), calls("pwd"), calls("whoami"), text("done")]
    with ScriptedServer(script) as server:
        run = Run(server, EpisodeLimits(turn_cap=2))
        message = compose_user_message("Fix the config.", turn_cap=2)
        end = run.segment(message)
    assert end.reason == "turn_cap" and not end.finished
    assert end.turns == 2 and len(server.chat_requests) == 2
    first_user = server.chat_requests[0].body["messages"][1]
    assert first_user["role"] == "user"
    assert first_user["content"].startswith("Fix the config.")
    assert "at most 2 turn(s)" in first_user["content"]


def test_safety_ceiling_applies_when_no_cap_is_stated():
    with ScriptedServer([calls("ls")] * 5) as server:
        run = Run(server, EpisodeLimits(safety_turns=3))
        end = run.segment()
    assert end.reason == "safety_ceiling" and end.turns == 3


def test_command_budget_counts_down_refuses_and_ends():
    script = [calls("a", "b"), calls("c", "d"), calls("e"), text("never reached")]
    with ScriptedServer(script) as server:
        run = Run(server, EpisodeLimits(command_budget=3))
        end = run.segment(compose_user_message("Task.", command_budget=3))
    assert end.reason == "budget"
    observations = [c.observation for t in run.turns for c in t.calls]
    assert observations == [
        "ran: a\n[exit code 0]; 2 command(s) left",
        "ran: b\n[exit code 0]; 1 command(s) left",
        "ran: c\n[exit code 0]; 0 command(s) left",
        "[not run: the 3-command budget is used up]",
        "[not run: the 3-command budget is used up]",
    ]
    assert [c.remaining_budget for t in run.turns for c in t.calls] == [2, 1, 0, 0, 0]
    assert [c.not_run for t in run.turns for c in t.calls] == [False] * 3 + [True] * 2
    assert [c for c, _ in run.sandbox.ran] == ["a", "b", "c"]
    budget_text = server.chat_requests[0].body["messages"][1]["content"]
    assert "budget of 3 command(s)" in budget_text
    assert "Every tool call counts" in budget_text
    assert "not run" in budget_text and "graded as it stands" in budget_text


def test_tool_call_limit_refuses_the_rest_and_ends():
    with ScriptedServer([calls("a", "b", "c"), text("x")]) as server:
        run = Run(server, EpisodeLimits(max_tool_calls=2))
        end = run.segment()
    assert end.reason == "tool_call_limit"
    assert run.turns[0].calls[2].observation == "[not run: the 2-call limit is reached]"
    assert len(server.chat_requests) == 1


@pytest.mark.parametrize(
    "bad, expect",
    [
        (bad_json(), "not valid JSON"),
        (ScriptedReply(tool_calls=(("bash", '{"cmd": "ls"}'),)), 'no string "command"'),
        (ScriptedReply(tool_calls=(("python", '{"code": "1"}'),)), "Unknown tool 'python'"),
        (
            text('<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}\n</tool_call>'),
            "tool-call markup",
        ),
        (truncated("Let me look at the files first and then"), "cut off"),
    ],
    ids=["bad-json", "missing-command", "unknown-tool", "raw-markup", "truncated"],
)
def test_format_errors_count_as_turns_and_never_finish(bad, expect):
    with ScriptedServer([bad, calls("ls"), text("done")]) as server:
        run = Run(server)
        end = run.segment()
    # The malformed reply and the `ls` reply are turns; the closing "done" is not.
    assert end.reason == "no_tool_call" and end.turns == 2
    first = run.turns[0]
    assert [t.counted for t in run.turns] == [True, True, False]
    assert first.format_error and expect in first.format_error
    assert [c for c, _ in run.sandbox.ran] == ["ls"]
    # The model is told what went wrong in the next request, which the server accepted.
    followup = server.chat_requests[1].body["messages"]
    assert any(
        expect in (m.get("content") or "") for m in followup if m["role"] in ("tool", "user")
    )
    for m in followup:
        for call in m.get("tool_calls") or []:
            json.loads(call["function"]["arguments"])  # history stays renderable


def test_cut_off_reply_with_calls_runs_them_and_records_the_finish_reason():
    with ScriptedServer([calls("ls", finish_reason="length"), text("ok")]) as server:
        run = Run(server)
        run.segment()
    assert run.turns[0].finish_reason == "length"
    assert run.turns[0].format_error is None
    assert [c for c, _ in run.sandbox.ran] == ["ls"]


def test_provider_errors_are_retried_with_growing_backoff_then_succeed():
    script = [error(429, retry_after=0), error(500), error(503), calls("ls"), text("done")]
    with ScriptedServer(script) as server:
        run = Run(server, retry=RetryPolicy(max_attempts=5, base_delay_s=1.0, jitter=0.25))
        end = run.segment()
    assert end.reason == "no_tool_call" and end.turns == 1  # `ls`; the closing reply is no turn
    assert len(server.chat_requests) == 5
    assert len(run.sleeps) == 3
    for attempt, wait in enumerate(run.sleeps, 1):
        assert 0.75 * 2 ** (attempt - 1) <= wait <= 1.25 * 2 ** (attempt - 1)


def test_retry_after_header_is_honoured():
    policy = RetryPolicy(base_delay_s=0.01, max_delay_s=10, jitter=0)
    with ScriptedServer([error(429, retry_after=4), text("done")]) as server:
        run = Run(server, retry=policy)
        run.segment()
    assert run.sleeps == [4.0]


def test_infrastructure_error_after_retries_is_not_a_model_failure():
    with ScriptedServer([calls("ls")] + [error(502)] * 4) as server:
        run = Run(server)
        end = run.segment()
    assert end.reason == "error" and end.error_kind == "model_endpoint"
    assert "HTTP 502" in end.error_detail and "4 attempt" in end.error_detail
    assert not end.finished
    assert len(run.turns) == 1  # the failed request produced no turn


def test_refused_connection_is_retried_then_an_infrastructure_error():
    with ScriptedServer([]) as server:
        run = Run(server)
    # The server is gone: its port now refuses connections.
    end = run.segment()
    assert end.reason == "error" and end.error_kind == "model_endpoint"
    assert "connection refused" in end.error_detail
    assert len(run.sleeps) == FAST_RETRY.max_attempts - 1


def test_slow_reply_times_out_and_is_retried():
    with ScriptedServer([slow(3.0, text("late")), text("on time")]) as server:
        run = Run(server, request_timeout_s=1.0)
        end = run.segment()
    assert end.reason == "no_tool_call"
    assert run.turns[0].text == "on time"
    assert len(server.chat_requests) == 2


def test_bad_auth_is_not_retried(monkeypatch):
    monkeypatch.setenv("SCRIPTED_KEY", "wrong-key")
    with ScriptedServer([text("x")], api_key="right-key") as server:
        run = Run(server, api_key_env="SCRIPTED_KEY")
        end = run.segment()
    assert end.error_kind == "model_endpoint" and "HTTP 401" in end.error_detail
    assert run.sleeps == []


def test_context_length_error_ends_the_episode_as_the_models_own():
    msg = "This model's maximum context length is 4096 tokens. However, you requested 5000."
    with ScriptedServer([calls("ls"), error(400, msg)]) as server:
        run = Run(server)
        end = run.segment()
    assert end.reason == "context_length" and end.error_kind is None


def test_cost_from_usage_cost_and_from_the_price_table():
    usage = {"prompt_tokens": 1000, "completion_tokens": 200}
    script = [calls("ls", usage=usage, cost=0.0123), text("done", usage=usage)]
    price = Price(prompt_usd_per_mtok=2.0, completion_usd_per_mtok=10.0)
    with ScriptedServer(script) as server:
        run = Run(server, price=price)
        run.segment()
    reported, priced = run.turns
    assert reported.cost_usd == pytest.approx(0.0123)
    assert priced.cost_usd == pytest.approx((1000 * 2.0 + 200 * 10.0) / 1e6)
    assert run.conv.cost_usd == pytest.approx(0.0123 + 0.004)
    assert (priced.prompt_tokens, priced.completion_tokens) == (1000, 200)


def test_cached_tokens_are_priced_at_their_own_rate():
    usage = {
        "prompt_tokens": 1000,
        "completion_tokens": 0,
        "prompt_tokens_details": {"cached_tokens": 600},
    }
    price = Price(prompt_usd_per_mtok=1.0, completion_usd_per_mtok=1.0, cached_usd_per_mtok=0.1)
    with ScriptedServer([text("done", usage=usage)]) as server:
        run = Run(server, price=price)
        run.segment()
    assert run.turns[0].cached_tokens == 600
    assert run.turns[0].cost_usd == pytest.approx((400 * 1.0 + 600 * 0.1) / 1e6)


def test_cost_limit_ends_the_episode():
    with ScriptedServer([calls("ls", cost=0.6), calls("ls", cost=0.6), calls("ls")]) as server:
        run = Run(server, EpisodeLimits(max_cost_usd=1.0))
        end = run.segment()
    assert end.reason == "cost" and end.turns == 2


def test_completion_token_limit_lowers_max_tokens_then_ends():
    usage = {"prompt_tokens": 10, "completion_tokens": 100}
    script = [calls("ls", usage=usage)] * 4
    with ScriptedServer(script) as server:
        run = Run(server, EpisodeLimits(max_completion_tokens=250))
        end = run.segment()
    assert end.reason == "tokens" and end.turns == 3
    assert [r.body["max_tokens"] for r in server.chat_requests] == [250, 150, 50]


def test_total_token_limit_bounds_the_conversation_size():
    usage = {"prompt_tokens": 900, "completion_tokens": 100}
    with ScriptedServer([calls("ls", usage=usage), calls("ls")]) as server:
        run = Run(server, EpisodeLimits(max_total_tokens=1000))
        end = run.segment()
    # A full context is `context_length`, whoever noticed it (docs/work-and-turns.md).
    assert end.reason == "context_length" and end.turns == 1
    assert end.detail == "the conversation holds 1000 tokens of the 1000 allowed"


def test_segment_time_limit_refuses_calls_and_ends():
    ticks = iter(range(0, 10_000, 10))  # every look at the clock is 10 s later

    with ScriptedServer([calls("a", "b"), calls("c")]) as server:
        run = Run(server, EpisodeLimits(segment_time_limit_s=25))
        end = run_segment(
            run.agent, run.sandbox, run.conv, "Task.", run.limits,
            Hooks(on_turn=run.turns.append), clock=lambda: next(ticks),
        )  # fmt: skip
    assert end.reason == "time"
    refused = [c for t in run.turns for c in t.calls if c.not_run]
    assert refused and refused[0].observation == "[not run: the time limit is reached]"


def test_should_stop_is_asked_before_every_turn():
    answers = iter([None, "cancelled by the user"])
    with ScriptedServer([calls("ls"), calls("pwd")]) as server:
        run = Run(server)
        end = run.segment(should_stop=lambda: next(answers))
    assert end.reason == "stopped" and end.detail == "cancelled by the user"
    assert end.turns == 1


def test_sandbox_failure_ends_the_episode_as_an_infrastructure_error():
    with ScriptedServer([calls("ls", "boom", "pwd")]) as server:
        run = Run(server)
        run.sandbox.fail_on = "boom"
        end = run.segment()
    assert end.reason == "error" and end.error_kind == "infrastructure"
    assert [c.not_run_reason for c in run.turns[0].calls] == ["", "harness"]


def test_segments_share_one_conversation_and_one_cap():
    script = [calls("a"), text("segment 1 done"), calls("b"), calls("c")]
    with ScriptedServer(script) as server:
        run = Run(server, EpisodeLimits(turn_cap=3))
        first = run.segment(compose_user_message("Part one.", turn_cap=3))
        message = compose_user_message(
            "Part two.", turn_cap=3, turns_used=run.conv.turns, commands_used=run.conv.executed
        )
        second = run.segment(message, idx=1)
    # Turns: a (1), b (2), c (3) reach the cap of 3; segment 1's closing reply is not a turn.
    assert first.reason == "no_tool_call" and (first.turns, first.calls) == (1, 1)
    assert second.reason == "turn_cap" and (second.turns, second.calls) == (2, 2)
    assert [t.idx for t in run.turns] == [1, 2, 3, 4]
    assert [t.counted for t in run.turns] == [True, False, True, True]
    assert [t.segment_idx for t in run.turns] == [0, 0, 1, 1]
    assert [c.idx for t in run.turns for c in t.calls] == [1, 2, 3]
    assert run.conv.turns == 3 and run.conv.replies == 4
    last = server.chat_requests[-1].body["messages"]
    users = [m["content"] for m in last if m["role"] == "user"]
    assert users[0].startswith("Part one.") and users[1].startswith("Part two.")
    assert "2 of your 3 turn(s) left" in users[1]  # one turn used; the closing reply is free


def test_request_records_rebuild_exactly_what_the_server_received():
    script = [calls("ls"), bad_json(), calls("a", "b"), text("done")]
    with ScriptedServer(script) as server:
        run = Run(server)
        run.segment()
    records = [t.request for t in run.turns]
    assert records[1]["messages_from"] > 0
    assert len(records[1]["messages"]) < len(server.chat_requests[1].body["messages"])
    assert expand_requests(records) == [r.body for r in server.chat_requests]
    assert run.turns[2].response["choices"][0]["message"]["tool_calls"]


def test_full_requests_when_asked():
    with ScriptedServer([calls("ls"), text("done")]) as server:
        run = Run(server)
        turns = []
        run_segment(
            run.agent, run.sandbox, run.conv, "Task.", run.limits,
            Hooks(on_turn=turns.append), full_requests=True,
        )  # fmt: skip
    assert [t.request for t in turns] == [r.body for r in server.chat_requests]


def test_reasoning_and_missing_tool_call_ids():
    reply = ScriptedReply(
        tool_calls=(("bash", '{"command": "ls"}'), ("bash", '{"command": "pwd"}')),
        tool_call_ids=("", ""),
        reasoning="I should list the files.",
    )
    with ScriptedServer([reply, text("done")]) as server:
        run = Run(server)
        run.segment()
    turn = run.turns[0]
    assert turn.reasoning == "I should list the files."
    ids = [c.tool_call_id for c in turn.calls]
    assert all(ids) and len(set(ids)) == 2


def test_sampling_and_provider_pinning_are_sent_in_the_body():
    from engine.agents.registry import ProviderPin, Sampling

    sampling = Sampling(temperature=0.2, top_p=0.9, top_k=20, seed=3, max_tokens=512)
    with ScriptedServer([text("done")]) as server:
        run = Run(
            server,
            sampling=sampling,
            provider=ProviderPin(order=("deepinfra/fp8",)),
            extra_body={"chat_template_kwargs": {"enable_thinking": False}},
        )
        run.segment()
    body = server.chat_requests[0].body
    assert body["provider"] == {"order": ["deepinfra/fp8"], "allow_fallbacks": False}
    assert (body["temperature"], body["top_p"], body["top_k"], body["seed"]) == (0.2, 0.9, 20, 3)
    assert body["max_tokens"] == 512
    assert body["tool_choice"] == "auto" and body["tools"][0]["function"]["name"] == "bash"
    assert body["chat_template_kwargs"] == {"enable_thinking": False}


def test_model_limits_tighten_the_runs_limits():
    limits = EpisodeLimits(max_total_tokens=8192, max_completion_tokens=None)
    tight = limits.with_model(max_total_tokens=32768, max_completion_tokens=6144)
    assert (tight.max_total_tokens, tight.max_completion_tokens) == (8192, 6144)
    assert EpisodeLimits().with_model(None, None) == EpisodeLimits()


def test_make_agent_builds_a_chat_agent_from_a_registry_entry():
    from engine.agents.make import make_agent

    with ScriptedServer([text("hi")]) as server:
        agent = make_agent(scripted_config(server))
        assert isinstance(agent, ChatAgent) and agent.model_id == server.model
        end = run_segment(agent, FakeSandbox(), Conversation(), "Task.", EpisodeLimits())
    assert end.finished


def test_arguments_sent_as_an_object_are_accepted_and_sent_back_as_text():
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "bash", "arguments": {"command": "ls"}},
            }
        ],
    }
    body = {"id": "x", "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    with ScriptedServer([ScriptedReply(raw_body=json.dumps(body)), text("done")]) as server:
        run = Run(server)
        run.segment()
    assert [c for c, _ in run.sandbox.ran] == ["ls"]
    sent = server.chat_requests[1].body["messages"]
    call = next(m for m in sent if m["role"] == "assistant")["tool_calls"][0]
    assert call["function"]["arguments"] == '{"command": "ls"}'
    assert run.turns[0].prompt_tokens == 0  # no usage in the reply: counted as zero


def test_a_200_without_choices_is_retried():
    gateway_error = json.dumps({"error": {"message": "upstream provider failed", "code": 502}})
    with ScriptedServer([ScriptedReply(raw_body=gateway_error), text("done")]) as server:
        run = Run(server)
        end = run.segment()
    assert end.finished and len(server.chat_requests) == 2 and len(run.sleeps) == 1


def test_scripted_server_models_health_and_auth():
    import urllib.error
    import urllib.request

    with ScriptedServer([], api_key="k", models=("a", "b")) as server:
        root = server.base_url.removesuffix("/v1")
        with urllib.request.urlopen(root + "/health") as resp:
            assert resp.status == 200
        req = urllib.request.Request(
            server.base_url + "/models", headers={"Authorization": "Bearer k"}
        )
        with urllib.request.urlopen(req) as resp:
            assert [m["id"] for m in json.loads(resp.read())["data"]] == ["a", "b"]
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(server.base_url + "/models")
        assert err.value.code == 401
    assert [r.path for r in server.requests] == ["/health", "/v1/models", "/v1/models"]
