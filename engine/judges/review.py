"""`depthtui review`: a judge model reads a task's files (instruction, tests, solution,
environment) and returns findings in fixed categories, each citing file:line. A finding is kept
only when its file is one the judge was shown, its line exists there and its quoted text (when
it quotes) is on that line; every dropped finding says why."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.agents.prompts import prompts_dir
from engine.judges.client import normalised
from engine.tasks.model import Task

CATEGORIES = (
    "unstated_requirement",  # the tests check something the instruction never asks for
    "contradiction",  # the instruction, tests or solution disagree with each other
    "answer_exposed",  # the environment hands the agent the answer (or the tests, the solution)
    "presence_only_tests",  # the tests check that output exists, not that it is right
    "needs_live_service",  # the task needs the network or a service the sandbox lacks
    "hardcoded_solution",  # the reference writes the expected output instead of computing it
)
PROMPT_FILE = "review.md"
FILE_MAX = 32 * 1024  # a file longer than this is shown cut (its first lines)
FILES_MAX = 60
TOTAL_MAX = 240 * 1024


def prompt_text() -> str:
    path = prompts_dir() / PROMPT_FILE
    return path.read_text(encoding="utf-8")


def task_files(task: Task) -> dict[str, list[str]]:
    """The task's text files by path relative to its folder, as lines (bounded)."""
    root = task.source_path if task.source_path.is_dir() else task.source_path.parent
    files: dict[str, list[str]] = {}
    total = 0
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        if any(part.startswith(".") for part in Path(rel).parts) or len(files) >= FILES_MAX:
            continue
        try:
            text = path.read_bytes()[:FILE_MAX].decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # binary: the judge reads text
        if total + len(text) > TOTAL_MAX:
            continue
        total += len(text)
        files[rel] = text.splitlines()
    return files


def render(files: dict[str, list[str]]) -> str:
    """Every file with numbered lines, the way findings cite them."""
    parts = []
    for rel, lines in files.items():
        body = "\n".join(f"{n:>4}| {line}" for n, line in enumerate(lines, 1))
        parts.append(f"=== {rel} ({len(lines)} lines) ===\n{body}")
    return "\n\n".join(parts)


@dataclass(frozen=True)
class Checked:
    kept: list[dict[str, Any]]
    dropped: list[dict[str, Any]]


def check(findings: list[dict[str, Any]], files: dict[str, list[str]]) -> Checked:
    """Keep the findings whose evidence exists; drop the others, each with why."""
    kept, dropped = [], []
    for f in findings:
        why = _why_not(f, files)
        if why:
            dropped.append({**f, "dropped": why})
            continue
        kept.append(
            {
                "category": f["category"],
                "file": f["file"],
                "line": int(f["line"]),
                "quote": str(f.get("quote") or ""),
                "says": str(f.get("says") or ""),
            }
        )
    return Checked(kept, dropped)


def _why_not(f: dict[str, Any], files: dict[str, list[str]]) -> str | None:
    if f.get("category") not in CATEGORIES:
        return f"category {f.get('category')!r} is not one of {', '.join(CATEGORIES)}"
    name = f.get("file")
    if name not in files:
        return f"cites {name!r}, which is not a file of the task"
    line = f.get("line")
    if not isinstance(line, int) or isinstance(line, bool):
        return f"line {line!r} is not a line number"
    lines = files[name]
    if not 1 <= line <= len(lines):
        return f"cites {name}:{line}, which does not exist ({name} has {len(lines)} lines)"
    quote = normalised(f.get("quote") or "")
    if quote and quote not in normalised(lines[line - 1]):
        return f"quotes {f.get('quote')!r}, which is not on {name}:{line}"
    return None
