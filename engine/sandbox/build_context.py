"""A task's build context as it goes into its image: the context folder's entries minus the
task's private files (tests, solutions), hashed for the image's tag, and written as the tar the
engine builds from, with the Dockerfile as built (and any extra files) added.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

from engine.sandbox.base import SandboxError
from engine.tasks.model import Task


def private_paths(task: Task) -> list[str]:
    """Private files as posix paths relative to the build context."""
    env = task.environment
    out = []
    for item in env.private_files:
        p = Path(item)
        if p.is_absolute():
            if env.context_dir is None:
                continue
            try:
                p = p.resolve().relative_to(Path(env.context_dir).resolve())
            except ValueError:
                continue  # outside the context: it cannot enter the image anyway
        out.append(p.as_posix().strip("/"))
    return out


def context_files(task: Task) -> Iterator[tuple[str, Path, os.stat_result]]:
    """(relative path, host path, lstat) of every entry of the filtered context, sorted."""
    root = task.environment.context_dir
    if root is None:
        return
    root = Path(root)
    if not root.is_dir():
        raise SandboxError("build", f"{root}: the build context is not a folder")
    private = private_paths(task)

    def hidden(rel: str) -> bool:
        return any(rel == p or rel.startswith(p + "/") for p in private)

    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(dirpath)
        for name in sorted(dirnames + filenames):
            path = base / name
            rel = path.relative_to(root).as_posix()
            if hidden(rel):
                if name in dirnames:
                    dirnames.remove(name)
                continue
            if rel == "Dockerfile":
                continue  # the Dockerfile goes in as built (see write_context)
            yield rel, path, path.lstat()


def hash_entry(digest: hashlib._Hash, rel: str, path: Path, st: os.stat_result) -> None:
    digest.update(f"\0{rel}\0{stat.S_IFMT(st.st_mode)}\0{st.st_mode & 0o7777}\0".encode())
    if stat.S_ISREG(st.st_mode):
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    elif stat.S_ISLNK(st.st_mode):
        digest.update(os.readlink(path).encode())


def write_context(
    out: io.IOBase,
    files: list[tuple[str, Path, os.stat_result]],
    dockerfile: str,
    extra: dict[str, bytes] | None = None,
) -> None:
    with tarfile.open(fileobj=out, mode="w") as tar:
        for rel, path, _ in files:
            tar.add(str(path), arcname=rel, recursive=False)
        for name, data in {**(extra or {}), "Dockerfile": dockerfile.encode()}.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
            tar.addfile(info, io.BytesIO(data))
