"""Model output that is not valid Unicode, kept without loss (docs/outcomes.md).

Endpoints send lone UTF-16 surrogates (`"\\ud83d"` when an emoji is cut in half). Python decodes
them into a str that cannot be encoded to UTF-8, so neither SQLite nor the shell can take it.
What the model sent is stored as received, each such code point written as its `\\uXXXX` escape;
a command runs with U+FFFD in their place, and its observation says so.
"""

from __future__ import annotations

import re
from typing import Any

LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def escaped(text: str) -> str:
    """`text` with each lone surrogate written as its escape (`\\ud83d`): valid Unicode that
    still says exactly what was received."""
    return LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def escaped_json(value: Any) -> Any:
    """A parsed JSON document with every string (keys too) escaped as `escaped` does."""
    if isinstance(value, str):
        return escaped(value)
    if isinstance(value, dict):
        return {escaped_json(k): escaped_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [escaped_json(v) for v in value]
    return value


def runnable(command: str) -> tuple[str, str]:
    """(the command as the shell can run it, a note for its observation or "")."""
    found = LONE_SURROGATE.findall(command)
    if not found:
        return command, ""
    codes = ", ".join(dict.fromkeys(f"\\u{ord(c):04x}" for c in found))
    note = (
        f"[note] the command held {len(found)} code point(s) that are not valid Unicode "
        f"(lone surrogates: {codes}); it ran with U+FFFD in their place"
    )
    return LONE_SURROGATE.sub(REPLACEMENT, command), note
