"""A verifier's output read by this process as it comes, kept bounded (issue 24).

What a Harbor `test.sh` prints can be the agent's to choose: a test.sh that prints the agent's
output file prints /dev/zero when the agent made that file a link to it. Written to a file on
the host, that was gigabytes in seconds. Here the container's streams come over an attach
socket opened before the start (the engine logs nothing: log driver "none"); a head and a tail
of HEAD_BYTES each are kept and the full size is counted, so the host holds a few hundred KiB
whatever is printed, and the caller stops the run past its limit.
"""

from __future__ import annotations

import contextlib
import socket

import docker

from engine.sandbox.dockerapi import ExecStream

HEAD_BYTES = 64 * 1024
TAIL_BYTES = 64 * 1024


class BoundedOutput:
    """The first HEAD_BYTES and the last TAIL_BYTES of a stream, and its full size."""

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> None:
        self._head_max = head
        self._tail_max = tail
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_max - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data[-self._tail_max :]
            if len(self._tail) > self._tail_max:
                del self._tail[: len(self._tail) - self._tail_max]

    def text(self) -> bytes:
        """Head and tail, with a line saying how much was left out between them."""
        left_out = self.total - len(self._head) - len(self._tail)
        if left_out <= 0:
            return bytes(self._head + self._tail)
        note = f"\n[... {left_out} bytes left out of {self.total} ...]\n".encode()
        return bytes(self._head) + note + bytes(self._tail)


class Attached:
    """A container's stdout and stderr, multiplexed, read from its attach socket."""

    def __init__(self, stream: ExecStream, keep: object = None) -> None:
        self._stream = stream
        self._keep = keep  # the SDK's socket object, which holds the HTTP response open
        self.ended = False

    def read_into(self, sink: BoundedOutput, timeout: float) -> None:
        """What arrives within `timeout` seconds, both streams into `sink`; `ended` at the end."""
        frames = self._stream.read(timeout)
        if frames is None:
            self.ended = True
            return
        for _, payload in frames:
            sink.add(payload)

    def close(self) -> None:
        """Shut the connection down now: a plain close leaves it open while the SDK's socket
        object holds a reference, and the engine, blocked writing to it, would not end the
        container (its kill waited a minute)."""
        with contextlib.suppress(OSError):
            self._stream.sock.shutdown(socket.SHUT_RDWR)
        self._stream.close()
        with contextlib.suppress(OSError, AttributeError):
            self._keep.close()  # type: ignore[union-attr]


def attach(api: docker.APIClient, container_id: str) -> Attached:
    """The output streams of a created container, attached before it starts."""
    raw = api.attach_socket(container_id, params={"stdout": 1, "stderr": 1, "stream": 1, "logs": 0})
    sock = getattr(raw, "_sock", raw)
    sock.settimeout(None)
    return Attached(ExecStream(sock), keep=raw)
