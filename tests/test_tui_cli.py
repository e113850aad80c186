"""The TUI's command-line doors: `depthtui` / `depthtui tui --db` (clear errors on a missing or
corrupt store, and the real app in a real pseudo-terminal) and `depthtui triage export`."""

from __future__ import annotations

import csv
import fcntl
import io
import json
import os
import pty
import re
import select
import sqlite3
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from depthtui.commands.tui import check_store
from store import triage, views
from store.db import SCHEMA_VERSION, Store, open_reader

pytest_plugins = ["tests.fixtures_tui"]

DEPTHTUI = str(Path(sys.executable).with_name("depthtui"))


def run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [DEPTHTUI, *args], capture_output=True, text=True, timeout=120, env=env or os.environ.copy()
    )


def flat(text: str) -> str:
    """Error text with the console's line wrapping undone."""
    return text.replace("\n", "")


def test_a_missing_store_is_a_clear_message(tmp_path: Path) -> None:
    result = run("tui", "--db", str(tmp_path / "none.db"))
    assert result.returncode == 1
    assert f"{tmp_path / 'none.db'}: no store here yet" in flat(result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    env = os.environ | {"DEPTHTUI_DB": str(tmp_path / "also-none.db")}
    bare = run(env=env)  # no command: the TUI on the default store
    assert bare.returncode == 1 and "also-none.db: no store here yet" in flat(bare.stderr)


def test_a_corrupt_store_is_left_untouched(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"this is not sqlite\x00" * 100)
    before = bad.read_bytes()
    result = run("tui", "--db", str(bad))
    assert result.returncode == 1
    assert "not a readable depthtui store" in flat(result.stderr)
    assert "Traceback" not in result.stderr
    assert bad.read_bytes() == before
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.commit()
    conn.close()
    result = run("tui", "--db", str(other))
    assert result.returncode == 1
    assert "not a depthtui store (it has tables notes" in flat(result.stderr)


def test_an_empty_file_is_upgraded_to_a_store(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    check_store(empty)
    conn = open_reader(empty)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_triage_export_json_and_csv(tmp_path: Path, synthetic_db: Path, landmarks) -> None:
    with Store(synthetic_db) as store:
        triage.set_label(store, landmarks.collateral, "collateral", "real", 'deleted "notes", sure')
        triage.set_label(store, landmarks.replay_disagrees, "false_positive", "false_positive")
    result = run("triage", "export", "--db", str(synthetic_db), "--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [(r["episode_id"], r["queue"], r["label"], r["note"]) for r in rows] == [
        (landmarks.collateral, "collateral", "real", 'deleted "notes", sure'),
        (landmarks.replay_disagrees, "false_positive", "false_positive", ""),
    ]
    assert rows[0]["task_id"] and rows[0]["agent"] and rows[0]["created_at"]
    # why each is in its queue, and where the collateral damage was
    conn = open_reader(synthetic_db)
    site = views.collateral_site(conn, landmarks.collateral)
    conn.close()
    assert rows[0]["path"] == site.path and site.path in rows[0]["reasons"]
    assert rows[1]["reasons"].startswith("replay of episode ") and rows[1]["path"] is None
    out = tmp_path / "labels.csv"
    result = run("triage", "export", "--db", str(synthetic_db), "--csv", "--out", str(out))
    assert result.returncode == 0 and f"wrote labels to {out}" in flat(result.stderr)
    parsed = list(csv.DictReader(io.StringIO(out.read_text())))
    assert [r["note"] for r in parsed] == ['deleted "notes", sure', ""]
    both = run("triage", "export", "--db", str(synthetic_db), "--csv", "--json")
    assert both.returncode == 1 and "--json and --csv: choose one format" in flat(both.stderr)
    missing = run("triage", "export", "--db", str(tmp_path / "nope.db"))
    assert missing.returncode == 1 and "no store here yet" in flat(missing.stderr)


ESCAPES = re.compile(rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|.)")


def _read_until(fd: int, needle: bytes, seconds: float) -> bytes:
    """What the app drew, escapes removed, once `needle` shows (or the time is up)."""
    seen = b""
    deadline = time.monotonic() + seconds
    while needle not in ESCAPES.sub(b"", seen) and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
    return ESCAPES.sub(b"", seen)


def test_the_real_app_runs_in_a_terminal_and_quits_on_q(tmp_path: Path, synthetic_db: Path) -> None:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = os.environ | {"TERM": "xterm-256color", "DEPTHTUI_DB": str(synthetic_db)}
    proc = subprocess.Popen(
        [DEPTHTUI], stdin=slave, stdout=slave, stderr=slave, env=env, close_fds=True
    )
    os.close(slave)
    try:
        screen = _read_until(master, b"endless-sample", 60)
        assert b"Headline figures" in screen and b"endless-sample" in screen
        # keys go in once the driver reads input; until then a press may be dropped
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            os.write(master, b"q")
            _read_until(master, b"\x00never", 0.5)
        assert proc.wait(timeout=5) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
