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

import contextlib
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
FREEZE_TRIES = 6
UNFROZEN_ROUNDS = 50


class FreezeError(SandboxError):
    """The container would not freeze (the kernel gave up while its processes were busy)."""


@dataclass(frozen=True)
class HostProc:
    host_pid: int
    pid: int  # in the container's pid namespace
    ppid: int  # host pid of the parent
    uid: int
    state: str  # R, S, D, Z, T ...
    name: str
    start_tick: int  # clock ticks after boot


def _lists(procs: Path, init_pid: int) -> bool:
    """`procs` is a readable cgroup.procs that names `init_pid`."""
    try:
        return str(init_pid) in procs.read_text().split()
    except OSError:
        return False


def procs_file(container_id: str, init_pid: int) -> Path | None:
    """The container's `cgroup.procs` (cgroup v1's pids hierarchy, or v2's unified one), found
    from its init process; None when this host's /sys/fs/cgroup does not show it."""
    try:
        lines = Path(f"/proc/{init_pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if container_id not in path:
            continue
        if controllers == "pids":
            candidate = Path("/sys/fs/cgroup/pids") / path.lstrip("/") / "cgroup.procs"
        elif controllers == "":
            candidate = Path("/sys/fs/cgroup") / path.lstrip("/") / "cgroup.procs"
        else:
            continue
        if _lists(candidate, init_pid):
            return candidate
    return None


def container_procs(container_id: str, listed: Path | None = None) -> list[HostProc]:
    """Every process of the container as this host's /proc shows it (zombies included): those
    its `cgroup.procs` (`listed`) names, else every process whose cgroup names the container."""
    if listed is not None:
        try:
            pids = listed.read_text().split()
        except OSError:
            pids = []
        candidates = [Path("/proc") / pid for pid in pids]
    else:
        candidates = [p for p in Path("/proc").iterdir() if p.name.isdigit()]
    found = []
    for proc in candidates:
        try:
            if listed is None and container_id not in (proc / "cgroup").read_text():
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


@dataclass(frozen=True)
class HostView:
    """What this process can see of a container from the host."""

    local: bool  # it can see and signal the container's processes (a local engine, as root)
    listed: Path | None  # its cgroup.procs, when readable (else /proc is scanned)
    # Its cgroup.procs in the unified (v2) hierarchy: a descriptor kept open on it lists the
    # processes afresh at every read, which v1's does not (it keeps one listing while in use).
    unified: Path | None


def host_view(api: docker.APIClient, container_id: str) -> HostView:
    """How far this process sees the container's processes (HostView)."""
    if not engine_is_local() or os.geteuid() != 0:
        return HostView(False, None, None)
    try:
        init_pid = int(api.inspect_container(container_id)["State"]["Pid"])
    except (docker.errors.APIError, KeyError, TypeError, ValueError):
        return HostView(False, None, None)
    if init_pid <= 0:
        return HostView(False, None, None)
    listed = procs_file(container_id, init_pid)
    unified = unified_procs_file(container_id, init_pid)
    if listed is not None:
        return HostView(True, listed, unified)
    local = any(p.pid == 1 for p in container_procs(container_id))
    return HostView(local, None, unified if local else None)


def unified_procs_file(container_id: str, init_pid: int) -> Path | None:
    """The container's cgroup.procs under a cgroup2 mount of this host, found from its init
    process's `0::` line; None when there is none."""
    try:
        lines = Path(f"/proc/{init_pid}/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    path = next((line[3:] for line in lines if line.startswith("0::")), "")
    if container_id not in path:
        return None
    for mount in mounts:
        fields, _, fs = mount.partition(" - ")
        parts = fields.split(" ")
        if not fs.startswith("cgroup2 ") or len(parts) < 5:
            continue
        root, point = parts[3], parts[4]
        if root != "/" and not path.startswith(root + "/"):
            continue
        inside = path[len(root) :] if root != "/" else path
        candidate = Path(point) / inside.lstrip("/") / "cgroup.procs"
        if _lists(candidate, init_pid):
            return candidate
    return None


class Freezer:
    """Freezes and thaws one container; nested freezes count, so the disk watch's thread and the
    episode's end can both hold it frozen and the last thaw lets it run."""

    def __init__(
        self, api: docker.APIClient, container_id: str, listed: Path | None = None
    ) -> None:
        self.api = api
        self.id = container_id
        self.listed = listed  # the container's cgroup.procs, when known (faster than /proc)
        self._lock = threading.RLock()
        self._depth = 0

    @property
    def frozen(self) -> bool:
        return self._depth > 0

    def freeze(self) -> None:
        """Freeze the container (again: nested). The kernel can fail to freeze a busy cgroup in
        the time runc gives it ("unable to freeze"), so a few tries; FreezeError after them."""
        with self._lock:
            if self._depth == 0:
                for attempt in range(FREEZE_TRIES):
                    try:
                        self.api.pause(self.id)
                        break
                    except docker.errors.NotFound:
                        raise SandboxError("container", f"{self.id[:12]} is gone") from None
                    except docker.errors.APIError as exc:
                        if "already paused" in str(exc):
                            # Not by us (the count is 0): most likely the engine's stale state
                            # after our own unpause (dockerapi.PAUSE_LAG_S), its processes still
                            # running. A kill trusting it could miss a fork: thaw, freeze again.
                            with contextlib.suppress(docker.errors.APIError):
                                self.api.unpause(self.id)
                        if attempt == FREEZE_TRIES - 1:
                            raise FreezeError(
                                "container", f"cannot freeze {self.id[:12]}: {exc}"
                            ) from None
                        time.sleep(0.05 * 2**attempt)
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

    @contextmanager
    def thawed(self) -> Iterator[None]:
        """Running for the block however deep it is held frozen, and frozen again after: for a
        root exec of the harness once no process of the agent is left. The lock is held, so no
        other thread (the disk watch) freezes it under the exec."""
        with self._lock:
            depth = self._depth
            if depth:
                self._depth = 1
                self.thaw()
            try:
                yield
            finally:
                if depth:
                    self.freeze()
                    self._depth = depth

    def release(self) -> None:
        """Thaw whatever the count says (the container is going away)."""
        with self._lock:
            if self._depth:
                self._depth = 1
                self.thaw()

    @contextmanager
    def held(self, best_effort: bool = False) -> Iterator[bool]:
        """Frozen for the block; with `best_effort`, a container that would not freeze runs on
        (the block is told False) instead of raising."""
        try:
            self.freeze()
        except FreezeError:
            if not best_effort:
                raise
            yield False
            return
        try:
            yield True
        finally:
            self.thaw()

    def kill(self, select: Callable[[list[HostProc]], list[HostProc]]) -> list[HostProc]:
        """Freeze, SIGKILL what `select` picks from the container's processes, thaw, and wait
        until they are gone. One round is complete: a frozen cgroup cannot fork, and a child
        forked as the freeze began is frozen (and listed) with its parent. When the container
        will not freeze, rounds of list and SIGKILL until one finds nothing (a SIGKILL from the
        host cannot be blocked; only new forks race it, and the pids limit bounds those). What
        was killed."""
        killed: list[HostProc] = []
        with self._lock:
            for _ in range(UNFROZEN_ROUNDS):
                with self.held(best_effort=True) as frozen:
                    victims = [
                        p for p in select(container_procs(self.id, self.listed)) if p.state != "Z"
                    ]
                    for p in victims:
                        try:
                            os.kill(p.host_pid, signal.SIGKILL)
                        except OSError:
                            continue
                killed += victims
                if frozen or not victims:
                    break
            if killed and not self.frozen:  # (held frozen by a caller: they land at its thaw)
                _wait_gone(self.id, self.listed, {p.host_pid for p in killed})
        return killed


def _wait_gone(container_id: str, listed: Path | None, host_pids: set[int]) -> None:
    """Until the killed processes are reaped: a zombie runs nothing, but the container's init
    (or the spared shell) reaps it a moment later, and until then it is still listed inside
    the container, where the next step (a listing, a probe, the final check) would see it.
    Zombies that outlast the wait are dead all the same, so the deadline only bounds it."""
    deadline = time.monotonic() + GONE_WAIT_S
    while time.monotonic() < deadline:
        if not any(p.host_pid in host_pids for p in container_procs(container_id, listed)):
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
