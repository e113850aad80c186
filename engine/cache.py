"""Where depthtui keeps its caches: $DEPTHTUI_CACHE, else $XDG_CACHE_HOME/depthtui, else
~/.cache/depthtui (the same rule as docker/setup.sh and docker/toolchain.sh). It holds the
rootfs tarballs, plugin wheels, the trusted verifier toolchain and the image build logs."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    explicit = os.environ.get("DEPTHTUI_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser() / "depthtui"


def build_log_dir() -> Path:
    """Image build logs, one file per task and build context (`<task>-<hash>.log`)."""
    return cache_dir() / "build-logs"
