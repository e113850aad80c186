"""Where the trusted verifier toolchain lives and how a verifier container runs it.

docker/toolchain.sh builds the folder (a relocatable Python 3.11 with pytest, pytest-timeout and
runner.py); this module finds it, checks it is complete and current, and says how to start its
Python inside a container where it is mounted read-only at MOUNT.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from engine.cache import cache_dir

# Where verifier containers see the toolchain (read-only bind mount).
MOUNT = "/opt/depthtui/toolchain"
RUNNER = f"{MOUNT}/runner/runner.py"
PYTEST = f"{MOUNT}/bin/pytest"
BUILD_HINT = "run docker/toolchain.sh (docker/setup.sh runs it) to build it"


class ToolchainError(RuntimeError):
    """The toolchain is missing, incomplete or older than this depthtui's runner."""


@dataclass(frozen=True)
class Toolchain:
    path: Path
    sha256: str
    python: str
    pytest: str
    pytest_timeout: str
    runner_sha256: str

    def python_argv(self, *args: str) -> list[str]:
        """The command that runs the toolchain's Python inside a container: through its own
        loader and libraries (so the image's glibc, ld.so.cache and Python do not matter), in
        isolated mode without site (no PYTHON* variables, no user site, no .pth files)."""
        return [
            f"{MOUNT}/lib/ld-linux-x86-64.so.2",
            "--inhibit-cache",
            "--library-path",
            f"{MOUNT}/lib",
            f"{MOUNT}/bin/python3.11",
            "-I",
            "-S",
            *args,
        ]


def toolchain_dir() -> Path:
    """$DEPTHTUI_TOOLCHAIN, else $DEPTHTUI_CACHE/toolchain, else ~/.cache/depthtui/toolchain
    (honouring $XDG_CACHE_HOME): the same rule as docker/toolchain.sh."""
    explicit = os.environ.get("DEPTHTUI_TOOLCHAIN")
    if explicit:
        return Path(explicit).expanduser()
    return cache_dir() / "toolchain"


def runner_source() -> Path:
    return Path(__file__).with_name("runner.py")


def load_toolchain(path: Path | None = None) -> Toolchain:
    """The toolchain at `path` (default: toolchain_dir()), checked: its TOOLCHAIN.json is
    readable, the files the verifier starts exist, and its runner is this depthtui's runner."""
    root = Path(path) if path is not None else toolchain_dir()
    info_path = root / "TOOLCHAIN.json"
    if not info_path.is_file():
        raise ToolchainError(f"{root}: no trusted verifier toolchain here; {BUILD_HINT}")
    try:
        info = json.loads(info_path.read_text())
        tc = Toolchain(
            path=root,
            sha256=str(info["sha256"]),
            python=str(info["python"]),
            pytest=str(info["pytest"]),
            pytest_timeout=str(info["pytest_timeout"]),
            runner_sha256=str(info["runner_sha256"]),
        )
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ToolchainError(f"{info_path}: unreadable ({exc}); {BUILD_HINT}") from exc
    for rel in ("lib/ld-linux-x86-64.so.2", "bin/python3.11", "bin/pytest", "runner/runner.py"):
        if not (root / rel).is_file():
            raise ToolchainError(f"{root}: incomplete, '{rel}' is missing; {BUILD_HINT}")
    ours = hashlib.sha256(runner_source().read_bytes()).hexdigest()
    theirs = hashlib.sha256((root / "runner" / "runner.py").read_bytes()).hexdigest()
    if theirs != ours or tc.runner_sha256 != ours:
        raise ToolchainError(
            f"{root}: its runner.py differs from {runner_source()} (the toolchain is out of "
            f"date); {BUILD_HINT}"
        )
    return tc
