"""Make recorded text safe to draw: whatever an agent or a task printed must not drive our terminal.

Textual writes a widget's characters to the terminal as they are, so an ESC in a transcript would
reach the user's terminal (switch to the alternate screen, turn on mouse reporting, set the
window title through OSC, write the clipboard through OSC 52, ...). Every string from the store
goes through here before it is shown:

- SGR colour sequences (`ESC [ ... m`) may be kept, and are then turned into styles by
  `rich.text.Text.from_ansi`, which never passes them through raw;
- every other escape sequence (CSI, OSC, DCS, SOS, PM, APC, two-byte escapes, 8-bit C1 CSI),
  control byte and bidirectional override becomes visible, inert text (`␛[?1049h`, `␀`);
- CR LF becomes LF and a lone CR a line break, so progress bars read as lines.
"""

from __future__ import annotations

import re

from rich.text import Text

ESC_PICTURE = "␛"
SGR = re.compile(r"\x1b\[[0-9;:]*m")
_SEQUENCE = re.compile(
    r"""
      \x1b\[[0-?]*[\ -/]*[@-~]?          # CSI (SGR included; told apart below)
    | \x1b\][^\x07\x1b]*(?:\x07|\x1b\\)? # OSC, ended by BEL or ST (or not at all)
    | \x1b[PX^_][^\x1b]*(?:\x1b\\)?      # DCS, SOS, PM, APC
    | \x1b[\ -/]*[0-~]?                  # other escapes (ESC c, ESC 7, ESC ( B, a lone ESC)
    | \x9b[0-?]*[\ -/]*[@-~]?            # 8-bit CSI
    | [\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]  # other controls, bidi overrides
    """,
    re.VERBOSE,
)
_DIM_ON, _DIM_OFF = "\x1b[2m", "\x1b[22m"


def _visible(chunk: str) -> str:
    out = []
    for ch in chunk:
        code = ord(ch)
        if code == 0x1B:
            out.append(ESC_PICTURE)
        elif code < 0x20:
            out.append(chr(0x2400 + code))  # the Control Pictures block: ␀ ␇ ␈ ...
        elif code == 0x7F:
            out.append("␡")
        elif 0x80 <= code < 0xA0 or 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069:
            out.append(f"⟨U+{code:04X}⟩")
        else:
            out.append(ch)
    return "".join(out)


def sanitize(text: str, keep_sgr: bool = True) -> str:
    """The text with every escape and control made inert.

    With `keep_sgr`, colour sequences stay (only safe once parsed by `Text.from_ansi`), and the
    neutralised parts are dimmed; without it, nothing but printable text remains.
    """
    if not text:
        return ""
    text = text.replace("\r\n", "\n").replace("\r", "\n")

    def replace(m: re.Match[str]) -> str:
        seq = m.group()
        if keep_sgr and SGR.fullmatch(seq):
            return seq
        shown = _visible(seq)
        return _DIM_ON + shown + _DIM_OFF if keep_sgr else shown

    return _SEQUENCE.sub(replace, text)


def strip_sgr(text: str) -> str:
    return SGR.sub("", text)


def ansi_text(text: str, limit: int | None = None) -> Text:
    """Recorded output as styled text: colours kept, everything else inert."""
    if limit is not None and len(text) > limit:
        text = text[:limit]
    return Text.from_ansi(sanitize(text), end="")


def safe_text(text: str | None, limit: int | None = None, style: str = "") -> Text:
    """Recorded text shown as plain characters (commands, paths, model words, notes)."""
    text = text or ""
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    return Text(sanitize(text, keep_sgr=False), style=style, end="")


def one_line(text: str | None, limit: int = 80) -> Text:
    """The first line only, for table cells and lists."""
    first = (text or "").split("\n", 1)[0]
    return safe_text(first, limit)


def block(text: Text) -> Text:
    """`text` ending its own line, for stacking in a Group. The helpers above end texts with ""
    (right for table cells); in a Group such a text runs into whatever follows, and a Static
    whose last line is one is measured a line short (a lone one: no lines at all)."""
    text.end = "\n"
    return text
