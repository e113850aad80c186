"""The root-taken manifest of the agent's home: what every object there is, by property.

The agent must not be able to influence it, so no binary of the task image runs to take it:

- primarily, the container's merged overlay folder is walked from the host (`Sandbox.rootfs()`),
  as root, with `lstat` and Python's own sha256. Symlinks are never followed, fifos and devices are
  never opened, every open is `O_NOFOLLOW | O_NONBLOCK` relative to its parent folder's descriptor;
- otherwise the daemon's tar stream of the home (`get_archive`) is parsed with `tarfile`; the daemon
  reads the files as root itself, so nothing inside the image is trusted either.

The host walk is incremental: a path whose (inode, size, mtime, ctime) is what it was at the
previous walk keeps its previous hash. The agent can set mtime but not ctime, and a file whose
ctime is too close to the walk's start is hashed again next time (the "racy clean" rule: the
kernel's clock for ctime is coarse, so a write just after we looked could leave ctime unchanged).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import itertools
import os
import stat
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, Protocol

EntryType = Literal["file", "dir", "symlink", "fifo", "other"]

# No object more than this many levels below the home is recorded. A baseline deeper than this is
# refused; later, a deeper subtree can only hold objects created after the baseline (which are
# never judged), so it is recorded as cut short instead of failing the episode.
MAX_DEPTH = 1000
# Regular files up to this size whose bytes look like text are kept from the baseline, so a change
# can be shown as a unified diff; the total kept is bounded too.
TEXT_MAX = 64 * 1024
TEXT_BUDGET = 16 * 1024 * 1024
# ctime's clock ticks coarsely (a jiffy); anything changed this close to a walk is hashed again.
RACY_NS = 100_000_000
# Objects that did not exist at the baseline are never judged (a new file is never collateral),
# so after the baseline they are not hashed, only listed (the first NEW_LISTED whose path is at
# most NEW_PATH_MAX long) and counted up to NEW_COUNT_MAX (then the count is a lower bound: the
# disk guard, which counts the writable layer, enforces the object limit). A judged file whose
# size differs from the baseline's has changed whatever its bytes, so it is hashed only when it
# is at most HASH_ANY_MAX (to tell two edits apart for display): a sparse 100 GB file put at a
# baseline path costs no hashing.
NEW_LISTED = 1000
NEW_PATH_MAX = 4096
NEW_COUNT_MAX = 20_000
HASH_ANY_MAX = 16 * 1024 * 1024

_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NOATIME = getattr(os, "O_NOATIME", 0)
# What an agent's process racing the walk can make a call fail with.
_RACES = {errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EINVAL}


class ManifestError(RuntimeError):
    """The manifest could not be taken (a harness error, never the model's fault)."""


@dataclass(frozen=True, slots=True)
class ManifestEntry:
    """One object under the home. `path` is relative to the home; the home itself is "."."""

    path: str
    type: EntryType
    mode: int  # permission bits, including setuid/setgid/sticky
    uid: int
    gid: int = 0  # recorded for display and readability checks; not a change kind
    size: int | None = None  # regular files only
    sha256: str | None = None  # regular files only
    target: str | None = None  # symlinks only
    # Identity where the source knows it (host walk; 0 from a tar stream): the inode, and mtime
    # because a freed inode number is soon reused. Used only to tell the fault's own pipe from a
    # look-alike, never as a change kind.
    ino: int = 0
    mtime_ns: int = 0

    def props(self) -> dict:
        """The judged properties, JSON-ready (paths and targets made printable)."""
        out: dict = {"type": self.type, "mode": f"{self.mode:04o}", "uid": self.uid}
        out["gid"] = self.gid
        if self.type == "file":
            out["size"] = self.size
            out["sha256"] = self.sha256
        if self.type == "symlink":
            out["target"] = printable(self.target or "")
        return out

    def same_properties(self, other: ManifestEntry) -> bool:
        """Equal in everything the oracle compares (identity excluded)."""
        return (
            self.type == other.type
            and self.mode == other.mode
            and self.uid == other.uid
            and self.gid == other.gid
            and self.size == other.size
            and self.sha256 == other.sha256
            and self.target == other.target
        )


@dataclass(frozen=True)
class Manifest:
    """Every object under `home` (a path inside the container), keyed by home-relative path."""

    home: str
    entries: dict[str, ManifestEntry]
    source: Literal["rootfs", "tar", "host"] = "host"
    # Small text files' bytes, when the walk was asked to keep them (the baseline).
    texts: dict[str, bytes] = field(default_factory=dict)
    # Folders not descended into: other filesystems, or deeper than MAX_DEPTH.
    not_descended: tuple[str, ...] = ()
    taken_at: float = 0.0
    # Objects not in the judged set (new since the baseline) that are counted but not in
    # `entries` (past NEW_LISTED, or with paths longer than NEW_PATH_MAX).
    new_unlisted: int = 0
    new_capped: bool = False  # counting stopped at NEW_COUNT_MAX: new_unlisted is a lower bound

    def abspath(self, rel: str) -> str:
        return abspath(self.home, rel)

    def relpath(self, path: str) -> str | None:
        return relpath(self.home, path)

    def get(self, path: str) -> ManifestEntry | None:
        """Look up by absolute container path."""
        rel = self.relpath(path)
        return None if rel is None else self.entries.get(rel)

    def __len__(self) -> int:
        return len(self.entries)


def abspath(home: str, rel: str) -> str:
    home = home.rstrip("/") or "/"
    if rel == ".":
        return home
    return f"{home}/{rel}" if home != "/" else f"/{rel}"


def relpath(home: str, path: str) -> str | None:
    """Home-relative form of an absolute container path; None when it is outside the home."""
    home = home.rstrip("/")
    path = path.rstrip("/") if path != "/" else path
    if path == home or (home == "" and path == "/"):
        return "."
    if path.startswith(home + "/"):
        return path[len(home) + 1 :]
    return None


def printable(path: str) -> str:
    """A path as text safe to store and show: undecodable bytes become \\xNN escapes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _type_of(mode: int) -> EntryType:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISFIFO(mode):
        return "fifo"
    return "other"


def _looks_like_text(data: bytes) -> bool:
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# ---------------------------------------------------------------------------------------------
# The host walk (a folder on this machine: the container's merged overlay, or any test folder)


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

    def judges(self, rel: str) -> bool:
        return rel in self.known or rel in self.extra

    def worth_hashing(self, rel: str, size: int) -> bool:
        if size <= HASH_ANY_MAX:
            return True
        before = self.known.get(rel)
        if before is not None and before.type == "file" and before.size == size:
            return True
        return self.extra.get(rel) == size


# Read size for hashing: a typical file is read (and hashed) in one call, a big one in pieces.
_HASH_CHUNK = 1 << 20


def _hash_fd(fd: int, size_hint: int = _HASH_CHUNK) -> str:
    """sha256 of what `fd` holds from its current offset to its end (however it grew since its
    size was taken). One read sized from `size_hint` takes a typical file whole: per file, the
    time goes to system calls and allocation more than to hashing (hashlib.file_digest's fresh
    256 KiB buffer per file cost more than hashing a 20 KB file: the full hash of 2,000 such
    files took 1.6x as long, in alternated runs on a loaded machine). Hashing on worker threads
    was tried and lost on a loaded machine (where episodes run side by side), so it stays on
    the walking thread."""
    want = min(size_hint, _HASH_CHUNK - 1) + 1
    first = os.read(fd, want)
    digest = hashlib.sha256(first)
    if len(first) == want:  # a regular file reads short only at its end: there may be more
        while chunk := os.read(fd, _HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _read_fd(fd: int, limit: int) -> bytes:
    chunks, left = [], limit + 1
    while left > 0:
        chunk = os.pread(fd, min(left, 1 << 20), limit + 1 - left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _open_file(name: str, dir_fd: int) -> int:
    try:
        return os.open(name, _OPEN_FILE | _NOATIME, dir_fd=dir_fd)
    except PermissionError:
        # O_NOATIME needs ownership or CAP_FOWNER; without it we still read (atime is not judged).
        return os.open(name, _OPEN_FILE, dir_fd=dir_fd)


class _Walk:
    def __init__(
        self, cache: HashCache | None, keep_texts: bool, judge: Judge | None = None
    ) -> None:
        self.judge = judge
        self.new_listed = 0
        self.new_unlisted = 0
        self.new_capped = False  # stopped counting at NEW_COUNT_MAX
        self.old = cache.by_path if cache is not None and not keep_texts else {}
        self.new_cache: dict[str, tuple[_StatKey, ManifestEntry]] = {}
        self.keep_texts = keep_texts
        self.texts: dict[str, bytes] = {}
        self.text_bytes = 0
        self.hashed = 0
        self.entries: dict[str, ManifestEntry] = {}
        self.not_descended: list[str] = []
        self.racy_after = time.time_ns() - RACY_NS

    def entry(self, rel: str, name: str, dir_fd: int, st: os.stat_result) -> ManifestEntry:
        """The entry for what lstat saw: the previous one when nothing changed, else a new one."""
        key = _stat_key(st)
        old = self.old.get(rel)
        if old is not None and old[0] == key:
            entry = old[1]
        else:
            kind = _type_of(st.st_mode)
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

    def file_entry(self, rel: str, name: str, dir_fd: int) -> ManifestEntry:
        """Open (never following links, never blocking) and hash a regular file."""
        fd = _open_file(name, dir_fd)
        try:
            # Trust what we hash: the descriptor's own stat, taken before reading.
            fst = os.fstat(fd)
            mode = stat.S_IMODE(fst.st_mode)
            if not stat.S_ISREG(fst.st_mode):
                # Swapped for something else between lstat and open; record what we really have.
                kind = _type_of(fst.st_mode)
                return ManifestEntry(
                    rel,
                    kind,
                    mode,
                    fst.st_uid,
                    fst.st_gid,
                    ino=fst.st_ino,
                    mtime_ns=fst.st_mtime_ns,
                )
            if self.judge is not None and not self.judge.worth_hashing(rel, fst.st_size):
                digest = None
            elif self.keep_texts and fst.st_size <= TEXT_MAX:
                data = _read_fd(fd, TEXT_MAX)
                if len(data) > TEXT_MAX:  # grew while we read: hash the whole thing
                    digest = _hash_fd(fd, len(data))
                else:
                    digest = hashlib.sha256(data).hexdigest()
                    if self.text_bytes + len(data) <= TEXT_BUDGET and _looks_like_text(data):
                        self.texts[rel] = data
                        self.text_bytes += len(data)
            else:
                digest = _hash_fd(fd, fst.st_size)
            self.hashed += digest is not None
            entry = ManifestEntry(
                rel,
                "file",
                mode,
                fst.st_uid,
                fst.st_gid,
                fst.st_size,
                digest,
                None,
                fst.st_ino,
                fst.st_mtime_ns,
            )
            self.remember(rel, _stat_key(fst), entry)
            return entry
        finally:
            os.close(fd)

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
                    if prefix is not None and len(prefix) + len(child.name) < NEW_PATH_MAX
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
        room = NEW_COUNT_MAX - self.new_listed - self.new_unlisted
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
        if self.new_listed + self.new_unlisted >= NEW_COUNT_MAX:
            self.new_capped = True
            return False
        if depth + 2 > MAX_DEPTH:
            return False
        try:
            return ent.is_dir(follow_symlinks=False)
        except OSError:
            return False

    @staticmethod
    def _open_new(name: str, dir_fd: int) -> int | None:
        try:
            return os.open(name, _OPEN_DIR, dir_fd=dir_fd)
        except OSError:
            return None  # gone or swapped meanwhile

    def _note_new(self, rel: str | None, name: str, dir_fd: int) -> None:
        if rel is None or self.new_listed >= NEW_LISTED or len(rel) > NEW_PATH_MAX:
            self.new_unlisted += 1
            return
        try:
            st = os.lstat(name, dir_fd=dir_fd)
            kind = _type_of(st.st_mode)
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
                try:
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
                self.entries[rel] = entry
                if entry.type != "dir":
                    continue
                if st.st_dev != home_st.st_dev:
                    self.not_descended.append(rel)  # another filesystem (-xdev)
                    continue
                if depth + 2 > MAX_DEPTH:  # its children would lie deeper than allowed
                    if baseline:
                        raise ManifestError(
                            f"{printable(rel)}: the home is nested more than {MAX_DEPTH} levels "
                            "deep at the baseline"
                        )
                    self.not_descended.append(rel)
                    continue
                try:
                    sub_fd = os.open(name, _OPEN_DIR, dir_fd=dir_fd)
                except OSError as exc:
                    if exc.errno not in _RACES:
                        raise
                    # Swapped for something else since lstat: record that instead.
                    with contextlib.suppress(OSError):
                        self.entries[rel] = self.entry(
                            rel, name, dir_fd, os.lstat(name, dir_fd=dir_fd)
                        )
                        continue
                    self.entries.pop(rel, None)
                    continue
                sub_st = os.fstat(sub_fd)
                if (sub_st.st_ino, sub_st.st_dev) != (st.st_ino, st.st_dev):
                    # Another folder was put there since lstat: describe the one we will list.
                    self.entries[rel] = self.entry(rel, name, dir_fd, sub_st)
                    if sub_st.st_dev != home_st.st_dev:
                        os.close(sub_fd)
                        self.not_descended.append(rel)
                        continue
                stack.append((sub_fd, rel + "/", iter(_listdir(sub_fd)), depth + 1))
        finally:
            for dir_fd, _, _, _ in stack:
                if dir_fd != home_fd:
                    os.close(dir_fd)


def _listdir(dir_fd: int) -> list[os.DirEntry]:
    # Read the whole folder at once so its directory stream is closed before we descend.
    try:
        with os.scandir(dir_fd) as it:
            return sorted(it, key=lambda e: e.name)
    except OSError as exc:
        if exc.errno not in _RACES:
            raise
        return []


def take_manifest(
    home_dir: Path | str,
    home: str,
    cache: HashCache | None = None,
    keep_texts: bool = False,
    baseline: bool = False,
) -> Manifest:
    """Walk `home_dir` (a folder on this machine standing for `home` in the container).

    With `cache`, files whose (inode, size, mtime, ctime) did not change keep their hash, and the
    cache is updated for the next call. `keep_texts` keeps small text files' bytes (the baseline).
    `baseline` refuses a home nested deeper than MAX_DEPTH instead of cutting it short.
    """
    try:
        home_fd = os.open(os.fspath(home_dir), _OPEN_DIR)
    except OSError as exc:
        raise ManifestError(f"cannot open the home folder {home_dir}: {exc.strerror}") from exc
    try:
        return _take_from_fd(home_fd, home, cache, keep_texts, baseline, str(home_dir))
    finally:
        os.close(home_fd)


def _take_from_fd(
    home_fd: int,
    home: str,
    cache: HashCache | None,
    keep_texts: bool,
    baseline: bool,
    where: str,
    judge: Judge | None = None,
) -> Manifest:
    walk = _Walk(cache, keep_texts, judge)
    try:
        walk.walk(home_fd, baseline)
    except OSError as exc:
        raise ManifestError(f"walking {where} failed: {exc}") from exc
    if cache is not None:
        cache.by_path = walk.new_cache
        cache.hashed = walk.hashed
    return Manifest(
        home=home,
        entries=walk.entries,
        source="host",
        texts=walk.texts,
        not_descended=tuple(walk.not_descended),
        taken_at=time.time(),
        new_unlisted=walk.new_unlisted,
        new_capped=walk.new_capped,
    )


def open_home_in_rootfs(rootfs: Path, home: str) -> int:
    """Open `home` inside a container's root folder without following any symlink on the way: a
    task image could make /home a link to a folder of this host."""
    fd = os.open(os.fspath(rootfs), _OPEN_DIR)
    try:
        for part in [p for p in home.split("/") if p]:
            if part == "..":
                raise ManifestError(f"home {home!r} may not contain '..'")
            try:
                nxt = os.open(part, _OPEN_DIR, dir_fd=fd)
            except OSError as exc:
                raise ManifestError(
                    f"home {home!r}: component {part!r} is not a real folder in the container "
                    f"({exc.strerror})"
                ) from exc
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


# ---------------------------------------------------------------------------------------------
# The fallback: the daemon's tar stream of the home


class _StreamReader(io.RawIOBase):
    """A file object over an iterator of byte chunks (the docker SDK's archive stream)."""

    def __init__(self, chunks) -> None:
        self._it = iter(chunks)
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not self._buf:
            try:
                self._buf = next(self._it)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


def manifest_from_tar(
    fileobj, home: str, keep_texts: bool = False, keep_paths: frozenset[str] = frozenset()
) -> Manifest:
    """Parse a tar stream of the home as the daemon makes it: the home folder is the first member
    (named after its basename) and everything else lies below it. `keep_paths` names files whose
    bytes to keep whatever their kind (to show a diff)."""
    entries: dict[str, ManifestEntry] = {}
    texts: dict[str, bytes] = {}
    text_bytes = 0
    root: str | None = None
    try:
        tar = tarfile.open(fileobj=fileobj, mode="r|", errors="surrogateescape")  # noqa: SIM115
    except tarfile.TarError as exc:
        raise ManifestError(f"the container's tar stream of {home} is unreadable: {exc}") from exc
    with tar:
        try:
            for info in tar:
                name = info.name.rstrip("/")
                if root is None:
                    root = name
                if name == root:
                    rel = "."
                elif name.startswith(root + "/"):
                    rel = name[len(root) + 1 :]
                else:
                    raise ManifestError(f"unexpected member {printable(name)!r} in the tar stream")
                mode = info.mode & 0o7777
                if info.isreg():
                    h = hashlib.sha256()
                    f = tar.extractfile(info)
                    keep = (keep_texts and info.size <= TEXT_MAX) or rel in keep_paths
                    kept = []
                    while chunk := f.read(1 << 20):
                        h.update(chunk)
                        if keep:
                            kept.append(chunk)
                    entry = ManifestEntry(
                        rel, "file", mode, info.uid, info.gid, info.size, h.hexdigest()
                    )
                    data = b"".join(kept)
                    if keep and (
                        rel in keep_paths
                        or (text_bytes + len(data) <= TEXT_BUDGET and _looks_like_text(data))
                    ):
                        texts[rel] = data
                        text_bytes += len(data)
                elif info.islnk():
                    # A second name of a file already in the stream: same inode, same properties.
                    first = info.linkname.rstrip("/")
                    first_rel = first[len(root) + 1 :] if first.startswith(root + "/") else first
                    src = entries.get(first_rel)
                    if src is None or src.type != "file":
                        raise ManifestError(f"hard link {printable(name)!r} to an unseen file")
                    entry = ManifestEntry(
                        rel, "file", mode, info.uid, info.gid, src.size, src.sha256
                    )
                    if first_rel in texts:
                        texts[rel] = texts[first_rel]
                elif info.isdir():
                    entry = ManifestEntry(rel, "dir", mode, info.uid, info.gid)
                elif info.issym():
                    entry = ManifestEntry(
                        rel, "symlink", mode, info.uid, info.gid, target=info.linkname
                    )
                elif info.isfifo():
                    entry = ManifestEntry(rel, "fifo", mode, info.uid, info.gid)
                else:
                    entry = ManifestEntry(rel, "other", mode, info.uid, info.gid)
                entries[rel] = entry
        except tarfile.TarError as exc:
            raise ManifestError(f"the container's tar stream of {home} broke: {exc}") from exc
    if "." not in entries:
        raise ManifestError(f"the container's tar stream of {home} is empty")
    return Manifest(home=home, entries=entries, source="tar", texts=texts, taken_at=time.time())


# ---------------------------------------------------------------------------------------------
# Taking manifests of a running sandbox


class _SandboxLike(Protocol):
    @property
    def container_id(self) -> str: ...

    @property
    def home(self) -> str: ...

    def rootfs(self) -> Path | None: ...


class ManifestScanner:
    """Takes manifests of one container's home, again and again, as cheaply as it can.

    `rootfs` is the container's merged folder on this host (None when it cannot be read here);
    without it every manifest comes from the daemon's tar stream.
    """

    def __init__(
        self, home: str, rootfs: Path | None, container_id: str | None = None, client=None
    ) -> None:
        self.home = home
        self.rootfs = rootfs
        self.container_id = container_id
        self._client = client
        self.cache = HashCache()
        # Set once the baseline is taken (latch.Oracle.start): later walks hash and keep only
        # what can be judged.
        self.judge: Judge | None = None

    @classmethod
    def for_sandbox(cls, sandbox: _SandboxLike, force_tar: bool = False) -> ManifestScanner:
        root = None if force_tar else sandbox.rootfs()
        scanner = cls(sandbox.home, root, sandbox.container_id)
        if root is not None and scanner._mount_in_the_way():
            # The merged folder shows the image under a mount, not what the agent sees there.
            scanner.rootfs = None
        return scanner

    def _mount_in_the_way(self) -> bool:
        import docker

        try:
            info = self._api().inspect_container(self.container_id)
        except (docker.errors.DockerException, ManifestError):
            return False
        home = self.home.rstrip("/") + "/"
        for mount in info.get("Mounts") or []:
            dest = (mount.get("Destination") or "").rstrip("/") + "/"
            if home.startswith(dest) or dest.startswith(home):
                return True
        return False

    @property
    def source(self) -> str:
        return "rootfs" if self.rootfs is not None else "tar"

    def take(
        self, keep_texts: bool = False, fresh: bool = False, baseline: bool = False
    ) -> Manifest:
        """A manifest now. `fresh` ignores the hash cache (the final check rehashes everything:
        a file written through a shared mapping can change without its ctime moving at once)."""
        if self.rootfs is None:
            return self._take_tar(keep_texts)
        if fresh:
            self.cache = HashCache()
        fd = open_home_in_rootfs(self.rootfs, self.home)
        try:
            m = _take_from_fd(
                fd,
                self.home,
                self.cache,
                keep_texts,
                baseline,
                f"{self.rootfs}{self.home}",
                None if baseline else self.judge,
            )
        finally:
            os.close(fd)
        return replace(m, source="rootfs")

    def read_file(self, rel: str, limit: int = TEXT_MAX) -> bytes | None:
        """The bytes of one regular file (None when it is not one, or is larger than `limit`)."""
        if self.rootfs is None:
            return self._read_tar(rel, limit)
        home_fd = open_home_in_rootfs(self.rootfs, self.home)
        fds = [home_fd]
        try:
            parts = rel.split("/")
            for part in parts[:-1]:
                fds.append(os.open(part, _OPEN_DIR, dir_fd=fds[-1]))
            fd = _open_file(parts[-1], fds[-1])
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
                    return None
                data = _read_fd(fd, limit)
                return None if len(data) > limit else data
            finally:
                os.close(fd)
        except OSError:
            return None
        finally:
            for fd in fds:
                os.close(fd)

    # -- tar fallback ----------------------------------------------------------------------
    def _api(self):
        if self._client is None:
            import docker  # only the fallback needs the daemon's API

            try:
                self._client = docker.APIClient(version="auto")
            except docker.errors.DockerException as exc:
                raise ManifestError(f"cannot reach the Docker engine: {exc}") from exc
        return self._client

    def _archive(self, path: str):
        import docker

        if not self.container_id:
            raise ManifestError("no container to read the home from (no rootfs, no container id)")
        try:
            stream, _ = self._api().get_archive(self.container_id, path)
        except docker.errors.DockerException as exc:
            raise ManifestError(f"get_archive {path} failed: {exc}") from exc
        return io.BufferedReader(_StreamReader(stream), 1 << 20)

    def _take_tar(self, keep_texts: bool) -> Manifest:
        return manifest_from_tar(self._archive(self.home), self.home, keep_texts=keep_texts)

    def _read_tar(self, rel: str, limit: int) -> bytes | None:
        try:
            m = manifest_from_tar(
                self._archive(abspath(self.home, rel)), self.home, keep_paths=frozenset(["."])
            )
        except ManifestError:
            return None
        # The archive of a single file is that file as its only member (named by its basename).
        entry = m.entries.get(".")
        if entry is None or entry.type != "file" or (entry.size or 0) > limit:
            return None
        return m.texts.get(".")
