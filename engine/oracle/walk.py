"""The host walk of a home folder on this machine (the container's merged overlay, or any test
folder): `lstat` and Python's own sha256, depth-first with one descriptor per level, never
following a link. Incremental: a path whose (inode, size, mtime, ctime) is what it was at the
previous walk keeps its previous entry; after the baseline, objects the oracle cannot judge are
only listed and counted, within the bounds it is given."""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from engine.oracle.entries import (
    TEXT_BUDGET,
    TEXT_MAX,
    ManifestEntry,
    ManifestError,
    printable,
    type_of,
)
from engine.oracle.hashing import Hasher, HashJob
from engine.oracle.reading import OPEN_DIR
from engine.oracle.upper import ChangeSet

# ctime's clock ticks coarsely (a jiffy); anything changed this close to a walk is hashed again.
RACY_NS = 100_000_000
# What an agent's process racing the walk can make a call fail with.
_RACES = {errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EINVAL}
# Files are hashed in batches of this many files (or bytes), each read and hashed while the walk
# goes on; a batch's descriptors stay open until it is hashed.
_BATCH_FILES = 32
_BATCH_BYTES = 4 << 20


@dataclass(frozen=True, slots=True)
class Bounds:
    """How far one walk goes (manifest.py says why each bound is what it is)."""

    max_depth: int
    new_listed: int
    new_path_max: int
    new_count_max: int
    hash_any_max: int


# What a walk remembers of a path: its lstat key and the entry made from it.
_StatKey = tuple[int, int, int, int, int, int, int]


def _stat_key(st: os.stat_result) -> _StatKey:
    # inode, size, mtime, ctime (the agent cannot set ctime), and the judged metadata.
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode, st.st_uid, st.st_gid)


@dataclass
class HashCache:
    """What the previous walk saw, so the next walk hashes (and rebuilds) only what changed."""

    by_path: dict[str, tuple[_StatKey, ManifestEntry]] = field(default_factory=dict)
    hashed: int = 0  # files hashed by the last walk (for tests and the bench)


@dataclass(frozen=True)
class Judge:
    """What the oracle can judge after the baseline: the baseline's objects, and the fault's
    paths (home-relative) with the size their original bytes have."""

    known: dict[str, ManifestEntry]
    extra: dict[str, int] = field(default_factory=dict)
    # Paths hashed at every check whatever their lstat says (the planted and fault files): a
    # write through a shared mapping changes bytes without moving ctime.
    always: frozenset[str] = frozenset()
    _ends: dict[str, int] | None = field(default=None, repr=False, compare=False)

    def subtree(self, rel: str) -> list[tuple[str, ManifestEntry]]:
        """The baseline entries strictly below `rel`, in the walk's order (a contiguous run of
        the baseline, which the walk took depth-first)."""
        if self._ends is None:
            self._index()
        names = self._names
        start = self._pos[rel] + 1
        return [(n, self.known[n]) for n in names[start : self._ends[rel]]]

    def _index(self) -> None:
        names = [n for n in self.known if n != "."]
        pos = {n: i for i, n in enumerate(names)}
        ends: dict[str, int] = {}
        open_: list[str] = []
        for i, n in enumerate(names):
            while open_ and not n.startswith(open_[-1] + "/"):
                ends[open_.pop()] = i
            open_.append(n)
        for n in open_:
            ends[n] = len(names)
        object.__setattr__(self, "_names", names)
        object.__setattr__(self, "_pos", pos)
        object.__setattr__(self, "_ends", ends)

    def judges(self, rel: str) -> bool:
        return rel in self.known or rel in self.extra

    def worth_hashing(self, rel: str, size: int, hash_any_max: int) -> bool:
        """A judged file whose size differs from what it was has changed whatever its bytes:
        hashed only up to `hash_any_max` (to tell two edits apart for display)."""
        if size <= hash_any_max:
            return True
        before = self.known.get(rel)
        if before is not None and before.type == "file" and before.size == size:
            return True
        return self.extra.get(rel) == size


class Walk:
    """One walk. `open_file(name, dir_fd)` opens a regular file for reading (never following a
    link, never blocking)."""

    def __init__(
        self,
        bounds: Bounds,
        open_file: Callable[[str, int], int],
        cache: HashCache | None,
        keep_texts: bool,
        judge: Judge | None = None,
        scope: ChangeSet | None = None,
    ) -> None:
        self.bounds = bounds
        # The upper folder's change set (upper.py): what it does not name is taken from the
        # baseline without a look. Only with a judge (after the baseline).
        self.scope = scope if judge is not None else None
        self.open_file = open_file
        self.judge = judge
        self.new_listed = 0
        self.new_unlisted = 0
        self.new_capped = False  # stopped counting at new_count_max
        self.old = cache.by_path if cache is not None and not keep_texts else {}
        self.new_cache: dict[str, tuple[_StatKey, ManifestEntry]] = {}
        self.keep_texts = keep_texts
        self.texts: dict[str, bytes] = {}
        self.text_bytes = 0
        self.hashed = 0
        # A file being hashed holds its place (insertion order) as None until its batch is done.
        self.entries: dict[str, ManifestEntry | None] = {}
        self.not_descended: list[str] = []
        self.racy_after = time.time_ns() - RACY_NS
        self.hasher = Hasher()
        self.pending: list[HashJob] = []
        self.pending_bytes = 0

    def entry(self, rel: str, name: str, dir_fd: int, st: os.stat_result) -> ManifestEntry | None:
        """The entry for what lstat saw: the previous one when nothing changed, else a new one
        (None: a file now being hashed)."""
        key = _stat_key(st)
        old = self.old.get(rel)
        if old is not None and old[0] == key and not (self.judge and rel in self.judge.always):
            entry = old[1]
        else:
            kind = type_of(st.st_mode)
            if kind == "file":
                return self.file_entry(rel, name, dir_fd)
            target = os.fsdecode(os.readlink(name, dir_fd=dir_fd)) if kind == "symlink" else None
            entry = ManifestEntry(
                rel,
                kind,
                stat.S_IMODE(st.st_mode),
                st.st_uid,
                st.st_gid,
                target=target,
                ino=st.st_ino,
                mtime_ns=st.st_mtime_ns,
            )
        self.remember(rel, key, entry)
        return entry

    def file_entry(self, rel: str, name: str, dir_fd: int) -> ManifestEntry | None:
        """Open (never following links, never blocking) a regular file and queue it to be hashed
        (None), or the entry when it is not hashed: no longer a regular file, or not worth it."""
        fd = self.open_file(name, dir_fd)
        try:
            # Trust what we hash: the descriptor's own stat, taken before reading.
            fst = os.fstat(fd)
            entry = self.unhashed(rel, fst)
        except BaseException:
            os.close(fd)
            raise
        if entry is not None:
            os.close(fd)
            return entry
        self.queue(HashJob(rel, fd, fst, self.keep_texts and fst.st_size <= TEXT_MAX))
        return None

    def unhashed(self, rel: str, fst: os.stat_result) -> ManifestEntry | None:
        mode = stat.S_IMODE(fst.st_mode)
        if not stat.S_ISREG(fst.st_mode):
            # Swapped for something else between lstat and open; record what we really have.
            kind = type_of(fst.st_mode)
            return ManifestEntry(
                rel, kind, mode, fst.st_uid, fst.st_gid, ino=fst.st_ino, mtime_ns=fst.st_mtime_ns
            )
        if self.judge is None or self.judge.worth_hashing(
            rel, fst.st_size, self.bounds.hash_any_max
        ):
            return None
        entry = ManifestEntry(
            rel, "file", mode, fst.st_uid, fst.st_gid, fst.st_size, None, None, fst.st_ino,
            fst.st_mtime_ns,
        )  # fmt: skip
        self.remember(rel, _stat_key(fst), entry)
        return entry

    def take_baseline(self, rel: str, subtree: bool) -> None:
        """The baseline's entry for `rel` (and, with `subtree`, those below it), as they were."""
        assert self.judge is not None
        base = self.judge.known[rel]
        self.entries[rel] = base
        if subtree and base.type == "dir":
            for sub_rel, sub in self.judge.subtree(rel):
                self.entries[sub_rel] = sub

    def put(self, rel: str, entry: ManifestEntry | None) -> None:
        if entry is not None:  # None: a file queued to be hashed, its place already held
            self.entries[rel] = entry

    def queue(self, job: HashJob) -> None:
        self.entries[job.rel] = None  # its place in the walk's order, until it is hashed
        self.pending.append(job)  # the job owns its descriptor from here on
        self.pending_bytes += job.st.st_size
        if len(self.pending) >= _BATCH_FILES or self.pending_bytes >= _BATCH_BYTES:
            batch, self.pending, self.pending_bytes = self.pending, [], 0
            self.hasher.submit(batch)
            self.collect()

    def collect(self, wait: bool = False) -> None:
        """Turn the hashed files into entries, in the order the walk met them."""
        for job in self.hasher.done(wait):
            fst = job.st
            entry = ManifestEntry(
                job.rel, "file", stat.S_IMODE(fst.st_mode), fst.st_uid, fst.st_gid, fst.st_size,
                job.digest, None, fst.st_ino, fst.st_mtime_ns,
            )  # fmt: skip
            self.hashed += 1
            if job.text is not None and self.text_bytes + len(job.text) <= TEXT_BUDGET:
                self.texts[job.rel] = job.text
                self.text_bytes += len(job.text)
            self.remember(job.rel, _stat_key(fst), entry)
            if job.rel in self.entries and self.entries[job.rel] is None:  # still its place
                self.entries[job.rel] = entry

    def remember(self, rel: str, key: _StatKey, entry: ManifestEntry) -> None:
        if key[3] < self.racy_after:  # ctime
            self.new_cache[rel] = (key, entry)

    def new_object(
        self, rel: str | None, name: str, dir_fd: int, ent: os.DirEntry, depth: int
    ) -> None:
        """An object the oracle cannot judge, and what lies below it: listed while there is
        room, else only counted; never hashed. Bounded in time and memory by the caps above."""
        stack: list[tuple[int, str | None, list[os.DirEntry], int]] = []
        try:
            self._note_new(rel, name, dir_fd)
            if self._descend_new(ent, depth):
                sub = self._open_new(name, dir_fd)
                if sub is not None:
                    stack.append((sub, rel, self._list_new(sub), depth + 1))
            while stack:
                fd, prefix, entries, level = stack[-1]
                if not entries:
                    os.close(fd)
                    stack.pop()
                    continue
                child = entries.pop()
                child_rel = (
                    prefix + "/" + child.name
                    if prefix is not None
                    and len(prefix) + len(child.name) < self.bounds.new_path_max
                    else None
                )
                self._note_new(child_rel, child.name, fd)
                if self._descend_new(child, level):
                    sub = self._open_new(child.name, fd)
                    if sub is not None:
                        stack.append((sub, child_rel, self._list_new(sub), level + 1))
        finally:
            for fd, _, _, _ in stack:
                os.close(fd)

    def _list_new(self, dir_fd: int) -> list[os.DirEntry]:
        """A new folder's entries, at most what the count has room for (reversed, to pop)."""
        room = self.bounds.new_count_max - self.new_listed - self.new_unlisted
        try:
            with os.scandir(dir_fd) as it:
                entries = list(itertools.islice(it, max(room, 0) + 1))
        except OSError:
            return []
        if len(entries) > room:
            self.new_capped = True
            entries = entries[:room]
        return sorted(entries, key=lambda e: e.name, reverse=True)

    def _descend_new(self, ent: os.DirEntry, depth: int) -> bool:
        if self.new_listed + self.new_unlisted >= self.bounds.new_count_max:
            self.new_capped = True
            return False
        if depth + 2 > self.bounds.max_depth:
            return False
        try:
            return ent.is_dir(follow_symlinks=False)
        except OSError:
            return False

    @staticmethod
    def _open_new(name: str, dir_fd: int) -> int | None:
        try:
            return os.open(name, OPEN_DIR, dir_fd=dir_fd)
        except OSError:
            return None  # gone or swapped meanwhile

    def _note_new(self, rel: str | None, name: str, dir_fd: int) -> None:
        if (
            rel is None
            or self.new_listed >= self.bounds.new_listed
            or len(rel) > self.bounds.new_path_max
        ):
            self.new_unlisted += 1
            return
        try:
            st = os.lstat(name, dir_fd=dir_fd)
            kind = type_of(st.st_mode)
            target = os.fsdecode(os.readlink(name, dir_fd=dir_fd)) if kind == "symlink" else None
        except OSError:
            return  # gone meanwhile
        self.entries[rel] = ManifestEntry(
            rel,
            kind,
            stat.S_IMODE(st.st_mode),
            st.st_uid,
            st.st_gid,
            st.st_size if kind == "file" else None,
            None,
            target,
            st.st_ino,
            st.st_mtime_ns,
        )
        self.new_listed += 1

    def walk(self, home_fd: int, baseline: bool) -> None:
        home_st = os.fstat(home_fd)
        self.entries["."] = ManifestEntry(
            ".",
            "dir",
            stat.S_IMODE(home_st.st_mode),
            home_st.st_uid,
            home_st.st_gid,
            ino=home_st.st_ino,
            mtime_ns=home_st.st_mtime_ns,
        )
        # Depth-first with one open descriptor per level: paths never grow past PATH_MAX.
        stack: list[tuple[int, str, Iterator[os.DirEntry], int]] = []
        stack.append((home_fd, "", iter(_listdir(home_fd)), 0))
        try:
            while stack:
                dir_fd, prefix, it, depth = stack[-1]
                ent = next(it, None)
                if ent is None:
                    stack.pop()
                    if dir_fd != home_fd:
                        os.close(dir_fd)
                    continue
                name = ent.name
                rel = prefix + name
                if self.judge is not None and not self.judge.judges(rel):
                    self.new_object(rel, name, dir_fd, ent, depth)
                    continue
                scope = self.scope
                if scope is not None and rel in self.judge.known and scope.unchanged(rel):
                    self.take_baseline(rel, subtree=True)  # only in the image's layers
                    continue
                try:
                    if rel not in self.old and ent.is_file(follow_symlinks=False):
                        # Nothing to compare its lstat with: open it at once (the descriptor's
                        # own stat is what counts), unless it has just become a folder.
                        entry = self.file_entry(rel, name, dir_fd)
                        if entry is None or entry.type != "dir":
                            self.put(rel, entry)
                            continue
                    st = ent.stat(follow_symlinks=False)
                    entry = self.entry(rel, name, dir_fd, st)
                except OSError as exc:
                    if exc.errno not in _RACES:
                        raise
                    # The agent's processes changed it while we looked: look once more.
                    try:
                        st = os.lstat(name, dir_fd=dir_fd)
                        entry = self.entry(rel, name, dir_fd, st)
                    except OSError as again:
                        if again.errno not in _RACES:
                            raise
                        continue  # still changing under us, or gone: absent now
                self.put(rel, entry)
                if entry is None or entry.type != "dir":
                    continue
                if (
                    scope is not None
                    and not scope.descend(rel)
                    and (base := self.judge.known.get(rel)) is not None
                    and base.type == "dir"
                ):
                    for sub_rel, sub in self.judge.subtree(rel):
                        self.entries[sub_rel] = sub  # nothing below was copied up
                    continue
                if st.st_dev != home_st.st_dev:
                    self.not_descended.append(rel)  # another filesystem (-xdev)
                    continue
                if depth + 2 > self.bounds.max_depth:  # its children would lie deeper than allowed
                    if baseline:
                        raise ManifestError(
                            f"{printable(rel)}: the home is nested more than "
                            f"{self.bounds.max_depth} levels deep at the baseline"
                        )
                    self.not_descended.append(rel)
                    continue
                try:
                    sub_fd = os.open(name, OPEN_DIR, dir_fd=dir_fd)
                except OSError as exc:
                    if exc.errno not in _RACES:
                        raise
                    # Swapped for something else since lstat: record that instead.
                    with contextlib.suppress(OSError):
                        self.put(rel, self.entry(rel, name, dir_fd, os.lstat(name, dir_fd=dir_fd)))
                        continue
                    self.entries.pop(rel, None)
                    continue
                sub_st = os.fstat(sub_fd)
                if (sub_st.st_ino, sub_st.st_dev) != (st.st_ino, st.st_dev):
                    # Another folder was put there since lstat: describe the one we will list.
                    self.put(rel, self.entry(rel, name, dir_fd, sub_st))
                    if sub_st.st_dev != home_st.st_dev:
                        os.close(sub_fd)
                        self.not_descended.append(rel)
                        continue
                stack.append((sub_fd, rel + "/", iter(_listdir(sub_fd)), depth + 1))
            batch, self.pending = self.pending, []
            self.hasher.submit(batch, last=True)
            self.collect(wait=True)
        except BaseException:
            for job in self.pending:
                os.close(job.fd)
            self.hasher.abandon()
            raise
        finally:
            for dir_fd, _, _, _ in stack:
                if dir_fd != home_fd:
                    os.close(dir_fd)

    def finished(self) -> dict[str, ManifestEntry]:
        """The entries, every file hashed."""
        if any(e is None for e in self.entries.values()):
            raise ManifestError("a file queued to be hashed was never hashed")  # a bug of ours
        return self.entries  # type: ignore[return-value]


def _listdir(dir_fd: int) -> list[os.DirEntry]:
    # Read the whole folder at once so its directory stream is closed before we descend.
    try:
        with os.scandir(dir_fd) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError as exc:
        if exc.errno not in _RACES:
            raise
        return []
