"""The connection to the Docker engine: one clear error when none answers, and exec streams we
read ourselves.

`docker exec` output arrives multiplexed: 8-byte frame headers (stream 1 = stdout, 2 = stderr, then
a big-endian payload size). The SDK's `exec_start(socket=True)` hands back a socket whose HTTP
response was read through a buffer that may already hold the first frames, so the hijacked stream
is opened here by hand over the engine's own socket (unix or plain TCP); other transports (ssh,
TLS) fall back to the SDK's socket.
"""

from __future__ import annotations

import json
import os
import select
import socket
import struct
import time
from urllib.parse import urlparse

import docker
import docker.errors
from docker.utils import parse_host

from engine.sandbox.base import SandboxError

DEFAULT_HOST = "unix:///var/run/docker.sock"
STDOUT = 1
STDERR = 2
_HEADER = struct.Struct(">BxxxI")
# Below this a send cannot block on a process that does not read: the socket's buffer (Linux's
# default for a unix socket is 208 KiB) holds it.
_FITS_BUFFERS = 64 * 1024


def engine_address() -> str:
    """Where the Docker engine is expected, as the user would write it."""
    return os.environ.get("DOCKER_HOST") or DEFAULT_HOST


def engine_is_local() -> bool:
    """True when the engine runs on this machine's kernel (a unix socket)."""
    return parse_host(engine_address()).startswith("http+unix://")


def connect(timeout: float = 120.0) -> docker.DockerClient:
    """A client for the engine named by DOCKER_HOST (default: the local socket), or one
    SandboxError("docker", ...) that says how to get one."""
    try:
        client = docker.from_env(timeout=int(timeout))
        client.ping()
    except docker.errors.DockerException as exc:
        raise SandboxError(
            "docker",
            f"no Docker engine answers at {engine_address()} ({_first_line(exc)}): "
            "run docker/setup.sh (or set DOCKER_HOST to a running engine)",
        ) from None
    return client


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


# How long the engine may still call a container paused after it was unpaused: it sets the
# paused state again when containerd's "paused" event arrives after the unpause that followed
# (1 in 200 quick pause/unpause pairs here, then an exec was refused as paused).
PAUSE_LAG_S = 2.0


def create_exec(
    api: docker.APIClient, container_id: str, argv: list[str], **options: object
) -> str:
    """`api.exec_create`'s Id; an exec refused because the container is paused is tried again
    for PAUSE_LAG_S (the harness never execs into a container it holds frozen)."""
    deadline = time.monotonic() + PAUSE_LAG_S
    while True:
        try:
            return api.exec_create(container_id, argv, **options)["Id"]
        except docker.errors.APIError as exc:
            if "is paused" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


class FrameReader:
    """Turns the bytes of a multiplexed stream into (stream, payload) pairs, incrementally."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        if not self._buf and len(data) >= 8:
            stream, size = _HEADER.unpack_from(data)
            if len(data) == 8 + size:  # one whole frame, the common case: no buffer to keep
                return [(stream, data[8:])]
        self._buf += data
        frames: list[tuple[int, bytes]] = []
        view = memoryview(self._buf)
        pos = 0
        end = len(self._buf)
        while end - pos >= 8:
            stream, size = _HEADER.unpack_from(view, pos)
            if end - pos - 8 < size:
                break
            frames.append((stream, bytes(view[pos + 8 : pos + 8 + size])))
            pos += 8 + size
        view.release()
        if pos:
            del self._buf[:pos]
        return frames


class ExecStream:
    """The attached stdin/stdout/stderr of one started exec."""

    def __init__(self, sock: socket.socket, leftover: bytes = b"") -> None:
        self.sock = sock
        self.frames = FrameReader()
        self._pending = leftover
        self.closed = False

    def send(self, data: bytes, deadline: float | None = None) -> None:
        """All of `data`; with a `deadline` (time.monotonic), TimeoutError when the process has
        not taken it by then. What fits the socket's and the pipe's buffers never waits."""
        try:
            if deadline is None or len(data) <= _FITS_BUFFERS:
                self.sock.sendall(data)
                return
            self.sock.settimeout(max(deadline - time.monotonic(), 0.001))
            try:
                self.sock.sendall(data)
            finally:
                self.sock.settimeout(None)
        except TimeoutError:
            raise
        except OSError as exc:
            raise SandboxError("shell", f"the shell's input is closed ({exc})") from None

    def close_input(self) -> None:
        """Half-close: the process reads end-of-file on stdin."""
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def read(self, timeout: float | None) -> list[tuple[int, bytes]] | None:
        """Frames that arrive within `timeout` seconds ([] when none); None at end of stream."""
        if self._pending:
            data, self._pending = self._pending, b""
            return self.frames.feed(data)
        if timeout is not None:
            ready, _, _ = select.select([self.sock], [], [], max(timeout, 0.0))
            if not ready:
                return []
        try:
            data = self.sock.recv(262144)
        except (BlockingIOError, InterruptedError):
            return []
        except OSError:
            data = b""
        if not data:
            self.closed = True
            return None
        return self.frames.feed(data)

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.close()
        except OSError:
            pass


def start_exec(api: docker.APIClient, exec_id: str, timeout: float = 30.0) -> ExecStream:
    """POST /exec/{id}/start with an upgrade to a raw stream, keeping every byte after the
    response headers."""
    address = parse_host(engine_address())
    url = urlparse(address)
    if os.environ.get("DOCKER_TLS_VERIFY") or url.scheme not in ("http+unix", "http"):
        raw = api.exec_start(exec_id, socket=True)
        sock = getattr(raw, "_sock", raw)
        return ExecStream(sock)
    if url.scheme == "http+unix":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        target: object = url.path
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        target = (url.hostname, url.port or 2375)
    sock.settimeout(timeout)
    body = json.dumps({"Detach": False, "Tty": False}).encode()
    request = (
        f"POST /v{api.api_version}/exec/{exec_id}/start HTTP/1.1\r\n"
        "Host: docker\r\nContent-Type: application/json\r\n"
        "Connection: Upgrade\r\nUpgrade: tcp\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    try:
        sock.connect(target)
        sock.sendall(request)
        head = bytearray()
        deadline = time.monotonic() + timeout
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(65536)
            if not chunk or time.monotonic() > deadline:
                raise OSError("the engine closed the exec stream before answering")
            head += chunk
    except OSError as exc:
        sock.close()
        raise SandboxError(
            "docker", f"cannot attach to an exec at {engine_address()}: {exc}"
        ) from None
    header, _, leftover = bytes(head).partition(b"\r\n\r\n")
    status_line = header.split(b"\r\n", 1)[0].decode("latin-1")
    if " 101 " not in status_line and " 200 " not in status_line:
        sock.close()
        raise SandboxError("docker", f"exec start refused: {status_line} {leftover[:300]!r}")
    sock.settimeout(None)
    return ExecStream(sock, leftover)
