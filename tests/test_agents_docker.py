"""The agent loop in real containers: the oracle on every demo task, a chat model (scripted, over
real HTTP) batching commands in a real shell, and replay reproducing its outputs in a fresh one.
Containers and any image built here carry the test label and are removed at the end."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from devtools.scripted_server import ScriptedServer, calls, text
from engine.agents.builtin import OracleAgent, ReplayAgent, replay_turns
from engine.agents.chat import ChatAgent
from engine.agents.loop import Conversation, EpisodeLimits, Hooks, run_segment
from engine.agents.prompts import compose_user_message, load_prompt
from engine.sandbox.dockerapi import connect
from engine.sandbox.gc import remove_image
from engine.sandbox.images import build_image
from engine.sandbox.start import start_sandbox
from engine.tasks.loader import load_tasks
from engine.tasks.model import Segment
from store import episodes
from store.db import Store
from tests.conftest import DEMO
from tests.fixtures_agents import scripted_config
from tests.fixtures_sandbox import BASE, TEST_LABELS, make_task

pytestmark = [pytest.mark.docker, pytest.mark.slow]


@pytest.fixture(scope="module")
def demo_images(tmp_path_factory) -> Iterator[dict]:
    """The demo task these tests use, with its image (removed afterwards if built here). Every
    demo task's reference and no-op are run through the real runner in test_demo_check.py."""
    tasks, _ = load_tasks([DEMO / "error-count"])
    logs = tmp_path_factory.mktemp("build-logs")
    built, out = [], {}
    try:
        for task in tasks:
            image = build_image(task, logs, labels=TEST_LABELS)
            if image.built:
                built.append(image.tag)
            out[task.id] = (task, image.tag)
        yield out
    finally:
        client = connect()
        for tag in built:
            remove_image(client, tag)


def _episode(agent, task, image, segments_messages, limits=EpisodeLimits(), before=None):
    sandbox = start_sandbox(task, image, labels=TEST_LABELS)
    turns, ends = [], []
    try:
        conv = Conversation.start(agent, load_prompt("general")[1])
        for i, message in enumerate(segments_messages):
            if before is not None:
                before(sandbox, i)
            end = run_segment(
                agent, sandbox, conv, message, limits, Hooks(on_turn=turns.append), segment_idx=i
            )
            ends.append(end)
    finally:
        sandbox.close()
    return turns, ends


def test_oracle_multi_segment_in_one_container(tmp_path: Path):
    solutions = []
    for i, script in enumerate(["echo one > ~/log.txt\n", "echo two >> ~/log.txt\n"]):
        folder = tmp_path / f"solution{i}"
        folder.mkdir()
        (folder / "solve.sh").write_text("#!/bin/bash\nset -e\n" + script)
        solutions.append(folder)
    base = make_task("agents-multi")
    segments = tuple(
        Segment(f"s{i}", f"Part {i}.", {}, "x", folder) for i, folder in enumerate(solutions)
    )
    task = replace(base, segments=segments)
    seen = []

    def before(sandbox, idx):
        sandbox.put_path(task.segments[idx].solution_dir, "/solution")
        if idx == 1:
            seen.append(sandbox.get_bytes("/home/user/log.txt"))

    turns, ends = _episode(
        OracleAgent.for_task(task), task, BASE, ["Part 0.", "Part 1."], before=before
    )
    assert [e.reason for e in ends] == ["no_tool_call", "no_tool_call"]
    assert seen == [b"one\n"]
    assert [t.calls[0].result.exit_code for t in turns if t.calls] == [0, 0]


def test_chat_model_batches_in_a_real_shell_and_replay_reproduces_it(demo_images, db_path):
    task, image = demo_images["demo/error-count"]
    script = [
        calls("cd logs && pwd", "ls", "wc -l < app.log"),
        calls("awk '$3 == \"ERROR\"' app.log | wc -l", "echo $((6 * 7)) > /tmp/answer"),
        calls("cat /tmp/answer; cd ~ && pwd"),
        text("The count is done."),
    ]
    store = Store(db_path)
    eid = episodes.create_episode(
        store, run_key="r", task_id=task.id, task_hash=task.content_hash, mode="free", agent="s"
    )
    with ScriptedServer(script) as server:
        agent = ChatAgent(scripted_config(server))
        message = compose_user_message(task.instruction, turn_cap=10, command_budget=20)
        limits = EpisodeLimits(turn_cap=10, command_budget=20)
        sandbox = start_sandbox(task, image, labels=TEST_LABELS)
        turns = []

        def on_turn(turn):
            turns.append(turn)
            episodes.record_turn(store, eid, turn.row(), turn.call_rows(), turn.outputs())

        try:
            conv = Conversation.start(agent, load_prompt("budget")[1])
            end = run_segment(agent, sandbox, conv, message, limits, Hooks(on_turn=on_turn))
        finally:
            sandbox.close()
    assert end.reason == "no_tool_call" and end.turns == 3  # the closing reply is not a turn
    outputs = [c.result.output.decode() for t in turns for c in t.calls]
    assert outputs[0] == "/home/user/logs\n"  # cwd carries over within and across turns
    assert outputs[4] == "" and outputs[5] == "42\n/home/user\n"
    assert [c.remaining_budget for t in turns for c in t.calls] == [19, 18, 17, 16, 15, 14]
    assert turns[0].calls[2].observation.endswith("[exit code 0]; 17 command(s) left")

    stored = replay_turns(episodes.list_turns(store, eid), episodes.list_calls(store, eid))
    replayed, ends = _episode(ReplayAgent(stored), task, image, [task.instruction])
    assert ends[0].reason == "no_tool_call"
    again = [c.result.output.decode() for t in replayed for c in t.calls]
    assert again == outputs
    store.conn.close()
