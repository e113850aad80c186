"""The filter language the triage and runs screens share: `key:value` parts (each a substring of
that field, case-insensitive) and bare words (substrings of the row's free text); every part must
match. A `key:` the screen does not know is read as a bare word, so a typo narrows to nothing
instead of being ignored."""

from __future__ import annotations

from collections.abc import Mapping


def query_matches(fields: Mapping[str, str], text: str, query: str) -> bool:
    """Whether a row with these `fields` (key -> value) and free `text` matches `query`."""
    text = text.lower()
    for part in query.lower().split():
        key, _, value = part.partition(":")
        if value and key in fields:
            if value not in fields[key].lower():
                return False
        elif part not in text:
            return False
    return True
