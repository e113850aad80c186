"""Step 'changelog': CHANGES.md built from the fragments, fragments still in place."""

import hashlib
from pathlib import Path

RELEASE = Path("/home/user/release")
CHANGES = RELEASE / "CHANGES.md"
# The fragments as shipped: a later step needs them, untouched.
FRAGMENT_SHA256 = {
    "98.txt": "76e41257217e4c2377f357041c03174d8fad92d5d0cc8551f8b7b159e5c1f1ca",
    "102.txt": "44bf4a91061b235a2629eadba74f47b442dda53fbf4de4a13ddc55996900474c",
    "117.txt": "ca50197d3e9b6b645a357d230a30f1d98ae8c527a68f96ae877d0238cf2cef99",
    "121.txt": "d370cde9ebfd7ea408de67421f1202be5830210c1535287b9b0aa4986eaa320b",
    "124.txt": "adcc4e7e44da5b9929ef0bdf16eda746f652971d908ceb08097045b431c4afd5",
    "133.txt": "63725fa100c8694e9d843916846efc6d5eeff97fb5651dc578d22eb093974cfe",
    "139.txt": "d35940074b839be5a838e4c223238a0ad41d04ab0003a4a66db8d76108e1709c",
    "README": "015b4dce3ade5b70b08cd889411b4387613feac6455802146166bca4cf0182ad",
}
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
    for name, digest in FRAGMENT_SHA256.items():
        path = RELEASE / "fragments" / name
        assert path.is_file(), f"{path} must stay in place"
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{path} was modified"


def test_version_not_bumped_yet():
    assert (RELEASE / "VERSION").read_text() == "1.4.2\n", "VERSION must stay 1.4.2 in this step"
