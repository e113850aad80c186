"""System prompts by name and the budget/cap statement templates."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.agents.prompts import (
    PromptError,
    compose_user_message,
    load_prompt,
    prompt_names,
)


def test_shipped_prompts_load_by_name():
    assert {"general", "budget", "fault_runbook"} <= set(prompt_names())
    name, text = load_prompt("budget")
    assert name == "budget" and "Batch" in text
    _, runbook = load_prompt("fault_runbook")
    for words in ("Permission denied", "chmod u+rw", "hidden folder", "named pipe", ".bak"):
        assert words in runbook


def test_unknown_prompt_lists_the_available_names():
    with pytest.raises(PromptError) as err:
        load_prompt("nope")
    assert "no system prompt named 'nope'" in str(err.value)
    assert "fault_runbook" in str(err.value) and "general" in str(err.value)


def test_a_prompt_file_path_works_too(tmp_path: Path):
    path = tmp_path / "mine.txt"
    path.write_text("Be brief.\n")
    assert load_prompt(str(path)) == ("mine", "Be brief.\n")


def test_first_message_states_cap_and_budget():
    msg = compose_user_message("Sort the file.\n", turn_cap=5, command_budget=12)
    instruction, cap, budget = msg.split("\n\n")
    assert instruction == "Sort the file."
    assert "at most 5 turn(s)" in cap
    assert "budget of 12 command(s)" in budget
    assert compose_user_message("Sort the file.") == "Sort the file."


def test_later_segments_say_what_is_left():
    msg = compose_user_message(
        "Next.", turn_cap=5, command_budget=12, turns_used=2, commands_used=7
    )
    assert "3 of your 5 turn(s) left" in msg
    assert "5 of your 12 command(s) left" in msg


def test_prompts_folder_override(tmp_path: Path, monkeypatch):
    (tmp_path / "templates").mkdir()
    (tmp_path / "solo.txt").write_text("x")
    monkeypatch.setenv("DEPTHTUI_PROMPTS", str(tmp_path))
    assert prompt_names() == ["solo"]
    with pytest.raises(PromptError, match="missing prompt template"):
        compose_user_message("hi", turn_cap=1)
