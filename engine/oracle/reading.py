"""Opening and reading one regular file of the home, from the host, without trusting it: every
open is relative to its parent folder's descriptor, never follows a link and never blocks (a
fifo swapped in is opened without waiting for a writer, then recognised by its own fstat). The
walk (hashing.py) and the hash worker (hash_worker.py) both read with these."""

from __future__ import annotations

import hashlib
import os

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
    """sha256 of what `fd` holds from its start to its end (however it grew since its size was
    taken). Reads at explicit offsets (pread): a descriptor handed to the hash worker shares its
    offset with ours. One read sized from `size_hint` takes a typical file whole: per file, the
    time goes to system calls and allocation more than to hashing (hashlib.file_digest's fresh
    256 KiB buffer per file cost more than hashing a 20 KB file: the full hash of 2,000 such
    files took 1.6x as long, in alternated runs on a loaded machine)."""
    want = min(size_hint, HASH_CHUNK - 1) + 1
    first = os.pread(fd, want, 0)
    digest = hashlib.sha256(first)
    if len(first) == want:  # a regular file reads short only at its end: there may be more
        offset = want
        while chunk := os.pread(fd, HASH_CHUNK, offset):
            digest.update(chunk)
            offset += len(chunk)
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


def hash_file(fd: int, size: int, keep_text: bool) -> tuple[str, bytes | None]:
    """The digest of a regular file open as `fd` whose fstat said `size`, and (`keep_text`: it
    was at most TEXT_MAX) its bytes when they look like text. The walk and the hash worker both
    hash with this."""
    if keep_text:
        data = read_fd(fd, TEXT_MAX)
        if len(data) > TEXT_MAX:  # grew while we read: hash the whole thing
            return hash_fd(fd, len(data)), None
        return hashlib.sha256(data).hexdigest(), data if looks_like_text(data) else None
    return hash_fd(fd, size), None
