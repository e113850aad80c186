"""A bound on what an agent may write to its container's disk, and on how many new objects.

Docker's overlay2 driver cannot cap a container's writable layer on ext4 (`--storage-opt size`
needs xfs with project quotas), and `yes > file` fills a host disk in minutes, from a command or
from a process left in the background. So a watcher thread per container asks the guard twice a
second. The host filesystem's free space and free inodes (one statvfs) say whether anything is
being written; when the host lost more than a limit since the container started, and every
PERIODIC_WALK_S anyway (a sparse file takes no space on the host, but a snapshot writes it out
in full), the container's own writable layer (overlay2's upper directory, read from the host)
is summed: apparent sizes (`truncate -s 3G f` counts as 3 GiB) and objects. Only its own growth
since the last sum counts as this container writing: other episodes' writes on the same disk
never stop an agent that sits still over its limit. Over a limit and writing, every process of
the agent but its shell is killed from the host (freezer.py), and the next observation says why;
the files stay, so the agent can delete them and go on. A container still over a limit when its
segment ends is never committed (`over_limits`): the episode is the agent's failure. Only for a
local engine run as root, which reads those folders. See docs/sandbox.md.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DEFAULT_STORAGE_MB = 10_240  # Harbor's default `storage_mb` for a task environment
# New files, folders and links a container's writable layer may hold (a flood of empty files or
# of nested folders costs no disk but makes every walk, the snapshot and the verifier slow).
# DEPTHTUI_OBJECT_LIMIT overrides it.
DEFAULT_OBJECT_LIMIT = 500_000
# Folders nested deeper than this in the writable layer are not walked; a layer that deep is over
# its object limit (no task needs it; PATH_MAX is 4096 bytes).
MAX_LAYER_DEPTH = 1000
HOST_FLOOR_BYTES = 1 << 30  # below this much free space on the host, writers are stopped
CHECK_EVERY_S = 0.5
WALK_EVERY_S = 1.0  # the layer is summed at most this often (a flood of small files is slow)
PERIODIC_WALK_S = 5.0  # and at least this often, for what statvfs cannot see (sparse files)
WALK_BUDGET_S = 1.0
GROWTH_BYTES = 1 << 20  # the host lost less than this in CHECK_EVERY_S: nothing is writing
GROWTH_OBJECTS = 1000  # likewise for inodes

_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def object_limit() -> int:
    raw = os.environ.get("DEPTHTUI_OBJECT_LIMIT", "")
    return int(raw) if raw.strip().isdigit() and int(raw) > 0 else DEFAULT_OBJECT_LIMIT


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _free_files(path: Path) -> int:
    return os.statvfs(path).f_favail


# Holes (apparent size past the blocks allocated) the agent's files may hold in all. A snapshot
# (`docker commit`) writes a hole out in full, at disk speed: `truncate -s 9500M f`, under a
# 10 GiB storage limit, made a 10 GB image and a commit past Docker's 120 s timeout (issue 24).
# Past this allowance the container is never committed (storage_limit), so what is committed is
# at most the storage limit in real data plus this much.
HOLES_ALLOWANCE = 1 << 30


@dataclass(frozen=True)
class LayerUsage:
    bytes: int  # apparent: the larger of size and allocated blocks, per object
    objects: int
    whole: bool  # every folder was read (else both are lower bounds)
    too_deep: bool = False  # folders nested deeper than MAX_LAYER_DEPTH
    holes: int = 0  # apparent size past the allocated blocks, summed over regular files


def layer_usage(
    root: Path, max_objects: int | None = None, budget_s: float | None = None
) -> LayerUsage:
    """What the files under `root` take, walked by descriptor (links never followed, no path
    length limit). Stops early, with lower bounds, past `budget_s` or `max_objects`."""
    deadline = None if budget_s is None else time.monotonic() + budget_s
    try:
        root_fd = os.open(os.fspath(root), _OPEN_DIR)
    except OSError:
        return LayerUsage(0, 0, False)
    total = objects = holes = 0
    too_deep = False
    # Depth-first, one open descriptor per level: (folder, its subfolders not yet walked).
    stack: list[tuple[int, list[str]]] = []
    fd: int | None = root_fd
    try:
        while True:
            if fd is not None:
                size, count, hollow, names = _read_folder(fd)
                total += size
                objects += count
                holes += hollow
                stack.append((fd, names))
                fd = None
            if not stack:
                break
            if (deadline is not None and time.monotonic() > deadline) or (
                max_objects is not None and objects > max_objects
            ):
                return LayerUsage(total, objects, False, too_deep, holes)
            parent, names = stack[-1]
            if not names:
                os.close(parent)
                stack.pop()
                continue
            name = names.pop()
            if len(stack) >= MAX_LAYER_DEPTH:
                too_deep = True
                continue
            try:
                fd = os.open(name, _OPEN_DIR, dir_fd=parent)
            except OSError:
                fd = None  # gone or swapped meanwhile
        return LayerUsage(total, objects, not too_deep, too_deep, holes)
    finally:
        for open_fd, _ in stack:
            os.close(open_fd)


def _read_folder(fd: int) -> tuple[int, int, int, list[str]]:
    """(bytes, objects, holes) of a folder's entries and the names of its subfolders."""
    total = count = holes = 0
    names = []
    try:
        with os.scandir(fd) as it:
            for entry in it:
                count += 1
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += max(st.st_size, st.st_blocks * 512)
                if stat.S_ISREG(st.st_mode):
                    holes += max(st.st_size - st.st_blocks * 512, 0)
                elif stat.S_ISDIR(st.st_mode):
                    names.append(entry.name)
    except OSError:
        pass
    return total, count, holes, names


def layer_bytes(root: Path, budget_s: float = WALK_BUDGET_S) -> tuple[int, bool]:
    """Apparent bytes under `root` and whether every folder was read."""
    usage = layer_usage(root, budget_s=budget_s)
    return usage.bytes, usage.whole


class DiskGuard:
    """`check()`, called every CHECK_EVERY_S: why the agent's writing must stop, or None."""

    def __init__(self, upper: Path, limit_bytes: int, objects: int | None = None) -> None:
        self.upper = upper
        self.limit = limit_bytes
        self.object_limit = objects or object_limit()
        self.free_at_start = free_bytes(upper)
        self.files_at_start = _free_files(upper)
        self._last_free = self.free_at_start
        self._last_files = self.files_at_start
        self._walked = time.monotonic()
        self._layer = LayerUsage(0, 0, True)  # the layer at the last sum

    def check(self) -> str | None:
        try:
            free = free_bytes(self.upper)
            files = _free_files(self.upper)
        except OSError:
            return None
        writing = (
            self._last_free - free >= GROWTH_BYTES or self._last_files - files >= GROWTH_OBJECTS
        )
        self._last_free, self._last_files = free, files
        now = time.monotonic()
        periodic = now - self._walked >= PERIODIC_WALK_S
        if not writing and not periodic:
            return None  # (deleting what was too much is never stopped)
        low = free < HOST_FLOOR_BYTES
        past = (
            self.free_at_start - free >= self.limit
            or self.files_at_start - files >= self.object_limit
        )
        if not (low or past or periodic):
            return None
        if now - self._walked < WALK_EVERY_S:
            return None
        self._walked = now
        before = self._layer
        self._layer = layer_usage(self.upper, self.object_limit + 1, WALK_BUDGET_S)
        grew = (
            self._layer.bytes - before.bytes >= GROWTH_BYTES
            or self._layer.objects - before.objects >= GROWTH_OBJECTS
        )
        if self._layer.whole and not grew:
            return None  # this layer is not growing: the host's writer is someone else
        if low and writing:
            return f"the host's disk has under {HOST_FLOOR_BYTES >> 20} MiB free"
        if self._layer.bytes > self.limit:
            return f"the container's disk use passed its limit of {self.limit >> 20} MiB"
        if self._layer.objects > self.object_limit or self._layer.too_deep:
            return (
                f"the container holds more new files and folders than its limit of "
                f"{self.object_limit} (or folders nested over {MAX_LAYER_DEPTH} deep)"
            )
        if self._layer.holes > HOLES_ALLOWANCE:
            return (
                f"the container's sparse files hold more than {HOLES_ALLOWANCE >> 20} MiB of "
                "holes (a snapshot writes them out in full)"
            )
        return None

    def settle(self) -> None:
        """After the writers were killed: the layer as they left it, so that what they wrote
        before they died is not taken for growth at the next sum."""
        self._layer = layer_usage(self.upper, self.object_limit + 1, WALK_BUDGET_S)


def over_limits(guard: DiskGuard, usage: LayerUsage | None) -> tuple[str, str] | None:
    """(error kind, reason) when a layer is over its guard's limits, to end the episode as the
    agent's failure before any commit; None when within them."""
    if usage is None:
        return None
    if usage.objects > guard.object_limit or usage.too_deep:
        deep = f" or nests folders over {MAX_LAYER_DEPTH} deep" if usage.too_deep else ""
        return (
            "object_limit",
            f"the agent left more than {guard.object_limit} new files and folders in the "
            f"container{deep} (counted {usage.objects}); it was not snapshotted or graded",
        )
    if usage.bytes > guard.limit:
        return (
            "storage_limit",
            f"the agent left {usage.bytes >> 20} MiB in the container's writable layer (apparent "
            f"sizes), over its storage limit of {guard.limit >> 20} MiB; it was not snapshotted "
            "or graded",
        )
    if usage.holes > HOLES_ALLOWANCE:
        return (
            "storage_limit",
            f"the agent left sparse files holding {usage.holes >> 20} MiB of holes, over the "
            f"allowance of {HOLES_ALLOWANCE >> 20} MiB (a snapshot writes holes out in full); it "
            "was not snapshotted or graded",
        )
    return None


# How long the next observation waits for a kill under way to name what it killed (a kill is a
# freeze, a SIGKILL each and a thaw: milliseconds, more on a loaded machine).
KILL_NOTE_WAIT_S = 5.0


class DiskWatch:
    """The guard asked from its own thread; what it did waits in `take_note()` for the next
    observation."""

    def __init__(self, guard: DiskGuard, kill: Callable[[], list[tuple[int, str]]]) -> None:
        self.guard = guard
        self.kill = kill
        self._note = ""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._settled = threading.Event()  # clear while a kill is under way
        self._settled.set()
        self._thread = threading.Thread(target=self._run, name="depthtui-disk-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def take_note(self) -> str:
        if not self._note and self._settled.is_set():
            return ""  # (the kill sets its note before it starts: nothing is under way)
        # A command the kill ended can come back before the kill has named what it killed.
        self._settled.wait(KILL_NOTE_WAIT_S)
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
                self._settled.clear()
            try:
                killed = self.kill()
            except Exception:  # the container went meanwhile (the episode ended)
                killed = []
            if killed:
                names = ", ".join(f"{name} (pid {pid})" for pid, name in killed[:8])
                more = f" and {len(killed) - 8} more" if len(killed) > 8 else ""
                with self._lock:
                    if self._note:  # not taken yet (only after KILL_NOTE_WAIT_S)
                        self._note = f"{said} ({names}{more}); {ask}"
            self._settled.set()
            self.guard.settle()


def watch_for(
    upper: str | None,
    storage_mb: int | None,
    kill: Callable[[], list[tuple[int, str]]],
) -> DiskWatch | None:
    """A started watch on a container's writable layer, when this process can read it (a local
    engine, as root); None otherwise."""
    if not upper or not os.access(upper, os.R_OK | os.X_OK):
        return None
    limit_mb = storage_mb if storage_mb and storage_mb > 0 else DEFAULT_STORAGE_MB
    try:
        watch = DiskWatch(DiskGuard(Path(upper), limit_mb << 20), kill)
    except OSError:
        return None
    watch.start()
    return watch
