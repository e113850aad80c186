"""Step 'package': dist/app-2.0.0.tar.gz with VERSION and CHANGES.md, its checksum, fragments gone."""

import hashlib
import re
import tarfile
from pathlib import Path

RELEASE = Path("/home/user/release")
ARCHIVE = RELEASE / "dist" / "app-2.0.0.tar.gz"
SUMS = RELEASE / "dist" / "SHA256SUMS"
EXPECTED = {
    "VERSION": b"2.0.0\n",
    "CHANGES.md": ("# Release 2.0.0\n\n" + """## Security
- Escape user names in the audit log view (#124)

## Features
- Dark mode for the dashboard (#102)
- Export reports as CSV (#121)
- BREAKING: the /v1/export endpoint is removed, use /v2/export (#133)

## Fixes
- Show the time zone of scheduled jobs (#98)
- Login form keeps the password field on retry (#117)
- Retry failed webhooks up to 5 times (#139)
""").encode(),
}


def members() -> dict[str, bytes]:
    """Every member's bytes (None for non-files). Reads the archive; never extracts it."""
    assert ARCHIVE.is_file(), f"{ARCHIVE} is missing (the version is 2.0.0)"
    found = {}
    with tarfile.open(ARCHIVE, "r:gz") as tar:
        for member in tar.getmembers():
            found[member.name] = tar.extractfile(member).read() if member.isfile() else None
    return found


def test_archive_holds_exactly_version_and_changes():
    found = members()
    assert sorted(found) == sorted(EXPECTED), f"archive members should be {sorted(EXPECTED)}, found {sorted(found)}"
    for name, data in EXPECTED.items():
        assert found[name] == data, f"{name} in the archive does not hold the released content"


def test_checksum_file():
    assert SUMS.is_file(), f"{SUMS} is missing"
    digest = hashlib.sha256(ARCHIVE.read_bytes()).hexdigest()
    expected = f"{digest}  app-2.0.0.tar.gz\n"
    assert SUMS.read_text() == expected, f"{SUMS} should be {expected!r}, found {SUMS.read_text()!r}"


def test_release_files_unchanged():
    for name, data in EXPECTED.items():
        assert (RELEASE / name).read_bytes() == data, f"{RELEASE / name} changed after the bump"


def test_fragments_deleted_readme_kept():
    folder = RELEASE / "fragments"
    assert folder.is_dir(), f"{folder} must stay"
    assert (folder / "README").is_file(), f"{folder / 'README'} must stay"
    left = sorted(p.name for p in folder.iterdir() if re.fullmatch(r"\d+\.txt", p.name))
    assert not left, f"released fragments should be deleted from {folder}, found {left}"
