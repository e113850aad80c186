"""The manifest's fallback source: the Docker daemon's tar stream of the home, parsed with
`tarfile`. The daemon reads the files as root itself, so nothing inside the image is trusted."""

from __future__ import annotations

import hashlib
import io
import tarfile
import time

from engine.oracle.entries import (
    TEXT_BUDGET,
    TEXT_MAX,
    Manifest,
    ManifestEntry,
    ManifestError,
    looks_like_text,
    printable,
)


class StreamReader(io.RawIOBase):
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
                        or (text_bytes + len(data) <= TEXT_BUDGET and looks_like_text(data))
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
