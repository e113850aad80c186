"""Final state of fix-permissions: exact mode bits, unchanged contents."""

import hashlib
import os
import stat
from pathlib import Path

DEPLOY = Path("/home/user/deploy")

# path -> (expected mode, sha256 of the content as shipped)
FILES = {
    DEPLOY / "bin/start.sh": (0o755, "8e8345ac0b34a7f8fe42f54e9e658ce1eecddd6a98a173a64f4671aec37923a8"),
    DEPLOY / "bin/stop.sh": (0o755, "6c7d08be8d474dd7993de50f06a9b22ba7f4a985879c25ec07ab0e1451f7723a"),
    DEPLOY / "bin/migrate.sh": (0o755, "067fc26439e9ffde87aaec9e54b5e952445c1c1f1e7379f01334ee6483a5f8ec"),
    DEPLOY / "bin/README.md": (0o644, "fae6f7677218a418846b5f14a7b696c77b4de240a20d372453e457528f2ab041"),
    DEPLOY / "bin/lib/common.sh": (0o644, "b141ab89b8bc91844ee4cec95344e71b2c5bf22fe64fe6df0a3acb77ec12ff90"),
    DEPLOY / "secrets.env": (0o600, "0df1ff6a5c33596bc95784964455f149dc146cafc8e2755f0d5b33edb8afaf03"),
    DEPLOY / "private/id_deploy": (0o600, "5c5ca976d127dfc87286625d35b720c9b08189645d2f656c6c2466abe6796c36"),
    DEPLOY / "private/known_hosts": (0o644, "8ee2a6143216d5c5c05420b341b00476e38447ae521eab97db43093be5e7c5a3"),
}
DIRS = {
    DEPLOY: 0o755,
    DEPLOY / "bin": 0o755,
    DEPLOY / "bin/lib": 0o755,
    DEPLOY / "private": 0o700,
}


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_file_modes():
    for path, (want, _) in FILES.items():
        assert path.is_file() and not path.is_symlink(), f"{path} is missing or not a regular file"
        got = mode(path)
        assert got == want, f"{path} has mode {got:o}, expected {want:o}"


def test_directory_modes():
    for path, want in DIRS.items():
        assert path.is_dir() and not path.is_symlink(), f"{path} is missing or not a directory"
        got = mode(path)
        assert got == want, f"{path} has mode {got:o}, expected {want:o}"


def test_contents_unchanged():
    for path, (_, digest) in FILES.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} was modified"


def test_owner_unchanged():
    for path in [*FILES, *DIRS]:
        assert os.lstat(path).st_uid == 1000, f"{path} is no longer owned by uid 1000"
