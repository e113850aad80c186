"""System prompts and the text templates the loop states budgets with, read from prompts/.

A system prompt is `prompts/<name>.txt`; the templates for the turn-cap statement, the
command-budget line and the text action formats are `prompts/templates/<name>.txt` with
`$placeholders`. Keeping the words in files means a prompt arm is a file, and the exact text can be
stored with each episode.
"""

from __future__ import annotations

import os
from pathlib import Path
from string import Template

ENV_VAR = "DEPTHTUI_PROMPTS"
DEFAULT_PROMPT = "general"


class PromptError(ValueError):
    """A prompt or template that does not exist or cannot be filled in."""


def prompts_dir() -> Path:
    """`$DEPTHTUI_PROMPTS`, else the prompts/ folder shipped beside the engine."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parents[2] / "prompts"


def prompt_names(folder: Path | None = None) -> list[str]:
    folder = folder or prompts_dir()
    return sorted(p.stem for p in folder.glob("*.txt"))


def load_prompt(name: str, folder: Path | None = None) -> tuple[str, str]:
    """The system prompt called `name`, as (name, text). A path to a .txt file also works, so a
    user can try a prompt without adding it to the folder; its name is then the file's stem."""
    folder = folder or prompts_dir()
    candidate = Path(name).expanduser()
    if candidate.suffix == ".txt" and candidate.is_file():
        return candidate.stem, _read(candidate)
    path = folder / f"{name}.txt"
    if not path.is_file():
        known = ", ".join(prompt_names(folder)) or "(none)"
        raise PromptError(f"no system prompt named '{name}' in {folder}; available: {known}")
    return name, _read(path)


def render_template(name: str, folder: Path | None = None, **values: object) -> str:
    """`prompts/templates/<name>.txt` with its `$placeholders` filled in (no trailing newline)."""
    path = (folder or prompts_dir()) / "templates" / f"{name}.txt"
    if not path.is_file():
        raise PromptError(f"missing prompt template {path}")
    try:
        return Template(_read(path)).substitute(values).strip("\n")
    except (KeyError, ValueError) as exc:
        raise PromptError(f"{path}: cannot fill in placeholder {exc}") from exc


def turn_cap_statement(cap: int, folder: Path | None = None) -> str:
    return render_template("turn_cap", folder, cap=cap)


def budget_line(budget: int, folder: Path | None = None) -> str:
    return render_template("command_budget", folder, budget=budget)


def compose_user_message(
    instruction: str,
    *,
    turn_cap: int | None = None,
    command_budget: int | None = None,
    turns_used: int = 0,
    commands_used: int = 0,
    folder: Path | None = None,
) -> str:
    """The user message that opens a segment: the instruction, then the stated limits.

    The first segment states the turn cap and the command budget in full. A later segment of a
    multi-segment task (anything used already) says how much of the same cap or budget is left,
    since both cover the whole task.
    """
    parts = [instruction.rstrip("\n")]
    first = turns_used == 0 and commands_used == 0
    if turn_cap is not None:
        if first:
            parts.append(turn_cap_statement(turn_cap, folder))
        else:
            left = max(turn_cap - turns_used, 0)
            parts.append(render_template("turns_left", folder, left=left, cap=turn_cap))
    if command_budget is not None:
        if first:
            parts.append(budget_line(command_budget, folder))
        else:
            left = max(command_budget - commands_used, 0)
            parts.append(render_template("commands_left", folder, left=left, budget=command_budget))
    return "\n\n".join(parts)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PromptError(f"cannot read {path}: {exc}") from exc
