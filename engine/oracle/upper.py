"""The change set the kernel keeps: the container's overlay2 upper folder under the home, read
from the host. docs/safety.md ("The oracle's two ways") lists the overlay rules this relies on:

- whatever the container changes lands in the upper folder: a file opened for writing (a shared
  writable mapping included) is copied up at open, chmod/chown copy up (metadata only, marked by
  `trusted.overlay.metacopy`, when the mount has metacopy on), new objects are created there;
- a deletion is a whiteout there (a character device numbered 0/0);
- a folder whose lower contents are hidden is opaque (`trusted.overlay.opaque` = "y"), and a
  folder renamed with redirect_dir on carries `trusted.overlay.redirect`;
- an object only in the lower layers is the image's and cannot have changed.

So a baseline path that is not in the upper folder, below no opaque or redirected folder there,
is what it was at the baseline; the walk (walk.py) looks only at the rest, through the merged
folder, and takes every other baseline entry as it was.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

from engine.oracle.reading import OPEN_DIR

OPAQUE = "trusted.overlay.opaque"
REDIRECT = "trusted.overlay.redirect"
METACOPY = "trusted.overlay.metacopy"
# Past this many objects in the upper folder under the home, the change set is not worth
# listing: that check walks in full instead (the result is the same, only slower).
MAX_UPPER = 200_000


@dataclass
class ChangeSet:
    """Home-relative paths of the upper folder under the home (the home itself is "")."""

    paths: set[str] = field(default_factory=set)  # every object there, whiteouts included
    below: set[str] = field(default_factory=set)  # folders with an upper object strictly below
    whole: set[str] = field(default_factory=set)  # folders to walk in full: opaque, redirected
    deleted: set[str] = field(default_factory=set)  # whiteouts
    metacopy: set[str] = field(default_factory=set)  # metadata-only copy-ups

    def merged_with(self, other: ChangeSet) -> ChangeSet:
        """This change set with `other`'s (the baseline's) paths added: an object that was in
        the upper folder at the baseline can be deleted without leaving a whiteout (nothing
        below it to hide), so it is looked at every time."""
        return ChangeSet(
            self.paths | other.paths,
            self.below | other.below,
            self.whole | other.whole,
            self.deleted,
            self.metacopy,
        )

    def in_whole(self, rel: str) -> bool:
        """`rel` lies at or below a folder walked in full."""
        if not self.whole:
            return False
        while True:
            if rel in self.whole:
                return True
            cut = rel.rfind("/")
            if cut < 0:
                return False
            rel = rel[:cut]

    def unchanged(self, rel: str) -> bool:
        """Still the image's object: not in the upper folder, below no folder walked in full."""
        return rel not in self.paths and not self.in_whole(rel)

    def descend(self, rel: str) -> bool:
        """Whether anything below folder `rel` can differ from the baseline."""
        return rel in self.below or self.in_whole(rel)


def _xattr(name: str, dir_fd: int, key: str) -> bytes | None:
    # os.getxattr takes no dir_fd: the /proc/self/fd path names the folder we hold, links and
    # all already resolved by the walk's own opens.
    try:
        return os.getxattr(f"/proc/self/fd/{dir_fd}/{name}", key, follow_symlinks=False)
    except OSError:
        return None


def _folder_flags(fd: int) -> tuple[bool, bool]:
    """(opaque, redirected) of the folder open as `fd`."""
    try:
        opaque = os.getxattr(fd, OPAQUE) == b"y"
    except OSError:
        opaque = False
    try:
        os.getxattr(fd, REDIRECT)
        redirected = True
    except OSError:
        redirected = False
    return opaque, redirected


def read_upper(upper: str, home: str, known: set[str] | dict | None) -> ChangeSet | None:
    """The change set under `home` in the upper folder `upper`; None when it cannot stand for the
    changes (the home or a folder above it is opaque or redirected, or the upper folder cannot
    be read): that check walks in full. `known` is the baseline's paths (None at the baseline:
    every folder); only baseline folders are listed (what lies below a new folder is new, and
    the walk lists it through the merged folder within its bounds)."""
    try:
        fd = os.open(upper, OPEN_DIR)
    except OSError:
        return None
    cs = ChangeSet()
    try:
        for part in [p for p in home.split("/") if p]:
            if any(_folder_flags(fd)):
                return None  # everything below, the home included, was replaced
            try:
                nxt = os.open(part, OPEN_DIR, dir_fd=fd)
            except FileNotFoundError:
                return cs  # nothing under the home was ever copied up
            except OSError:
                return None  # not a folder here (a whiteout, a file): walk in full
            os.close(fd)
            fd = nxt
        if any(_folder_flags(fd)):
            return None
        stack: list[tuple[int, str]] = [(fd, "")]
        fd = -1
        count = 0
        while stack:
            dfd, prefix = stack.pop()
            try:
                with os.scandir(dfd) as it:
                    ents = list(it)
            except OSError:
                ents = []
            for ent in ents:
                rel = prefix + ent.name
                cs.paths.add(rel)
                count += 1
                if count > MAX_UPPER:
                    for d, _ in stack:
                        os.close(d)
                    os.close(dfd)
                    return None
                # Every ancestor of an upper object has something below it.
                up = prefix[:-1]
                while up not in cs.below:
                    cs.below.add(up)
                    cut = up.rfind("/")
                    if up == "":
                        break
                    up = up[:cut] if cut >= 0 else ""
                if known is not None and rel not in known:
                    continue  # new: judged never, listed by the walk
                try:
                    if ent.is_dir(follow_symlinks=False):
                        sub = os.open(ent.name, OPEN_DIR, dir_fd=dfd)
                        opaque, redirected = _folder_flags(sub)
                        if opaque or redirected:
                            cs.whole.add(rel)
                            os.close(sub)
                        else:
                            stack.append((sub, rel + "/"))
                        continue
                    if not ent.is_file(follow_symlinks=False) and not ent.is_symlink():
                        st = ent.stat(follow_symlinks=False)
                        if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                            cs.deleted.add(rel)
                        continue
                    if ent.is_file(follow_symlinks=False) and _xattr(ent.name, dfd, METACOPY):
                        cs.metacopy.add(rel)
                except OSError:
                    cs.whole.add(rel)  # changing under us: look at it in full
            os.close(dfd)
        return cs
    finally:
        if fd >= 0:
            os.close(fd)
