"""Opening and hashing one regular file of the home, from the host, without trusting it: every
open is relative to its parent folder's descriptor, never follows a link and never blocks (a
fifo swapped in is opened without waiting for a writer, then recognised by its own fstat)."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from engine.oracle.entries import TEXT_MAX, looks_like_text

OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NOATIME = getattr(os, "O_NOATIME", 0)
# Read size for hashing: a typical file is read (and hashed) in one call, a big one in pieces.
HASH_CHUNK = 1 << 20


def open_file(name: str, dir_fd: int) -> int:
    try:
        return os.open(name, OPEN_FILE | _NOATIME, dir_fd=dir_fd)
    except PermissionError:
        # O_NOATIME needs ownership or CAP_FOWNER; without it we still read (atime is not judged).
        return os.open(name, OPEN_FILE, dir_fd=dir_fd)


def hash_fd(fd: int, size_hint: int = HASH_CHUNK) -> str:
    """sha256 of what `fd` holds from its current offset to its end (however it grew since its
    size was taken). One read sized from `size_hint` takes a typical file whole: per file, the
    time goes to system calls and allocation more than to hashing (hashlib.file_digest's fresh
    256 KiB buffer per file cost more than hashing a 20 KB file: the full hash of 2,000 such
    files took 1.6x as long, in alternated runs on a loaded machine)."""
    want = min(size_hint, HASH_CHUNK - 1) + 1
    first = os.read(fd, want)
    digest = hashlib.sha256(first)
    if len(first) == want:  # a regular file reads short only at its end: there may be more
        while chunk := os.read(fd, HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def read_fd(fd: int, limit: int) -> bytes:
    """Up to `limit + 1` bytes from the start of `fd` (one more than allowed says it is too big)."""
    chunks, left = [], limit + 1
    while left > 0:
        chunk = os.pread(fd, min(left, 1 << 20), limit + 1 - left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


@dataclass(slots=True)
class HashJob:
    """One regular file to hash, open as `fd` (the job owns it and closes it once read).
    `st` is the descriptor's own stat, taken before reading: what the entry will say."""

    rel: str
    fd: int
    st: os.stat_result
    keep_text: bool  # at most TEXT_MAX: read whole, and keep the bytes when they look like text
    digest: str | None = None
    text: bytes | None = None


def _run(jobs: list[HashJob]) -> list[HashJob]:
    """Hash every job of a batch; every descriptor is closed whatever happens."""
    error: OSError | None = None
    for job in jobs:
        try:
            if error is None:
                if job.keep_text:
                    data = read_fd(job.fd, TEXT_MAX)
                    if len(data) > TEXT_MAX:  # grew while we read: hash the whole thing
                        job.digest = hash_fd(job.fd, len(data))
                    else:
                        job.digest = hashlib.sha256(data).hexdigest()
                        if looks_like_text(data):
                            job.text = data
                else:
                    job.digest = hash_fd(job.fd, job.st.st_size)
        except OSError as exc:
            error = exc
        finally:
            os.close(job.fd)
    if error is not None:
        raise error
    return jobs


# One worker beside the walking thread (the machines this runs on may have two cores): os.read
# and hashlib release the GIL, so a batch read and hashed there overlaps the walk's own system
# calls and Python. Shared by every walk of the process; a walk whose batch the worker has not
# started hashes it itself. Only batches of big files go there: every read and every hash hands
# the GIL over between the two threads, which for a 20 KB file costs about what hashing it does
# (2,000 such files: no faster, with two to four times the context switches, on a loaded 2-core
# machine), while 1 MB files were hashed 10-20% faster under the same load.
_POOL: ThreadPoolExecutor | None = None
PARALLEL_MIN = 256 * 1024  # mean bytes per file of a batch worth handing to the worker
_AHEAD = 4  # batches whose results may wait behind one not hashed yet


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="manifest-hash")
    return _POOL


class Hasher:
    """Hashes a walk's files in batches, in the walk's order: a batch goes to the worker when it
    is free, else the walking thread hashes it at once (whoever is free does the work)."""

    def __init__(self) -> None:
        self._batches: deque[tuple[list[HashJob], Future[list[HashJob]] | None]] = deque()

    def submit(self, jobs: list[HashJob], last: bool = False) -> None:
        """Hash `jobs` (now or on the worker). The last batch of a walk is hashed here, never
        handed over: nothing is left to walk meanwhile."""
        small = sum(job.st.st_size for job in jobs) < PARALLEL_MIN * len(jobs)
        if last or small or any(f is not None and not f.done() for _, f in self._batches):
            self._batches.append((_run(jobs), None))
        else:
            try:
                fut = _pool().submit(_run, jobs)
            except RuntimeError:  # the interpreter is shutting down: no more threads
                self._batches.append((_run(jobs), None))
            else:
                self._batches.append((jobs, fut))

    def done(self, wait: bool = False) -> Iterator[HashJob]:
        """The hashed jobs, in submission order: those ready now, or (`wait`) all of them. The
        results held back behind a batch not yet hashed are bounded: past _AHEAD batches, the
        head is waited for, or taken back and hashed here when the worker has not started it
        (it was busy with another walk's)."""
        while self._batches:
            jobs, fut = self._batches[0]
            if fut is not None:
                if not fut.done() and not wait and len(self._batches) <= _AHEAD:
                    return
                if fut.cancel():
                    self._batches[0] = (jobs, None)  # ours again: _run closes them, come what may
                    _run(jobs)
                else:
                    fut.result()
            self._batches.popleft()
            yield from jobs

    def abandon(self) -> None:
        """After a failed walk: every descriptor still held is closed (a batch the worker has
        taken is closed by the worker; wait for it)."""
        while self._batches:
            jobs, fut = self._batches.popleft()
            if fut is None:
                continue
            if fut.cancel():
                for job in jobs:
                    os.close(job.fd)
            else:
                with contextlib.suppress(Exception):
                    fut.result()  # its error is already the walk's, or beside it
