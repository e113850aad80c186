"""Verifier discrimination (docs/verifier.md, "Discrimination audit"): would the tests notice
wrong output?

For each file the reference created or changed that a test file names, `validate` regrades the
reference's result with the file mutated four ways (the recovery bench's m1-m4): m1 emptied, m2 the
last line dropped, m3 the first digit changed, m4 the first line duplicated. Each applicable one of
m1-m3 must fail; m4 is reported only (a duplicated header line can be legitimately harmless).
Otherwise the grader accepts wrong output, and every passing run of the task is a suspected false
positive naming the mutation and the file (store/triage.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import PurePosixPath

from store.vocab import MUTATION_CODES

MUTATIONS = ("empty", "drop_last_line", "bump_first_digit", "duplicate_first_line")
DIGITS = b"0123456789"
# The recovery bench's names for the mutations, in MUTATIONS order.
CODES = MUTATION_CODES
# The mutations that must fail where they apply; the others are reported only.
REQUIRED = ("empty", "drop_last_line", "bump_first_digit")


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
    Each applicable one of REQUIRED must fail (m1 must apply: a file the reference leaves empty
    shows nothing). Returns (ok, reason)."""
    if failed.get("empty") is None:
        return False, "the reference's file is empty, so emptying it shows nothing"
    missed = accepted(failed)
    if missed:
        return False, "the tests pass with " + ", ".join(describe(k) for k in missed)
    caught = [k for k in MUTATIONS if failed.get(k)]
    note = ""
    if failed.get("duplicate_first_line") is False:
        note = f"; reported: they pass with {describe('duplicate_first_line')}"
    return True, f"caught: {', '.join(CODES[k] for k in caught)}{note}"


def accepted(failed: Mapping[str, bool | None]) -> list[str]:
    """The REQUIRED mutations that applied and that the tests still passed, in order."""
    return [k for k in REQUIRED if failed.get(k) is False]


def describe(kind: str) -> str:
    """'m3 (bump_first_digit)'."""
    return f"{CODES[kind]} ({kind})"
