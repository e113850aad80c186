"""What a manifest holds: one entry per object under the home, by property, and the manifest."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Literal

EntryType = Literal["file", "dir", "symlink", "fifo", "other"]

# Regular files up to this size whose bytes look like text are kept from the baseline, so a change
# can be shown as a unified diff; the total kept is bounded too.
TEXT_MAX = 64 * 1024
TEXT_BUDGET = 16 * 1024 * 1024


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


def type_of(mode: int) -> EntryType:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISFIFO(mode):
        return "fifo"
    return "other"


def looks_like_text(data: bytes) -> bool:
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
