"""Recorded text made safe to draw, and the virtualized output view's row index."""

from __future__ import annotations

import re

import pytest

from depthtui.widgets.output_view import wrap_rows
from depthtui.widgets.sanitize import SGR, ansi_text, one_line, safe_text, sanitize

HOSTILE = (
    "\x1b[31mred\x1b[0m \x1b[?1049h \x1b[?1000h\x1b[?1006h \x1b]0;title\x07 "
    "\x1b]52;c;ZXZpbA==\x1b\\ \x1bP+q544e\x1b\\ \x9b31m \x00\x07\x08\x0b\x0c\x7f "
    "\x1bc \x1b7 \x1b(B \x1b[6n \u202eevil\u202c \x1b"
)


def test_only_colour_sequences_survive() -> None:
    out = sanitize(HOSTILE)
    sequences = re.findall(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b.", out)
    assert sequences and all(SGR.fullmatch(s) for s in sequences)
    assert "\x1b[31m" in out and "\x1b[0m" in out  # the task's own colours are kept
    for raw in ("\x1b[?1049h", "\x1b[?1000h", "\x1b]0;", "\x1bP", "\x1b[6n", "\x1bc"):
        assert raw not in out
    assert not re.search(r"[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f-\x9f\u202a-\u202e]", out)


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[?1049h", "␛[?1049h"),
        ("\x1b]0;title\x07", "␛]0;title␇"),
        ("a\x00b", "a␀b"),
        ("\x9b31m", "⟨U+009B⟩31m"),
        ("\u202eabc", "⟨U+202E⟩abc"),
        ("\x1b[31mred\x1b[0m", "␛[31mred␛[0m"),
        ("tab\tstays", "tab\tstays"),
        ("cr\r\nlf\rbare", "cr\nlf\nbare"),
    ],
)
def test_neutralised_sequences_stay_visible(raw: str, shown: str) -> None:
    assert sanitize(raw, keep_sgr=False) == shown


def test_styled_text_never_holds_an_escape() -> None:
    text = ansi_text(HOSTILE)
    assert "\x1b" not in text.plain and "\x00" not in text.plain
    assert any("color(1)" in str(span.style) for span in text.spans)  # red kept as a style
    assert "\x1b" not in safe_text(HOSTILE).plain
    assert one_line("first\x1b[2J\nsecond").plain == "first␛[2J"


def test_rows_cover_the_text_and_never_split_a_colour_sequence() -> None:
    text = sanitize(("abc\x1b[32mdefgh\x1b[0mij" * 50) + "\n\nshort\n" + "x" * 95)
    rows = wrap_rows(text, 7)
    covered = "".join(text[s:e] for s, e, _ in rows)
    assert covered == text.replace("\n", "")
    for start, end, prefix in rows:
        visible = SGR.sub("", text[start:end])
        assert len(visible) <= 7
        assert not re.search(r"\x1b(?!\[[0-9;:]*m)", text[start:end])  # no cut sequence
        assert SGR.sub("", prefix) == ""  # a prefix is colour state only
    # a row that starts inside green text carries the colour forward
    assert any("\x1b[32m" in prefix for _, _, prefix in rows)


def test_a_5_mb_single_line_is_indexed_not_copied() -> None:
    line = "y" * (5 * 1024 * 1024)
    rows = wrap_rows(line, 118)
    assert len(rows) == -(-len(line) // 118)
    assert rows[0] == (0, 118, "") and rows[-1][1] == len(line)
