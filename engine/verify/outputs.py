"""The graded outputs' final state, recorded by the harness for differential grading
(store/differential.py, docs/verifier.md).

Taken at the final check (engine/protocol/seal.py): every agent process was killed from the host
and the container is frozen, so nothing the agent left running can change what is recorded. The
hash is the final check's own (the oracle rehashes every file from the host); the text is read
through the Docker daemon's archive API, never by a process inside the container.
"""

from __future__ import annotations

from typing import Any

from engine.oracle import changes
from engine.oracle.latch import Oracle
from engine.sandbox.base import Sandbox, SandboxError
from engine.tasks.model import Task
from engine.verify.mutations import candidate_files

MAX_OUTPUTS = 16  # graded files recorded per episode
TEXT_MAX = 16 * 1024  # a file's text is kept up to this size


def changed_paths(oracle: Oracle) -> list[str]:
    """Absolute paths changed or created between the baseline and the last check."""
    base, last = oracle.baseline, oracle.last
    rels = {c.rel for c in changes.diff(base, last)} | set(changes.created(base, last))
    return sorted(base.abspath(rel) for rel in rels)


def graded_paths(task: Task, changed: list[str]) -> list[str]:
    """The changed paths the last segment's tests name (the mutation audit's rule), bounded."""
    tests = task.segments[-1].tests
    sources = {name: path.read_bytes() for name, path in tests.items()}
    return candidate_files(changed, sources, home=task.home, workdir=task.workdir)[:MAX_OUTPUTS]


def capture(sandbox: Sandbox, oracle: Oracle, task: Task) -> dict[str, dict[str, Any]]:
    """{path: {sha256, size, text?} | {absent: True} | {type, target}} for each graded output
    (a folder is left out: its files are graded outputs of their own)."""
    out: dict[str, dict[str, Any]] = {}
    for path in graded_paths(task, changed_paths(oracle)):
        entry = oracle.last.get(path)
        if entry is None:
            out[path] = {"absent": True}
            continue
        if entry.type == "dir":
            continue  # a folder's content is its files, compared one by one
        if entry.type != "file":
            out[path] = {"type": entry.type, "sha256": None, "target": entry.target}
            continue
        rec: dict[str, Any] = {"sha256": entry.sha256, "size": entry.size}
        if (entry.size or 0) <= TEXT_MAX:
            try:
                rec["text"] = sandbox.get_bytes(path).decode("utf-8")
            except (SandboxError, UnicodeDecodeError):
                pass  # binary or unreadable: compared by hash
        out[path] = rec
    return out
