"""Verifier discrimination (docs/verifier.md, "Discrimination audit"): would the tests notice
wrong output?

For each file the reference created or changed that a test file names, `validate` regrades the
reference's result with the file mutated four ways. The emptied file must fail, and at least one
other applicable mutation must fail; otherwise the grader accepts wrong output.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath

MUTATIONS = ("empty", "drop_last_line", "bump_first_digit", "duplicate_first_line")
DIGITS = b"0123456789"


def mutate(data: bytes, kind: str) -> bytes | None:
    """`data` mutated by `kind`, or None when the mutation does not apply (it would change
    nothing: an empty file, no digit)."""
    lines = data.splitlines(keepends=True)
    if kind == "empty":
        out = b""
    elif kind == "drop_last_line":
        out = b"".join(lines[:-1])
    elif kind == "bump_first_digit":
        match = re.search(rb"[0-9]", data)
        if match is None:
            return None
        i = match.start()
        out = data[:i] + bytes([DIGITS[(data[i] - 48 + 1) % 10]]) + data[i + 1 :]
    elif kind == "duplicate_first_line":
        if not lines:
            return None
        first = lines[0] if lines[0].endswith((b"\n", b"\r")) else lines[0] + b"\n"
        out = first + data
    else:
        raise ValueError(f"mutation '{kind}': expected one of {', '.join(MUTATIONS)}")
    return None if out == data else out


def mutations(data: bytes) -> dict[str, bytes]:
    """Every applicable mutation of `data`, by name, in MUTATIONS order."""
    out = {}
    for kind in MUTATIONS:
        mutated = mutate(data, kind)
        if mutated is not None:
            out[kind] = mutated
    return out


def candidate_files(
    changed: Iterable[str],
    test_sources: Mapping[str, str | bytes],
    *,
    home: str = "/home/user",
    workdir: str = "/home/user",
) -> list[str]:
    """The paths (absolute, in the container) among `changed` (created or changed by the
    reference) that a test file names: by absolute path, by path relative to the home or the
    workdir, or by file name standing as its own word. Sorted."""
    texts = [
        s.decode("utf-8", "replace") if isinstance(s, bytes) else s for s in test_sources.values()
    ]
    found = []
    for path in sorted(set(changed)):
        names = {path, PurePosixPath(path).name}
        for base in (home, workdir):
            base = base.rstrip("/") + "/"
            if path.startswith(base):
                names.add(path[len(base) :])
        if any(_names(text, name) for text in texts for name in names if name):
            found.append(path)
    return found


def _names(text: str, name: str) -> bool:
    # The name must not be part of a longer file name ("out.txt" is not named by "about.txt").
    pattern = r"(?<![\w.\-])" + re.escape(name) + r"(?![\w\-]|\.\w)"
    return re.search(pattern, text) is not None


def discriminates(failed: Mapping[str, bool | None]) -> tuple[bool, str]:
    """Judge one file's mutations: failed[kind] is True when the tests failed on that mutation,
    False when they still passed, None (or absent) when it did not apply.
    Returns (ok, reason)."""
    if failed.get("empty") is None:
        return False, "the reference's file is empty, so emptying it shows nothing"
    if not failed["empty"]:
        return False, "the tests pass with the file emptied"
    others = {k: v for k, v in failed.items() if k != "empty" and v is not None}
    if not others:
        return False, "no other mutation applies to the file"
    if not any(others.values()):
        return False, f"the tests pass with every other mutation ({', '.join(sorted(others))})"
    caught = sorted(k for k, v in others.items() if v)
    return True, f"caught: empty, {', '.join(caught)}"
