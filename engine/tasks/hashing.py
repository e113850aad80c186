"""Hashes that say when a task changed: the whole folder, what the agent's environment is built
from, and what grades it. Contracts and reruns compare them instead of trusting names."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from engine.tasks.model import Task

SKIP_DIRS = {".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache"}
SKIP_SUFFIXES = (".pyc", ".pyo")


def walk_files(root: Path, skip: Iterable[str] = ()) -> Iterator[tuple[str, Path]]:
    """(relative posix path, path) of every file under `root`, sorted by relative path.
    Symlinks are listed, not followed. `skip` holds relative paths (files or folders) to leave
    out."""
    skipped = {s.rstrip("/") for s in skip}
    found: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        rel_dir = here.relative_to(root).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and rel_dir + d not in skipped]
        # os.walk puts symlinks to folders among dirnames; they are files to us.
        for d in list(dirnames):
            if (here / d).is_symlink():
                dirnames.remove(d)
                filenames.append(d)
        for name in filenames:
            rel = rel_dir + name
            if name.endswith(SKIP_SUFFIXES) or rel in skipped:
                continue
            found.append((rel, here / name))
    return iter(sorted(found))


def _feed(h: hashlib._Hash, rel: str, path: Path) -> None:
    h.update(rel.encode() + b"\0")
    if path.is_symlink():
        h.update(b"symlink\0" + os.readlink(path).encode() + b"\0")
        return
    # Streamed: a task folder may hold a large file (an Apptainer .sif, a dataset).
    with path.open("rb") as f:
        h.update(str(os.fstat(f.fileno()).st_size).encode() + b"\0")
        while chunk := f.read(1 << 20):
            h.update(chunk)


def content_hash(folder: Path) -> str:
    """sha256 over the folder's files: sorted relative paths and their bytes (skipping .git,
    __pycache__ and compiled Python)."""
    h = hashlib.sha256()
    for rel, path in walk_files(folder):
        _feed(h, rel, path)
    return h.hexdigest()


def env_hash(task: Task) -> str:
    """What the agent's environment is made of: the recipe (Dockerfile or image), the build
    context minus private files, the environment variables, user, working directory, and each
    segment's workdir files. Two tasks with the same env_hash give the agent the same world."""
    env = task.environment
    h = hashlib.sha256()
    recipe = {
        "image": env.image,
        "dockerfile_text": env.dockerfile_text,
        "env": env.env,
        "agent_user": task.agent_user,
        "agent_uid": task.agent_uid,
        "workdir": task.workdir,
        "home": task.home,
    }
    h.update(json.dumps(recipe, sort_keys=True).encode() + b"\0")
    if env.dockerfile is not None and env.dockerfile.is_file():
        _feed(h, "<dockerfile>", env.dockerfile)
    if env.context_dir is not None and env.context_dir.is_dir():
        for rel, path in walk_files(env.context_dir, skip=env.private_files):
            _feed(h, "context/" + rel, path)
    for i, segment in enumerate(task.segments):
        if segment.workdir_dir is not None and segment.workdir_dir.is_dir():
            for rel, path in walk_files(segment.workdir_dir):
                _feed(h, f"segment{i}/workdir/{rel}", path)
    return h.hexdigest()


def tests_hash(task: Task) -> str:
    """What grades the task: every segment's test files (name and bytes), in segment order."""
    h = hashlib.sha256()
    h.update(task.verifier_kind.encode() + b"\0")
    for i, segment in enumerate(task.segments):
        h.update(f"segment{i}\0".encode())
        for name in sorted(segment.tests):
            _feed(h, name, segment.tests[name])
    return h.hexdigest()
