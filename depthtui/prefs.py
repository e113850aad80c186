"""The TUI's remembered choices (the Runs screen's columns and sort), in ONE place: the JSON file
`$XDG_CONFIG_HOME/depthtui/tui.json` (default `~/.config/depthtui/tui.json`).

They are the user's, not the store's: the same columns show whichever store is opened, and a
read-only store can still be browsed the way the user likes. A file that cannot be read or
parsed is reported and ignored (the defaults show); it is only replaced when a choice is saved.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

FILE_NAME = "tui.json"


class PrefsError(ValueError):
    """The preferences file exists but cannot be read or written; the message names it."""


def prefs_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base).expanduser() / "depthtui" / FILE_NAME


def load_section(section: str) -> dict[str, Any]:
    """One screen's saved choices ({} when none were saved). PrefsError when the file is bad."""
    path = prefs_path()
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise PrefsError(f"{path}: cannot read the TUI's preferences ({exc.strerror})") from exc
    except ValueError as exc:
        raise PrefsError(f"{path}: not valid JSON ({exc}); the defaults are shown") from exc
    if not isinstance(data, dict):
        raise PrefsError(f"{path}: expected a JSON object, found {type(data).__name__}")
    value = data.get(section, {})
    if not isinstance(value, dict):
        raise PrefsError(f"{path}: '{section}' should be an object, found {type(value).__name__}")
    return value


def save_section(section: str, value: dict[str, Any]) -> None:
    """Replace one screen's choices, keeping the others' (written whole, then renamed in place,
    so a crash never leaves half a file)."""
    path = prefs_path()
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            data = {}
    except (OSError, ValueError):
        data = {}  # a bad file is replaced by a good one holding this choice
    data[section] = value
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
        tmp.replace(path)
    except OSError as exc:
        raise PrefsError(f"{path}: cannot save the TUI's preferences ({exc.strerror})") from exc
