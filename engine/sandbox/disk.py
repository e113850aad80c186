"""A bound on what an agent may write to its container's disk.

Docker's overlay2 driver cannot cap a container's writable layer on ext4 (`--storage-opt size`
needs xfs with project quotas), and `yes > file` fills a host disk in minutes, from a command or
from a process left in the background. So a watcher thread per container asks the guard twice a
second: the host filesystem's free space (one statvfs) says whether anything is being written;
only when the host lost more than the limit since the container started is the container's own
writable layer (overlay2's upper directory, read from the host) summed, and only its own growth
since the last sum counts as this container writing: other episodes' writes on the same disk
never stop an agent that sits still over its limit. Over the limit and writing, every process of
the agent but its shell is killed from the host (as a timeout would), and the next observation
says why; the files stay, so the agent can delete them and go on. Only for a local engine run as
root, which reads those folders.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

DEFAULT_STORAGE_MB = 10_240  # Harbor's default `storage_mb` for a task environment
HOST_FLOOR_BYTES = 1 << 30  # below this much free space on the host, writers are stopped
CHECK_EVERY_S = 0.5
WALK_EVERY_S = 1.0  # the layer is summed at most this often (a flood of small files is slow)
WALK_BUDGET_S = 1.0
GROWTH_BYTES = 1 << 20  # the host lost less than this in CHECK_EVERY_S: nothing is writing


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def layer_bytes(root: Path, budget_s: float = WALK_BUDGET_S) -> tuple[int, bool]:
    """Disk space the files under `root` take (allocated blocks, links not followed), and
    whether every folder was read: a walk that runs past `budget_s` stops with a lower bound."""
    total = 0
    deadline = time.monotonic() + budget_s
    folders = [str(root)]
    while folders:
        try:
            entries = os.scandir(folders.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += st.st_blocks * 512
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
        if folders and time.monotonic() > deadline:
            return total, False
    return total, True


class DiskGuard:
    """`check()`, called every CHECK_EVERY_S: why the agent's writing must stop, or None."""

    def __init__(self, upper: Path, limit_bytes: int) -> None:
        self.upper = upper
        self.limit = limit_bytes
        self.free_at_start = free_bytes(upper)
        self._last_free = self.free_at_start
        self._walked = float("-inf")
        self._layer = 0  # the layer's size at the last sum

    def check(self) -> str | None:
        try:
            free = free_bytes(self.upper)
        except OSError:
            return None
        writing = self._last_free - free >= GROWTH_BYTES
        self._last_free = free
        if not writing:
            return None  # (deleting what was too much is never stopped)
        low = free < HOST_FLOOR_BYTES
        if not low and self.free_at_start - free < self.limit:
            return None
        now = time.monotonic()
        if now - self._walked < WALK_EVERY_S:
            return None
        self._walked = now
        before = self._layer
        self._layer, whole = layer_bytes(self.upper)
        if whole and self._layer - before < GROWTH_BYTES:
            return None  # this layer is not growing: the host's writer is someone else
        if low:
            return f"the host's disk has under {HOST_FLOOR_BYTES >> 20} MiB free"
        if self._layer <= self.limit:
            return None
        return f"the container's disk use passed its limit of {self.limit >> 20} MiB"

    def settle(self) -> None:
        """After the writers were killed: the layer as they left it, so that what they wrote
        before they died is not taken for growth at the next sum."""
        self._layer, _ = layer_bytes(self.upper)


def kill_from_host(container_id: str, uid: int, spare: set[int]) -> list[tuple[int, str]]:
    """SIGKILL every live process of `container_id` running as `uid`, except those whose pid in
    the container is in `spare`; (pid in the container, name) of each. A few rounds, for what
    was forked meanwhile."""
    killed: list[tuple[int, str]] = []
    for _ in range(5):
        hit = 0
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                if container_id not in (proc / "cgroup").read_text():
                    continue
                status = dict(
                    line.split(":", 1) for line in (proc / "status").read_text().splitlines()
                )
            except (OSError, ValueError):
                continue
            if status.get("State", "").split()[:1] == ["Z"]:
                continue
            if status.get("Uid", "").split()[:1] != [str(uid)]:
                continue
            inner = status.get("NSpid", "").split()
            pid = int(inner[-1]) if inner else int(proc.name)
            if pid in spare:
                continue
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except OSError:
                continue
            hit += 1
            killed.append((pid, status.get("Name", "").strip()))
        if not hit:
            break
    return killed


class DiskWatch:
    """The guard asked from its own thread; what it did waits in `take_note()` for the next
    observation."""

    def __init__(
        self,
        guard: DiskGuard,
        container_id: str,
        uid: int,
        spare: Callable[[], set[int]],
    ) -> None:
        self.guard = guard
        self.container_id = container_id
        self.uid = uid
        self.spare = spare
        self._note = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="depthtui-disk-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def take_note(self) -> str:
        with self._lock:
            note, self._note = self._note, ""
        return note

    def _run(self) -> None:
        while not self._stop.wait(CHECK_EVERY_S):
            reason = self.guard.check()
            if reason is None:
                continue
            said = f"{reason}: every process of the agent but its shell was killed"
            ask = "delete what you wrote that is not needed"
            # Said before the kill: the command it ends then always carries the note.
            with self._lock:
                self._note = f"{said}; {ask}"
            killed = kill_from_host(self.container_id, self.uid, self.spare())
            self.guard.settle()
            if killed:
                names = ", ".join(f"{name} (pid {pid})" for pid, name in killed[:8])
                more = f" and {len(killed) - 8} more" if len(killed) > 8 else ""
                with self._lock:
                    if self._note:  # not taken yet
                        self._note = f"{said} ({names}{more}); {ask}"


def watch_for(
    upper: str | None,
    storage_mb: int | None,
    container_id: str,
    uid: int,
    spare: Callable[[], set[int]],
) -> DiskWatch | None:
    """A started watch on a container's writable layer, when this process can read it (a local
    engine, as root); None otherwise."""
    if not upper or not os.access(upper, os.R_OK | os.X_OK):
        return None
    limit_mb = storage_mb if storage_mb and storage_mb > 0 else DEFAULT_STORAGE_MB
    try:
        watch = DiskWatch(DiskGuard(Path(upper), limit_mb << 20), container_id, uid, spare)
    except OSError:
        return None
    watch.start()
    return watch
