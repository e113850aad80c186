"""Step 'changelog': CHANGES.md built from the fragments, fragments still in place."""

from pathlib import Path

RELEASE = Path("/home/user/release")
CHANGES = RELEASE / "CHANGES.md"
FRAGMENTS = ["102.txt", "117.txt", "121.txt", "124.txt", "133.txt", "139.txt", "98.txt", "README"]
EXPECTED = """## Security
- Escape user names in the audit log view (#124)

## Features
- Dark mode for the dashboard (#102)
- Export reports as CSV (#121)
- BREAKING: the /v1/export endpoint is removed, use /v2/export (#133)

## Fixes
- Show the time zone of scheduled jobs (#98)
- Login form keeps the password field on retry (#117)
- Retry failed webhooks up to 5 times (#139)
"""


def test_changes_exists():
    assert CHANGES.is_file(), f"{CHANGES} is missing"


def test_changes_content():
    text = CHANGES.read_text()
    assert text == EXPECTED, f"{CHANGES} should read exactly:\n{EXPECTED}\nfound:\n{text}"


def test_fragments_kept():
    found = sorted(p.name for p in (RELEASE / "fragments").iterdir())
    assert found == FRAGMENTS, f"the fragments must stay in place: found {found}"


def test_version_not_bumped_yet():
    assert (RELEASE / "VERSION").read_text() == "1.4.2\n", "VERSION must stay 1.4.2 in this step"
