"""Final state of backup-archive: a tar.gz of exactly the .py sources, and its sha256sum line."""

import hashlib
import re
import tarfile
from pathlib import Path

PROJECT = Path("/home/user/project")
ARCHIVE = Path("/home/user/backups/project-src.tar.gz")
CHECKSUM = Path("/home/user/backups/project-src.tar.gz.sha256")

# member name -> sha256 of the source file as shipped
SOURCES = {
    "src/app/__init__.py": "329013e6180da079d3b46d57443fc657f03b42b1d553abc98c64b0ffca8c180e",
    "src/app/cli.py": "5ed9281fcb90290475aef0b486595d0b4416799e2b159f77875d3cc4730781f7",
    "src/app/util/__init__.py": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "src/app/util/strings.py": "a3f74d4b88db6b74286f0c9120770895f8d5e3ce5caebac130dd568a2badb1f0",
    "src/main.py": "d6e80fcafeb379d0ec470c59fd6e6c4a39f3662381f17158bfdaf30a85c23a19",
    "src/tests/test_strings.py": "fb5df6536643e526bf22b542ff3f2bb991fea9d3a4755b35f6dba8141e367ed5",
}
# Everything else in the project, which must stay as shipped too.
OTHER_FILES = {
    "src/app/cli.pyi": "b558c3bf5164a34dfabde63406059c96bb031a0b4fe881fd582c4e3138aca002",
    "src/app/config.yaml": "fdb88e4a7e35e2b49a346a1481175b27fcef44c026a5b46e61b368f2074d8b93",
    "src/notes.txt": "728ddc5afac6c59db031ae26132b1905a2c811afb03d5863ac1b1736712e0eaf",
    "src/app/util/strings.py.bak": "482667a48c7c7acc7d11a53bd29b1cc0d67eb0e53044c95af3833c6c9542eb79",
    "docs/index.md": "2906d4d52d9a9b1ab6537536d58c7fd5dbadc9f4073281292f0869bdba38d588",
    "build/main.o": "f382adecc3a53b2153bf10450c545079ca612ac3fef6de6f3d89d0bcd3af3b25",
    "setup.py": "4af563b4f411d3e713dd33f9978bb040f644d32c39eab168ebd78bc6238b432e",
}


def read_members() -> dict[str, str]:
    """Regular-file members -> sha256 of their bytes. Reads the archive; never extracts it."""
    found = {}
    with tarfile.open(ARCHIVE, "r:gz") as tar:
        for member in tar.getmembers():
            if member.isfile():
                data = tar.extractfile(member).read()
                found[member.name] = hashlib.sha256(data).hexdigest()
            else:
                assert member.isdir(), f"unexpected non-file, non-directory member {member.name}"
    return found


def test_archive_is_a_readable_gzip_tar():
    assert ARCHIVE.is_file(), f"{ARCHIVE} is missing"
    with ARCHIVE.open("rb") as fh:
        assert fh.read(2) == b"\x1f\x8b", f"{ARCHIVE} is not gzip-compressed"
    read_members()


def test_archive_holds_exactly_the_py_sources():
    found = read_members()
    assert sorted(found) == sorted(SOURCES), (
        f"regular files in the archive should be {sorted(SOURCES)}, found {sorted(found)}"
    )
    for name, digest in SOURCES.items():
        assert found[name] == digest, f"{name} in the archive differs from the project's file"


def test_checksum_file():
    assert CHECKSUM.is_file(), f"{CHECKSUM} is missing"
    text = CHECKSUM.read_text()
    match = re.fullmatch(r"([0-9a-f]{64})  project-src\.tar\.gz\n", text)
    assert match, f"{CHECKSUM} should be '<64 hex>  project-src.tar.gz' plus a newline: {text!r}"
    actual = hashlib.sha256(ARCHIVE.read_bytes()).hexdigest()
    assert match.group(1) == actual, f"{CHECKSUM} does not match the archive's SHA-256"


def test_project_unchanged():
    for name, digest in {**SOURCES, **OTHER_FILES}.items():
        path = PROJECT / name
        assert path.is_file(), f"{path} is missing"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} was modified"
