"""Host folders a verifier run writes into, with a hard bound when the kernel can give one.

What test.sh copies into /logs/verifier and the per-test records can be the agent's (a link to
/dev/zero). The verifier polls the folders' size and stops the run past its limit, but a poll
lags behind a fast writer, more so on a loaded host. When this process may mount (root), the
folders live on one tmpfs of a fixed size and inode count, so the kernel refuses the bytes past
the bound (ENOSPC) whatever the poll sees; elsewhere they are plain folders and the poll is the
only bound (docs/verifier.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass
class BoundedFolders:
    root: Path
    mounted: bool

    @classmethod
    def make(cls, *, size: int, inodes: int, prefix: str = "depthtui-verify-") -> BoundedFolders:
        """A fresh folder under the temporary folder, a size-bound tmpfs when we may mount one."""
        root = Path(tempfile.mkdtemp(prefix=prefix))
        mounted = False
        if os.geteuid() == 0 and shutil.which("mount"):
            options = f"size={size},nr_inodes={inodes},mode=0777"
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", options, "depthtui-verify", str(root)],
                capture_output=True,
                timeout=30,
            )
            mounted = done.returncode == 0
        return cls(root=root, mounted=mounted)

    def folder(self, name: str) -> Path:
        """A folder writable by whichever uid the verifier runs as."""
        path = self.root / name
        path.mkdir()
        path.chmod(0o777)
        return path

    def remove(self) -> None:
        if self.mounted:
            # Lazy: a reader still holding a file (none should) does not keep the mount alive.
            subprocess.run(["umount", "-l", str(self.root)], capture_output=True, timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)
