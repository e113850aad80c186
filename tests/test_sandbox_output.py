"""Unit tests of the bounded capture and the model-facing text (no Docker)."""

from __future__ import annotations

import re

from engine.sandbox.framing import encode_payload
from engine.sandbox.output import (
    HEAD_CHARS,
    TAIL_CHARS,
    BoundedCapture,
    cap_text,
    decode_safely,
    model_text,
    observation,
    status_line,
)


def test_capture_keeps_everything_while_it_fits() -> None:
    cap = BoundedCapture(head=8, tail=8)
    for piece in (b"abc", b"defgh", b"ij"):
        cap.write(piece)
    assert cap.data() == b"abcdefghij"
    assert cap.total == 10
    assert not cap.truncated


def test_capture_keeps_head_and_tail_and_counts_all() -> None:
    cap = BoundedCapture(head=4, tail=6)
    stream = bytes(range(256)) * 40  # 10,240 bytes in uneven pieces
    for i in range(0, len(stream), 37):
        cap.write(stream[i : i + 37])
    assert cap.total == len(stream)
    assert cap.truncated
    assert cap.head == stream[:4]
    assert cap.tail == stream[-6:]
    assert cap.data() == stream[:4] + stream[-6:]


def test_capture_one_write_larger_than_both_bounds() -> None:
    cap = BoundedCapture(head=3, tail=5)
    cap.write(memoryview(b"0123456789abcdef"))
    assert (cap.head, cap.tail, cap.total) == (b"012", b"bcdef", 16)


def test_decode_replaces_invalid_utf8_and_neutralizes_controls() -> None:
    raw = b"ok\ttab\r\nline\x1b[31mred\x00nul\x07\xff\xfeend\rcr\xc2\x85c1"
    text = decode_safely(raw)
    assert text == "ok\ttab\nline\\x1b[31mred\\x00nul\\x07\ufffd\ufffdend\\x0dcr\\x85c1"
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", text)


def test_cap_text_exact_boundaries() -> None:
    fits = "x" * (HEAD_CHARS + TAIL_CHARS)
    assert cap_text(fits) == fits
    longer = "a" * HEAD_CHARS + "MIDDLE" + "z" * TAIL_CHARS
    assert cap_text(longer) == (
        "a" * HEAD_CHARS + "\n[... 6 characters omitted ...]\n" + "z" * TAIL_CHARS
    )


def test_model_text_counts_the_gap_of_a_truncated_capture() -> None:
    head = b"h" * 5000
    tail = b"t" * 5000
    text = model_text(head, tail, total=5000 + 1_000_000 + 5000)
    omitted = 5000 - HEAD_CHARS + 5000 - TAIL_CHARS + 1_000_000
    assert (
        text == "h" * HEAD_CHARS + f"\n[... {omitted} characters omitted ...]\n" + "t" * TAIL_CHARS
    )


def test_model_text_without_gap_is_the_capped_whole() -> None:
    data = "".join(f"{i}\n" for i in range(2000)).encode()
    assert model_text(data, b"", len(data)) == cap_text(data.decode())


def test_observation_formats() -> None:
    assert observation("", 0, False) == "[exit code 0]"
    assert observation("hi", 2, False) == "hi\n[exit code 2]"
    assert observation("hi\n", None, True, "killed") == "hi\n[timed out]\n[killed]"
    assert status_line(None, False) == "[no exit code]"


def test_payload_is_one_line_of_printable_ascii_that_round_trips() -> None:
    command = "echo 'é\\n' \"$HOME\"\n\tprintf '%s' \x01 ; cat <<EOF\nEOF\x7f"
    payload = encode_payload(command)
    assert re.fullmatch(rb"[\x20-\x7e]*", payload)
    # What bash's `printf %b` does with it: every \xHH back to its byte.
    decoded = re.sub(rb"\\x([0-9a-f]{2})", lambda m: bytes([int(m.group(1), 16)]), payload)
    assert decoded == command.encode()


def test_model_text_equals_capping_the_safely_decoded_whole() -> None:
    samples = [
        b"\0" * 5000,
        bytes(range(256)) * 40,
        b"line\r\n" * 1000,
        "é€😀\u0085".encode() * 700,
        b"\xc2\x85\x1b[0m" * 900,
        b"short\x1b",
        b"x" * 3000,
        b"x" * 2999 + b"\x01",
    ]
    for data in samples:
        assert model_text(data, b"", len(data)) == cap_text(decode_safely(data)), data[:20]
