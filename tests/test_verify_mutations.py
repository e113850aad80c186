"""The four discrimination mutations, candidate files, and the audit's judgement."""

from __future__ import annotations

import pytest

from engine.verify.mutations import (
    MUTATIONS,
    candidate_files,
    discriminates,
    mutate,
    mutations,
)


@pytest.mark.parametrize(
    ("data", "kind", "expected"),
    [
        (b"a 1\nb 2\n", "empty", b""),
        (b"", "empty", None),
        (b"a 1\nb 2\n", "drop_last_line", b"a 1\n"),
        (b"a 1\nb 2", "drop_last_line", b"a 1\n"),
        (b"only\n", "drop_last_line", b""),
        (b"", "drop_last_line", None),
        (b"total: 19 items\n", "bump_first_digit", b"total: 29 items\n"),
        (b"x9y", "bump_first_digit", b"x0y"),
        (b"no digits\n", "bump_first_digit", None),
        (b"h1\nrow\n", "duplicate_first_line", b"h1\nh1\nrow\n"),
        (b"one", "duplicate_first_line", b"one\none"),
        (b"", "duplicate_first_line", None),
    ],
)
def test_mutate(data, kind, expected):
    assert mutate(data, kind) == expected


def test_mutations_lists_applicable_only():
    assert list(mutations(b"name,count\nx,3\n")) == list(MUTATIONS)
    assert list(mutations(b"hello\n")) == ["empty", "drop_last_line", "duplicate_first_line"]
    with pytest.raises(ValueError, match="'shuffle'"):
        mutate(b"x", "shuffle")


def test_candidate_files():
    changed = [
        "/home/user/out/report.csv",
        "/home/user/about.txt",
        "/home/user/notes.md",
        "/home/user/run.log",
    ]
    tests = {
        "test_final_state.py": 'REPORT = HOME / "out" / "report.csv"\nOUT = "/home/user/run.log"\n',
        "helper.py": b"# reads out.txt and notes.md.bak\n",
    }
    assert candidate_files(changed, tests) == ["/home/user/out/report.csv", "/home/user/run.log"]
    # by path relative to the workdir
    assert candidate_files(["/app/data/x.json"], {"t.py": "open('data/x.json')"}, workdir="/app")


@pytest.mark.parametrize(
    ("failed", "ok", "needle"),
    [
        ({"empty": True, "drop_last_line": False, "bump_first_digit": True}, True, "caught"),
        ({"empty": True, "drop_last_line": False, "duplicate_first_line": False}, False, "every"),
        ({"empty": False, "drop_last_line": True}, False, "emptied"),
        ({"empty": None, "drop_last_line": True}, False, "empty"),
        ({"empty": True, "bump_first_digit": None}, False, "no other"),
    ],
)
def test_discriminates(failed, ok, needle):
    verdict, reason = discriminates(failed)
    assert verdict is ok
    assert needle in reason
