"""The root-taken manifest of the agent's home: what every object there is, by property.

The agent must not be able to influence it, so no binary of the task image runs to take it:

- primarily, the container's merged overlay folder is walked from the host (`Sandbox.rootfs()`),
  as root, with `lstat` and Python's own sha256 (walk.py). Symlinks are never followed, fifos and
  devices are never opened, every open is `O_NOFOLLOW | O_NONBLOCK` relative to its parent
  folder's descriptor (hashing.py);
- otherwise the daemon's tar stream of the home (`get_archive`) is parsed with `tarfile`; the daemon
  reads the files as root itself, so nothing inside the image is trusted either (tarstream.py).

The host walk is incremental: a path whose (inode, size, mtime, ctime) is what it was at the
previous walk keeps its previous hash. The agent can set mtime but not ctime, and a file whose
ctime is too close to the walk's start is hashed again next time (the "racy clean" rule: the
kernel's clock for ctime is coarse, so a write just after we looked could leave ctime unchanged).
The baseline and the final check hash every file afresh.

This module holds the walk's bounds, the entry points and the scanner of a running sandbox; the
names callers use are importable from here.
"""

from __future__ import annotations

import io
import os
import stat
import time
from dataclasses import replace
from pathlib import Path
from typing import Protocol

from engine.oracle.entries import (
    TEXT_BUDGET,
    TEXT_MAX,
    EntryType,
    Manifest,
    ManifestEntry,
    ManifestError,
    abspath,
    printable,
    relpath,
)
from engine.oracle.reading import OPEN_DIR as _OPEN_DIR
from engine.oracle.reading import open_file as _open_file
from engine.oracle.reading import read_fd as _read_fd
from engine.oracle.tarstream import StreamReader, manifest_from_tar
from engine.oracle.upper import ChangeSet, read_upper
from engine.oracle.walk import RACY_NS, Bounds, HashCache, Judge, Walk

__all__ = [
    "RACY_NS",
    "TEXT_BUDGET",
    "TEXT_MAX",
    "EntryType",
    "HashCache",
    "Judge",
    "Manifest",
    "ManifestEntry",
    "ManifestError",
    "ManifestScanner",
    "abspath",
    "manifest_from_tar",
    "open_home_in_rootfs",
    "printable",
    "relpath",
    "take_manifest",
]

# No object more than this many levels below the home is recorded. A baseline deeper than this is
# refused; later, a deeper subtree can only hold objects created after the baseline (which are
# never judged), so it is recorded as cut short instead of failing the episode.
MAX_DEPTH = 1000
# Objects that did not exist at the baseline are never judged (a new file is never collateral),
# so after the baseline they are not hashed, only listed (the first NEW_LISTED whose path is at
# most NEW_PATH_MAX long) and counted up to NEW_COUNT_MAX (then the count is a lower bound: the
# disk guard, which counts the writable layer, enforces the object limit). A judged file whose
# size differs from the baseline's has changed whatever its bytes, so it is hashed only when it
# is at most HASH_ANY_MAX (to tell two edits apart for display): a sparse 100 GB file put at a
# baseline path costs no hashing. Read when a walk starts (tests lower them).
NEW_LISTED = 1000
NEW_PATH_MAX = 4096
NEW_COUNT_MAX = 20_000
HASH_ANY_MAX = 16 * 1024 * 1024


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
    scope: ChangeSet | None = None,
) -> Manifest:
    bounds = Bounds(MAX_DEPTH, NEW_LISTED, NEW_PATH_MAX, NEW_COUNT_MAX, HASH_ANY_MAX)
    walk = Walk(bounds, _open_file, cache, keep_texts, judge, scope)
    try:
        walk.walk(home_fd, baseline)
    except OSError as exc:
        raise ManifestError(f"walking {where} failed: {exc}") from exc
    if cache is not None:
        cache.by_path = walk.new_cache
        cache.hashed = walk.hashed
    return Manifest(
        home=home,
        entries=walk.finished(),
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
# Taking manifests of a running sandbox


class _SandboxLike(Protocol):
    @property
    def container_id(self) -> str: ...

    @property
    def home(self) -> str: ...

    def rootfs(self) -> Path | None: ...

    def upper(self) -> Path | None: ...


class ManifestScanner:
    """Takes manifests of one container's home, again and again, as cheaply as it can.

    `rootfs` is the container's merged folder on this host (None when it cannot be read here);
    without it every manifest comes from the daemon's tar stream.
    """

    def __init__(
        self,
        home: str,
        rootfs: Path | None,
        container_id: str | None = None,
        client=None,
        upper: Path | None = None,
    ) -> None:
        self.home = home
        self.rootfs = rootfs
        # The container's overlay upper folder on this host (None: every check walks in full).
        self.upper = upper
        self.container_id = container_id
        self._client = client
        self.cache = HashCache()
        # Set once the baseline is taken (latch.Oracle.start): later walks hash and keep only
        # what can be judged.
        self.judge: Judge | None = None
        self.last_scope: ChangeSet | None = None  # the last check's change set (tests, bench)
        self.upper_at_baseline: ChangeSet | None = None

    @classmethod
    def for_sandbox(
        cls, sandbox: _SandboxLike, force_tar: bool = False, use_upper: bool = True
    ) -> ManifestScanner:
        """The one place that chooses the way the checks are taken (stored as the episode's
        `oracle_way`): the upper folder's change set where it can be read here, else the full
        walk of the merged folder, else the daemon's tar stream. `use_upper=False` keeps the
        full walk (the bench and the tests compare both ways)."""
        root = None if force_tar else sandbox.rootfs()
        upper = None
        if root is not None and use_upper and hasattr(sandbox, "upper"):
            upper = sandbox.upper()
        scanner = cls(sandbox.home, root, sandbox.container_id, upper=upper)
        if root is not None and scanner._mount_in_the_way():
            # The merged folder shows the image under a mount, not what the agent sees there.
            scanner.rootfs = None
            scanner.upper = None
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

    @property
    def way(self) -> str:
        """How the checks after the baseline are taken: "upper" (the upper folder's change set),
        "walk" (the full walk of the merged folder) or "tar" (the daemon's tar stream)."""
        if self.rootfs is None:
            return "tar"
        return "upper" if self.upper is not None else "walk"

    def take(
        self, keep_texts: bool = False, fresh: bool = False, baseline: bool = False
    ) -> Manifest:
        """A manifest now. `fresh` ignores the hash cache (the final check rehashes everything:
        a file written through a shared mapping can change without its ctime moving at once)."""
        if self.rootfs is None:
            return self._take_tar(keep_texts)
        if fresh:
            self.cache = HashCache()
        judge = None if baseline else self.judge
        scope = None
        cache = self.cache
        if judge is not None and self.upper is not None and self.upper_at_baseline is not None:
            scope = read_upper(os.fspath(self.upper), self.home, judge.known)
            if scope is not None:
                scope = scope.merged_with(self.upper_at_baseline)
                # What the upper folder names is hashed afresh every time: the guarantee rests
                # on the kernel's copy-up, never on timestamps.
                cache = self.cache = HashCache()
        self.last_scope = scope
        fd = open_home_in_rootfs(self.rootfs, self.home)
        try:
            m = _take_from_fd(
                fd,
                self.home,
                cache,
                keep_texts,
                baseline,
                f"{self.rootfs}{self.home}",
                judge,
                scope,
            )
        finally:
            os.close(fd)
        if baseline and self.upper is not None:
            # What the upper folder held at the baseline (the planted and fault files, what
            # the image's setup wrote): looked at every time. Unreadable: walk in full.
            self.upper_at_baseline = read_upper(os.fspath(self.upper), self.home, None)
            if self.upper_at_baseline is None:
                self.upper = None
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
        return io.BufferedReader(StreamReader(stream), 1 << 20)

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
