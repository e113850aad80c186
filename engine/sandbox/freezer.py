"""Stopping the agent from the host: the container's cgroup freezer (Docker's pause) and SIGKILL
sent by this process to the container's processes, found in the host's /proc.

Why from the host: a kill run inside the container as the agent's uid can be outlived by the
agent (a process that watches /proc and kills every new process of its uid stops the sweep
before it runs). A frozen cgroup runs no instruction of any of its processes and cannot fork;
a SIGKILL sent to a frozen process stays pending and is acted on in the kernel when the cgroup
thaws, before the process returns to user space. So freeze, list, kill, thaw leaves no process
of the agent that could run one more instruction, whatever it does. Only for a local engine
(this process sees the container's processes in its /proc and may signal them: root).

See docs/sandbox.md.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from engine.sandbox.base import SandboxError
from engine.sandbox.dockerapi import engine_is_local

# How long killed processes may take to be gone after the thaw (they die in the kernel at once;
# this bounds a process stuck in uninterruptible I/O).
GONE_WAIT_S = 2.0


@dataclass(frozen=True)
class HostProc:
    host_pid: int
    pid: int  # in the container's pid namespace
    ppid: int  # host pid of the parent
    uid: int
    state: str  # R, S, D, Z, T ...
    name: str
    start_tick: int  # clock ticks after boot


def container_procs(container_id: str) -> list[HostProc]:
    """Every process of the container as this host's /proc shows it (zombies included)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if container_id not in (proc / "cgroup").read_text():
                continue
            status = dict(
                line.split(":", 1)
                for line in (proc / "status").read_text().splitlines()
                if ":" in line
            )
            stat = (proc / "stat").read_text()
        except (OSError, ValueError):
            continue  # gone meanwhile
        inner = status.get("NSpid", "").split()
        fields = stat.rpartition(")")[2].split()
        try:
            found.append(
                HostProc(
                    host_pid=int(proc.name),
                    pid=int(inner[-1]) if inner else int(proc.name),
                    ppid=int(status.get("PPid", "0").strip() or 0),
                    uid=int(status.get("Uid", "-1").split()[0]),
                    state=status.get("State", "?").split()[0],
                    name=status.get("Name", "").strip(),
                    start_tick=int(fields[19]) if len(fields) > 19 else 0,
                )
            )
        except (ValueError, IndexError):
            continue
    return found


def host_kill_possible(container_id: str) -> bool:
    """True when this process can see and signal the container's processes."""
    if not engine_is_local() or os.geteuid() != 0:
        return False
    return any(p.pid == 1 for p in container_procs(container_id))


class Freezer:
    """Freezes and thaws one container; nested freezes count, so the disk watch's thread and the
    episode's end can both hold it frozen and the last thaw lets it run."""

    def __init__(self, api: docker.APIClient, container_id: str) -> None:
        self.api = api
        self.id = container_id
        self._lock = threading.RLock()
        self._depth = 0

    @property
    def frozen(self) -> bool:
        return self._depth > 0

    def freeze(self) -> None:
        with self._lock:
            if self._depth == 0:
                try:
                    self.api.pause(self.id)
                except docker.errors.APIError as exc:
                    if "already paused" not in str(exc):
                        why = f"cannot freeze {self.id[:12]}: {exc}"
                        raise SandboxError("container", why) from None
            self._depth += 1

    def thaw(self) -> None:
        with self._lock:
            if self._depth == 0:
                return
            self._depth -= 1
            if self._depth == 0:
                try:
                    self.api.unpause(self.id)
                except docker.errors.NotFound:
                    pass
                except docker.errors.APIError as exc:
                    if "not paused" not in str(exc):
                        why = f"cannot thaw {self.id[:12]}: {exc}"
                        raise SandboxError("container", why) from None

    def release(self) -> None:
        """Thaw whatever the count says (the container is going away)."""
        with self._lock:
            if self._depth:
                self._depth = 1
                self.thaw()

    @contextmanager
    def held(self) -> Iterator[None]:
        self.freeze()
        try:
            yield
        finally:
            self.thaw()

    def kill(self, select: Callable[[list[HostProc]], list[HostProc]]) -> list[HostProc]:
        """Freeze, SIGKILL what `select` picks from the container's processes, thaw, and wait
        until they are gone. One round is complete: a frozen cgroup cannot fork, and a child
        forked as the freeze began is frozen (and listed) with its parent. What was killed."""
        with self._lock:
            with self.held():
                victims = [p for p in select(container_procs(self.id)) if p.state != "Z"]
                for p in victims:
                    try:
                        os.kill(p.host_pid, signal.SIGKILL)
                    except OSError:
                        continue
            if victims and not self.frozen:  # (held frozen by a caller: they land at its thaw)
                _wait_gone(self.id, {p.host_pid for p in victims})
        return victims


def _wait_gone(container_id: str, host_pids: set[int]) -> None:
    deadline = time.monotonic() + GONE_WAIT_S
    while time.monotonic() < deadline:
        left = [p for p in container_procs(container_id) if p.host_pid in host_pids]
        if all(p.state == "Z" for p in left):
            return
        time.sleep(0.01)


def of_uid(uid: int, spare: set[int] = frozenset()) -> Callable[[list[HostProc]], list[HostProc]]:
    """Every process of `uid` but those whose pid in the container is in `spare` (pid 1 and the
    sleeper stay when the agent is root, and so do the sleeper's children)."""

    def select(procs: list[HostProc]) -> list[HostProc]:
        by_host = {p.host_pid: p for p in procs}
        keep = {p.host_pid for p in procs if p.pid in spare or p.pid == 1}
        out = []
        for p in procs:
            if p.uid != uid or p.host_pid in keep:
                continue
            parent = by_host.get(p.ppid)
            if uid == 0 and parent is not None and parent.pid in spare and parent.pid != 1:
                continue  # the root sleeper's own `sleep`
            out.append(p)
        return out

    return select


def command_tree(
    shell_pid: int, last_pid: int | None, since_tick: int | None
) -> Callable[[list[HostProc]], list[HostProc]]:
    """What a timed-out command left: the descendants of the shell (pid in the container) that
    are newer than the command (a higher pid than the last one handed out when it began, or,
    after the pid counter wrapped, started in a later tick). Earlier background jobs stay."""

    def select(procs: list[HostProc]) -> list[HostProc]:
        shell = next((p for p in procs if p.pid == shell_pid), None)
        if shell is None:
            return []
        tree = {shell.host_pid}
        grew = True
        while grew:
            grew = False
            for p in procs:
                if p.host_pid not in tree and p.ppid in tree:
                    tree.add(p.host_pid)
                    grew = True
        out = []
        for p in procs:
            if p.host_pid == shell.host_pid or p.host_pid not in tree:
                continue
            newer = last_pid is not None and p.pid > last_pid
            if not newer and since_tick is not None and p.start_tick > since_tick:
                newer = True
            if newer:
                out.append(p)
        return out

    return select
