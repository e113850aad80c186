"""The least of RFC 6455 that OpenEnv's client needs on `/ws`: the opening handshake and
unfragmented text frames each way (the client sends masked frames; the server answers
unmasked), pings answered, a close frame ending the session. Written on the standard library so
the server needs no web framework."""

from __future__ import annotations

import base64
import hashlib
import struct
from typing import BinaryIO

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT, CLOSE, PING, PONG, CONT = 0x1, 0x8, 0x9, 0xA, 0x0
MAX_MESSAGE = 16 * 1024 * 1024  # a step's command is small; refuse anything absurd


class Closed(Exception):
    """The peer closed the connection (or sent what this server does not speak)."""


def accept_key(key: str) -> str:
    """Sec-WebSocket-Accept for the client's Sec-WebSocket-Key."""
    return base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()


def read_message(rfile: BinaryIO, wfile: BinaryIO) -> str:
    """The next text message (answering pings on the way). Raises Closed at the end."""
    parts: list[bytes] = []
    while True:
        opcode, fin, payload = _read_frame(rfile)
        if opcode == CLOSE:
            raise Closed("closed by the client")
        if opcode == PING:
            _write_frame(wfile, PONG, payload)
            continue
        if opcode == PONG:
            continue
        if opcode not in (TEXT, CONT):
            raise Closed(f"opcode {opcode} is not spoken here")
        parts.append(payload)
        if sum(len(p) for p in parts) > MAX_MESSAGE:
            raise Closed("message too large")
        if fin:
            return b"".join(parts).decode("utf-8")


def send_text(wfile: BinaryIO, text: str) -> None:
    _write_frame(wfile, TEXT, text.encode("utf-8"))


def send_close(wfile: BinaryIO) -> None:
    try:
        _write_frame(wfile, CLOSE, struct.pack("!H", 1000))
    except OSError:
        pass  # the peer is already gone


def _read_exact(rfile: BinaryIO, n: int) -> bytes:
    data = rfile.read(n)
    if data is None or len(data) < n:
        raise Closed("connection ended")
    return data


def _read_frame(rfile: BinaryIO) -> tuple[int, bool, bytes]:
    first, second = _read_exact(rfile, 2)
    fin, opcode = bool(first & 0x80), first & 0x0F
    masked, length = bool(second & 0x80), second & 0x7F
    if length == 126:
        (length,) = struct.unpack("!H", _read_exact(rfile, 2))
    elif length == 127:
        (length,) = struct.unpack("!Q", _read_exact(rfile, 8))
    if length > MAX_MESSAGE:
        raise Closed("frame too large")
    mask = _read_exact(rfile, 4) if masked else b""
    payload = _read_exact(rfile, length)
    if masked:
        payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return opcode, fin, payload


def _write_frame(wfile: BinaryIO, opcode: int, payload: bytes) -> None:
    header = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        header += bytes([n])
    elif n < 1 << 16:
        header += bytes([126]) + struct.pack("!H", n)
    else:
        header += bytes([127]) + struct.pack("!Q", n)
    wfile.write(header + payload)
    wfile.flush()
