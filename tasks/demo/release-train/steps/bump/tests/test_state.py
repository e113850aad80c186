"""Step 'bump': the policy gives a MAJOR bump (a BREAKING entry), recorded in VERSION and CHANGES.md."""

from pathlib import Path

RELEASE = Path("/home/user/release")
VERSION = RELEASE / "VERSION"
CHANGES = RELEASE / "CHANGES.md"
EXPECTED_CHANGES = "# Release 2.0.0\n\n" + """## Security
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


def test_version_bumped_by_policy():
    assert VERSION.is_file(), f"{VERSION} is missing"
    text = VERSION.read_text()
    assert text == "2.0.0\n", f"{VERSION} should be '2.0.0' (a BREAKING entry means MAJOR), found {text!r}"


def test_changes_has_release_header():
    text = CHANGES.read_text()
    assert text == EXPECTED_CHANGES, f"{CHANGES} should read exactly:\n{EXPECTED_CHANGES}\nfound:\n{text}"


def test_fragments_kept():
    for number in (98, 102, 117, 121, 124, 133, 139):
        path = RELEASE / "fragments" / f"{number}.txt"
        assert path.is_file(), f"{path} must stay in place until the release is packaged"
