"""The four discrimination mutations, candidate files, and the audit's judgement."""

from __future__ import annotations

import pytest

from engine.verify.mutations import (
    MUTATIONS,
    accepted,
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
        # each applicable one of m1-m3 must fail; m4 is reported only
        (
            {"empty": True, "drop_last_line": True, "bump_first_digit": True},
            True,
            "caught: m1, m2, m3",
        ),
        (
            {"empty": True, "drop_last_line": True, "duplicate_first_line": False},
            True,
            "reported: they pass with m4",
        ),
        # a digit changed passes while a dropped line fails: on main this passed the audit
        (
            {"empty": True, "drop_last_line": True, "bump_first_digit": False},
            False,
            "m3 (bump_first_digit)",
        ),
        ({"empty": True, "drop_last_line": False, "duplicate_first_line": False}, False, "m2"),
        ({"empty": False, "drop_last_line": True}, False, "m1 (empty)"),
        ({"empty": None, "drop_last_line": True}, False, "empty"),
        ({"empty": True, "bump_first_digit": None}, True, "caught: m1"),
    ],
)
def test_discriminates(failed, ok, needle):
    verdict, reason = discriminates(failed)
    assert verdict is ok
    assert needle in reason


def test_accepted_lists_required_mutations_the_tests_passed():
    failed = {
        "empty": True,
        "drop_last_line": False,
        "bump_first_digit": False,
        "duplicate_first_line": False,
    }
    assert accepted(failed) == ["drop_last_line", "bump_first_digit"]
