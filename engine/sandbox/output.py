"""What a command printed, kept bounded, and the text the model is shown
(docs/work-and-turns.md).

Two bounds, for two readers: the store keeps the raw bytes up to a head and a tail of
`HEAD_BYTES`/`TAIL_BYTES` (so memory stays bounded whatever a command prints), and the model sees
at most the first `HEAD_CHARS` and the last `TAIL_CHARS` characters with the omitted count between.
"""

from __future__ import annotations

import re

# 32 KiB + 32 KiB per call: a reply's 32 calls of a megabyte each add 2 MiB to the store, not 32.
HEAD_BYTES = 32 * 1024
TAIL_BYTES = 32 * 1024
HEAD_CHARS = 2000
TAIL_CHARS = 1000

# C0 controls other than \t and \n, DEL, and the C1 range: a terminal would act on them, a model
# should see them as text, written out as `\xNN`.
_CONTROLS = [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]
_NEUTRAL = {c: f"\\x{c:02x}" for c in _CONTROLS}
# The same controls as UTF-8 bytes, for counting them without decoding character by character.
_C0_BYTES = bytes(c for c in _CONTROLS if c < 0x80)
_C1_UTF8 = re.compile(rb"\xc2[\x80-\x9f]")
# bash names the line of its input script in its errors; for the agent's commands that script is
# the harness's framing, whose line numbers mean nothing to the model (and tell it about the
# framing): `bash: line 78: x: command not found` is shown as `bash: x: command not found`.
_FRAMING_LINE = re.compile(r"^bash: (?:eval: )?line \d+: ", re.MULTILINE)


class BoundedCapture:
    """Keeps the first `head` bytes and the last `tail` bytes written, and counts them all."""

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        self.head_limit = head
        self.tail_limit = tail
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def write(self, data: bytes | memoryview) -> None:
        n = len(data)
        if not n:
            return
        self.total += n
        room = self.head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
            if not len(data):
                return
        if len(data) >= self.tail_limit:
            self._tail = bytearray(data[len(data) - self.tail_limit :])
            return
        self._tail += data
        excess = len(self._tail) - self.tail_limit
        if excess > 0:
            del self._tail[:excess]

    @property
    def truncated(self) -> bool:
        return self.total > len(self._head) + len(self._tail)

    @property
    def head(self) -> bytes:
        return bytes(self._head)

    @property
    def tail(self) -> bytes:
        return bytes(self._tail)

    def data(self) -> bytes:
        """Head then tail. When `truncated`, the gap lies right after the first `head_limit`
        bytes and `total - len(data())` bytes are missing there."""
        return bytes(self._head) + bytes(self._tail)


def _fold(data: bytes) -> str:
    return data.decode("utf-8", errors="replace").replace("\r\n", "\n")


def decode_safely(data: bytes) -> str:
    """Bytes as text a model can read: invalid UTF-8 becomes U+FFFD, CRLF becomes LF, and every
    other control character is written out as `\\xNN` so it cannot act on a terminal."""
    return _fold(data).translate(_NEUTRAL)


def _safe_length(data: bytes, folded: str) -> int:
    """len(decode_safely(data)), from `folded` (data decoded, CRLF folded) and byte counts: each
    control character grows by three when written out as `\\xNN`."""
    controls = len(data) - len(data.translate(None, _C0_BYTES)) - data.count(b"\r\n")
    controls += sum(1 for _ in _C1_UTF8.finditer(data))
    return len(folded) + 3 * controls


def cap_text(text: str) -> str:
    """The first 2,000 and the last 1,000 characters with `[... N characters omitted ...]`
    between (docs/work-and-turns.md)."""
    if len(text) <= HEAD_CHARS + TAIL_CHARS:
        return text
    omitted = len(text) - HEAD_CHARS - TAIL_CHARS
    return f"{text[:HEAD_CHARS]}\n[... {omitted} characters omitted ...]\n{text[-TAIL_CHARS:]}"


def model_text(head: bytes, tail: bytes, total: int) -> str:
    """cap_text(decode_safely(output)) of a bounded capture (head, tail and the byte total),
    without decoding a megabyte character by character. Bytes lost in the capture's gap count as
    one character each: the characters that were never kept cannot be counted."""
    gap = max(total - len(head) - len(tail), 0)
    if not gap:
        head, tail = head + tail, b""
    first_text, last_text = _fold(head), _fold(tail)
    length = _safe_length(head, first_text) + _safe_length(tail, last_text) + gap
    if length <= HEAD_CHARS + TAIL_CHARS:
        return (first_text + last_text).translate(_NEUTRAL)
    if not gap:
        last_text = first_text
    first = first_text[:HEAD_CHARS].translate(_NEUTRAL)[:HEAD_CHARS]
    last = last_text[-TAIL_CHARS:].translate(_NEUTRAL)[-TAIL_CHARS:]
    omitted = length - len(first) - len(last)
    return f"{first}\n[... {omitted} characters omitted ...]\n{last}"


def status_line(exit_code: int | None, timed_out: bool) -> str:
    """`[exit code N]` or `[timed out]` (docs/work-and-turns.md); the agent loop may add
    `; K command(s) left` inside the brackets."""
    if timed_out:
        return "[timed out]"
    if exit_code is None:
        return "[no exit code]"
    return f"[exit code {exit_code}]"


def observation(text: str, exit_code: int | None, timed_out: bool, note: str = "") -> str:
    """The model-facing result of one call: capped output, the status line, then the note."""
    parts = []
    if text:
        parts.append(text if text.endswith("\n") else text + "\n")
    parts.append(status_line(exit_code, timed_out))
    if note:
        parts.append(f"\n[{note}]")
    return "".join(parts)


def without_framing_lines(text: str) -> str:
    """`text` with bash's `line N: ` removed from its error lines (what the model is shown;
    the store keeps the raw output as printed). A nested `bash -c` loses its line numbers too:
    the two cannot be told apart from the text."""
    return _FRAMING_LINE.sub("bash: ", text)
