"""Helpers for the measurement tests: scripted "models" that act on what they are told, a
models.toml pointing at a scripted server, the `depthtui` console script run as a user runs it,
and cleanup of what its processes left in Docker.

A scripted policy is a callable the ScriptedServer calls with each request body; it decides the
reply from the conversation alone (the stated cap, how many replies it already gave, which
segment it is in), so one policy serves any number of episodes, in any order, from several
worker threads.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devtools.scripted_server import ScriptedReply, ScriptedServer, calls, text
from tests.fixtures_jobs import owned_by, remove_owned_by

DEPTHTUI = str(Path(sys.executable).with_name("depthtui"))
CAP_STATEMENT = re.compile(r"You have at most (\d+) turn\(s\) for this task")
FORMAT_ERROR_PREFIX = "[format error]"

Policy = Callable[[dict[str, Any]], ScriptedReply]


# --- reading a request body ---------------------------------------------------------------------


def user_messages(body: dict[str, Any]) -> list[str]:
    """The user messages that opened segments (format-error notes are user messages too)."""
    return [
        m.get("content") or ""
        for m in body["messages"]
        if m.get("role") == "user" and not (m.get("content") or "").startswith(FORMAT_ERROR_PREFIX)
    ]


def stated_cap(body: dict[str, Any]) -> int | None:
    """The turn cap the first user message states, or None when none is stated."""
    for message in user_messages(body):
        found = CAP_STATEMENT.search(message)
        if found:
            return int(found.group(1))
    return None


def reply_number(body: dict[str, Any]) -> int:
    """Which reply of the episode this request asks for (1-based): one more than the
    assistant messages already in the conversation."""
    return 1 + sum(1 for m in body["messages"] if m.get("role") == "assistant")


def replies_in_segment(body: dict[str, Any]) -> int:
    """Assistant messages since the latest segment's user message."""
    count = 0
    for m in body["messages"]:
        if m.get("role") == "user" and not (m.get("content") or "").startswith(FORMAT_ERROR_PREFIX):
            count = 0
        elif m.get("role") == "assistant":
            count += 1
    return count


def first_instruction(body: dict[str, Any]) -> str:
    messages = user_messages(body)
    return messages[0] if messages else ""


def endless(policy: Policy, n: int = 5000) -> list[Policy]:
    """A script for ScriptedServer that answers every request with `policy`."""
    return [policy] * n


# --- policies ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BatchingPolicy:
    """A model that first looks (one reply), then does the task's commands, and then says it is
    done (one more reply, with no tool call).

    It batches every command into one reply only when the instruction states a cap of at most
    `batch_at_most[model id]`; otherwise it sends one command per reply. So with k commands, under
    the loop's rules (docs/work-and-turns.md: a turn is one model reply with commands; the closing
    "done" reply is recorded, not counted; a cap ends the episode after `cap` turns, then the task
    is graded as it stands):
    - without a stated cap it takes 1 + k turns (and one closing reply) and passes;
    - told a cap c it would batch at (c <= K): it needs 2 replies of work, so it passes iff c >= 2;
    - told a cap c it would not batch at: it needs 1 + k replies of work, so passes iff c >= 1 + k.
    """

    look: str
    work: dict[str, tuple[str, ...]]  # a word of the task's instruction -> its commands
    batch_at_most: dict[str, int]  # model id -> K

    def commands_for(self, instruction: str) -> tuple[str, ...]:
        for word, commands in self.work.items():
            if word in instruction:
                return commands
        raise AssertionError(f"the policy knows no task for: {instruction[:80]!r}")

    def plan(self, model: str, cap: int | None, instruction: str) -> list[tuple[str, ...]]:
        commands = self.commands_for(instruction)
        k = self.batch_at_most.get(model, 0)
        if cap is not None and cap <= k:
            return [(self.look,), commands]
        return [(self.look,), *((c,) for c in commands)]

    def __call__(self, body: dict[str, Any]) -> ScriptedReply:
        plan = self.plan(body["model"], stated_cap(body), first_instruction(body))
        n = reply_number(body)
        if n <= len(plan):
            return calls(*plan[n - 1])
        return text("done")


@dataclass(frozen=True)
class SegmentPolicy:
    """A model for multi-segment tasks: for segment i (1-based) it sends `replies[i-1]` in order
    (each a tuple of commands), then says it is done. Every reply carries the same usage and cost
    so totals can be computed by hand, and a reasoning text naming the segment and reply."""

    replies: Sequence[Sequence[tuple[str, ...]]]
    usage: dict[str, Any] | None = None
    cost: float | None = None

    def __call__(self, body: dict[str, Any]) -> ScriptedReply:
        segment = len(user_messages(body))
        n = replies_in_segment(body) + 1
        mine = self.replies[segment - 1] if segment <= len(self.replies) else ()
        extra: dict[str, Any] = {"usage": self.usage, "cost": self.cost}
        reasoning = f"segment {segment}, reply {n}"
        if n <= len(mine):
            return calls(*mine[n - 1], reasoning=reasoning, content=f"step {n}", **extra)
        return text(f"segment {segment} done", reasoning=reasoning, **extra)


# --- models.toml --------------------------------------------------------------------------------


def write_models(
    path: Path,
    server: ScriptedServer,
    names: dict[str, str],
    price: tuple[float, float] | None = None,
) -> Path:
    """A models.toml with one entry per `names` item (registry name -> model id the server
    serves), all at `server`. `price` = (prompt, completion) USD per million tokens."""
    lines = []
    for name, model_id in names.items():
        lines += [f"[models.{name}]", f'base_url = "{server.base_url}"', f'model = "{model_id}"']
        if price is not None:
            lines += [
                f"[models.{name}.price]",
                f"prompt_usd_per_mtok = {price[0]}",
                f"completion_usd_per_mtok = {price[1]}",
            ]
        lines.append("")
    path.write_text("\n".join(lines))
    return path


# --- the console script ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CliRun:
    returncode: int
    stdout: str
    stderr: str
    owner: str  # host:pid, as the process labelled its containers

    def json(self) -> Any:
        return json.loads(self.stdout)


def run_cli(
    args: Sequence[str], db: Path, timeout: float = 900, owners: list | None = None
) -> CliRun:
    """`depthtui ARGS --db DB` as a user runs it (a child process). Its owner id is appended to
    `owners` before it runs, so a test's cleanup finds its containers even if it times out."""
    import socket

    env = {k: v for k, v in os.environ.items() if k not in ("DEPTHTUI_DB", "DEPTHTUI_MODELS")}
    env["COLUMNS"] = "200"
    proc = subprocess.Popen(
        [DEPTHTUI, *args, "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    owner = f"{socket.gethostname()}:{proc.pid}"
    if owners is not None:
        owners.append(owner)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(
            f"depthtui {' '.join(args)} ran past {timeout} s:\n{err[-3000:]}"
        ) from None
    return CliRun(proc.returncode, out, err, owner)


def leftovers(owners: list[str]) -> list[str]:
    """Containers and images the given processes left behind (there should be none)."""
    return owned_by(owners)


def cleanup(owners: list[str]) -> None:
    remove_owned_by(owners)


# --- reading the store ---------------------------------------------------------------------------


def rows(db: Path, sql: str, params: tuple = ()) -> list[dict[str, Any]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def job(db: Path, job_id: int | None = None) -> dict[str, Any]:
    """A job row (the newest when no id is given)."""
    if job_id is None:
        return rows(db, "SELECT * FROM jobs ORDER BY id DESC LIMIT 1")[0]
    return rows(db, "SELECT * FROM jobs WHERE id = ?", (job_id,))[0]
