"""A JSON column as the screens read it: an empty or unreadable value is the default.

Views show what is stored and never fail on it, so a column written by an older version (or
damaged) reads as empty rather than stopping a screen.
"""

from __future__ import annotations

import json
from typing import Any


def json_or(text: str | None, default: Any) -> Any:
    if not text:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default
