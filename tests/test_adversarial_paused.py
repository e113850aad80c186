"""A container its harness left paused (frozen) with the agent's processes alive, its owner
dead: the next engine's gc ends it (issue 24 point 8). Real Docker: a container labelled with
a dead owner, a background process of the "agent" in it, paused; `gc` (what an engine runs
when it starts) must leave neither the container nor any of its processes."""

from __future__ import annotations

import os
import socket
import time
import uuid
from pathlib import Path

import docker
import docker.errors
import pytest

from engine.sandbox.gc import gc
from engine.sandbox.labels import LABEL_OWNER, LABEL_ROLE, ROLE_AGENT

pytestmark = [pytest.mark.docker]

IMAGE = "depthtui/base:bookworm"


def _dead_owner() -> str:
    """A host:pid owner on this host whose pid runs no process."""
    pid = 4_000_000
    while Path(f"/proc/{pid}").exists():
        pid += 1
    return f"{socket.gethostname()}:{pid}"


def _host_pids_with(marker: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if argv.startswith(marker):
            found.append(int(proc.name))
    return found


def test_gc_ends_a_paused_container_of_a_dead_owner() -> None:
    client = docker.from_env()
    owner = _dead_owner()
    marker = f"9{uuid.uuid4().int % 10**8}"  # a sleep length no other process uses
    container = client.containers.run(
        IMAGE,
        ["bash", "-c", f"sleep {marker}1 & sleep {marker}2 & wait"],
        detach=True,
        labels={LABEL_OWNER: owner, LABEL_ROLE: ROLE_AGENT, "depthtui.test": "1"},
    )
    live_owner = f"{socket.gethostname()}:{os.getpid()}"
    bystander = client.containers.run(
        IMAGE,
        ["sleep", "300"],
        detach=True,
        labels={LABEL_OWNER: live_owner, LABEL_ROLE: ROLE_AGENT, "depthtui.test": "1"},
    )
    try:
        deadline = time.monotonic() + 10
        while len(_host_pids_with(f"sleep {marker}")) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(_host_pids_with(f"sleep {marker}")) == 2
        container.pause()
        bystander.pause()
        container.reload()
        assert container.status == "paused"

        started = time.monotonic()
        result = gc(owner_alive=lambda o: o != owner)
        assert time.monotonic() - started < 30

        assert container.id in result.containers
        assert bystander.id not in result.containers  # a live owner's paused container stays
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(container.id)
        deadline = time.monotonic() + 10
        while _host_pids_with(f"sleep {marker}") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _host_pids_with(f"sleep {marker}") == []  # no process of the agent lives on
        bystander.reload()
        assert bystander.status == "paused"
    finally:
        for c in (container, bystander):
            try:
                c.remove(force=True)
            except docker.errors.NotFound:
                pass
