"""The hashing process beside the walk. The host's walking thread opens every file itself
(hashing.py: relative to its folder's descriptor, never following a link) and hands this process
the open descriptors (SCM_RIGHTS over a Unix socket pair), a batch at a time; it reads and hashes
them, closes them and answers the digests (and the bytes of small text files kept at the
baseline). It never sees a path, and nothing from the container reaches it but the bytes it
reads. Every read is at explicit offsets (pread): a descriptor received shares its open file,
offset included, with the walk's, which stays open until the reply.

One per host process, started on first use with the parent's own interpreter and `sys.path`
(no fork of a possibly threaded process: subprocess spawns and execs). It exits when its socket
ends (the parent closed it or died), and the parent reaps it whenever it ends.

Framing (SOCK_STREAM, little-endian): a request is u32 length, then per file an i64 size hint
and a u8 "keep text", the descriptors riding on its first byte; a reply is u32 length, then per
file a u8 status: 0 digest (64 hex bytes), 1 digest and text (u32 length and the bytes), 2 the
read failed (i32 errno, u16 length and the message) and the batch's later files were skipped.
One walk at a time sends requests (the client's lock, held while any of its batches is out), a
few ahead of the replies (hashing.IN_FLIGHT); the worker reads a request's length alone with
recvmsg, so the descriptors it gets are that request's, never the next one's.
"""

from __future__ import annotations

import atexit
import os
import select
import socket
import struct
import sys
import threading

from engine.oracle.entries import TEXT_MAX
from engine.oracle.reading import hash_file

# Descriptors one request may carry: a walk's batch is at most 32 files (walk.py _BATCH_FILES),
# well under the kernel's SCM_MAX_FD (253).
MAX_FDS = 64
_LEN = struct.Struct("<I")
_JOB = struct.Struct("<qB")
_ERR = struct.Struct("<iH")
_DIGEST, _TEXT, _FAILED = 0, 1, 2
# The most a reply may be: every file a kept text.
_REPLY_MAX = MAX_FDS * (1 + 64 + 4 + TEXT_MAX) + 4096
# A worker that has not answered a batch within this long is taken for hung: it is killed and
# the batch hashed by the walk (its own descriptors are still open).
REPLY_TIMEOUT_S = 60.0
# Deaths after which this process stops starting new workers (the walk hashes alone).
MAX_DEATHS = 5


class WorkerGone(Exception):
    """The worker died, hung or answered nonsense: its batch is to be hashed by the walk."""


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if not k:
            raise EOFError
        got += k
    return buf


# ---------------------------------------------------------------------------------------------
# The worker's side


def serve(sock: socket.socket) -> None:
    """Answer batches until the socket ends. Every descriptor received is closed."""
    while True:
        try:
            # Only the length: the descriptors ride on a request's first byte, and a read never
            # runs on into the next request (which may be queued already).
            head, fds, flags, _ = socket.recv_fds(sock, _LEN.size, MAX_FDS)
        except (EOFError, OSError):
            return
        try:
            if not head or flags & socket.MSG_CTRUNC:
                return  # the parent is gone, or sent more descriptors than allowed
            if len(head) < _LEN.size:
                head += _recv_exact(sock, _LEN.size - len(head))
            (length,) = _LEN.unpack(head)
            if length != _JOB.size * len(fds):
                return
            body = _recv_exact(sock, length)
            out: list[bytes] = []
            for i, fd in enumerate(fds):
                size, keep_text = _JOB.unpack_from(body, i * _JOB.size)
                try:
                    digest, text = hash_file(fd, size, bool(keep_text))
                except OSError as exc:
                    message = (exc.strerror or str(exc)).encode("utf-8", "replace")[:1000]
                    out.append(bytes([_FAILED]) + _ERR.pack(exc.errno or 0, len(message)))
                    out.append(message)
                    break
                if text is None:
                    out.append(bytes([_DIGEST]) + digest.encode())
                else:
                    out.append(bytes([_TEXT]) + digest.encode() + _LEN.pack(len(text)))
                    out.append(text)
            for fd in fds:
                os.close(fd)
            fds = []
            reply = b"".join(out)
            sock.sendall(_LEN.pack(len(reply)) + reply)
        except (EOFError, OSError):
            return
        finally:
            for fd in fds:
                os.close(fd)


def main(fd: int) -> None:
    """The worker process: `fd` is its end of the socket pair."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the parent's to act on
    serve(socket.socket(fileno=fd))


# ---------------------------------------------------------------------------------------------
# The host's side


class Worker:
    """The client of one worker process. `lock` is held from a request until its reply is read:
    one walk at a time uses the worker, the others hash their batches themselves."""

    def __init__(self) -> None:
        import subprocess

        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        path = [entry or os.getcwd() for entry in sys.path]  # '' was the parent's folder
        code = (
            f"import sys; sys.path[:] = {path!r}; "
            f"from engine.oracle.hash_worker import main; main({child.fileno()})"
        )
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-c", code],
                pass_fds=(child.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
            )
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        self.sock = parent
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.files = 0  # handed over so far (tests and benches)
        self._poll = select.poll()
        self._poll.register(parent, select.POLLIN)

    def send(self, jobs: list) -> None:
        """Hand over the descriptors of `jobs` (they stay open here too: ours until the reply)."""
        body = b"".join(_JOB.pack(job.st.st_size, job.keep_text) for job in jobs)
        msg = _LEN.pack(len(body)) + body
        try:
            sent = socket.send_fds(self.sock, [msg], [job.fd for job in jobs], socket.MSG_NOSIGNAL)
            if sent < len(msg):
                self.sock.sendall(msg[sent:], socket.MSG_NOSIGNAL)
        except OSError as exc:
            raise WorkerGone(f"sending: {exc}") from exc
        self.files += len(jobs)

    def ready(self, timeout_s: float = 0.0) -> bool:
        """Whether the reply (or the worker's end) has come."""
        return bool(self._poll.poll(timeout_s * 1000))

    def receive(self, jobs: list) -> OSError | None:
        """The reply to the request of `jobs`: their digest and text are filled in; the error a
        read of one of them met is returned (the later ones are left unhashed)."""
        try:
            if not self.ready(REPLY_TIMEOUT_S):
                raise WorkerGone("no reply in time")
            (length,) = _LEN.unpack(_recv_exact(self.sock, _LEN.size))
            if length > _REPLY_MAX:
                raise WorkerGone("a reply too long")
            reply = bytes(_recv_exact(self.sock, length))
        except (EOFError, OSError) as exc:
            raise WorkerGone(f"receiving: {exc!r}") from exc
        at = 0
        try:
            for job in jobs:
                status = reply[at]
                at += 1
                if status == _FAILED:
                    err, n = _ERR.unpack_from(reply, at)
                    at += _ERR.size
                    return OSError(err, reply[at : at + n].decode("utf-8", "replace"))
                job.digest = reply[at : at + 64].decode("ascii")
                at += 64
                if status == _TEXT:
                    (n,) = _LEN.unpack_from(reply, at)
                    at += _LEN.size
                    job.text = reply[at : at + n]
                    at += n
                elif status != _DIGEST:
                    raise ValueError(status)
        except (IndexError, ValueError, struct.error) as exc:
            raise WorkerGone(f"a garbled reply: {exc!r}") from exc
        if at != length:
            raise WorkerGone("a garbled reply")
        return None

    def end(self) -> None:
        """Stop the worker (if still running) and reap it."""
        import subprocess

        self.sock.close()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_LOCK = threading.Lock()
_WORKER: Worker | None = None
_deaths = 0
_disabled = False
ENABLED = True  # off: every walk hashes alone (tests, and benches of the walk alone)


def get() -> Worker | None:
    """This process's worker, started on first use; None when it cannot be (then the walk hashes
    alone)."""
    global _WORKER, _disabled
    if not ENABLED or _disabled:
        return None
    w = _WORKER
    if w is not None and w.pid == os.getpid():
        return w
    with _LOCK:
        if _WORKER is None and not _disabled:
            try:
                _WORKER = Worker()
            except (OSError, ValueError, RuntimeError):  # no interpreter to start, no fds left
                _disabled = True
        return _WORKER


def lost(w: Worker) -> None:
    """`w` died, hung or garbled a reply: end it; the next walk may start another."""
    global _WORKER, _deaths, _disabled
    with _LOCK:
        if _WORKER is w:
            _WORKER = None
            _deaths += 1
            if _deaths >= MAX_DEATHS:
                _disabled = True
    w.proc.kill()
    w.end()


def _forget_in_child() -> None:
    # A fork's child shares the parent's socket to the worker: drop its copy, never use it.
    global _WORKER
    if _WORKER is not None:
        _WORKER.sock.close()
        _WORKER.proc.returncode = 0  # not the child's to reap
        _WORKER = None


@atexit.register
def _end_at_exit() -> None:
    w = _WORKER
    if w is not None and w.pid == os.getpid():
        w.end()


os.register_at_fork(after_in_child=_forget_in_child)
