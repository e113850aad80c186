"""Final state of config-edit: the settings of changes.txt applied, nothing else changed."""

import hashlib
from pathlib import Path

APP = Path("/home/user/app")
CONFIG = APP / "config.ini"
BACKUP = APP / "config.ini.orig"
CHANGES = APP / "changes.txt"
ORIGINAL_SHA256 = "a6385bc4b545f0c21bb2817cc79ba2a17b0de93395e5232e72648dad4ed12e4f"
CHANGES_SHA256 = "5e9f67f738a0c59667f699f4af474b5517f166e9e0ddbb93ae49ba1660f9c0b0"

EXPECTED = """# orders service configuration (managed by hand, keep comments)
[server]
host = 0.0.0.0
port = 9090
workers = 4
timeout = 30

[database]
host = db.internal
port = 5432
name = orders
pool_size = 25

[logging]
level = warning
file = /var/log/orders/app.log
rotate_mb = 64
"""


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_config_exists():
    assert CONFIG.is_file(), f"{CONFIG} is missing"


def test_config_has_every_change_and_nothing_else():
    text = CONFIG.read_text()
    if not text.endswith("\n"):
        text += "\n"
    assert text.split("\n") == EXPECTED.split("\n"), (
        f"{CONFIG} should read exactly:\n{EXPECTED}\nfound:\n{text}"
    )


def test_database_port_untouched():
    lines = CONFIG.read_text().splitlines()
    start = lines.index("[database]")
    assert "port = 5432" in lines[start:], "the [database] port must stay 5432"


def test_backup_is_the_original():
    assert BACKUP.is_file(), f"{BACKUP} is missing"
    assert sha256(BACKUP) == ORIGINAL_SHA256, f"{BACKUP} is not a byte-identical copy of the original"


def test_changes_file_unchanged():
    assert CHANGES.is_file(), f"{CHANGES} is missing"
    assert sha256(CHANGES) == CHANGES_SHA256, f"{CHANGES} was modified"
