"""The hash worker process beside the host walk (engine/oracle/hash_worker.py): the manifest it
helps make is the one the walking thread alone makes, and when it dies, hangs or meets a read
error, the walk still ends with every entry right, no descriptor left open and no zombie."""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from engine.oracle import hash_worker, reading
from engine.oracle.entries import TEXT_MAX
from engine.oracle.manifest import HASH_ANY_MAX, MAX_DEPTH, take_manifest
from engine.oracle.reading import open_file
from engine.oracle.walk import Bounds, Walk

HOME = "/home/user"

pytest_plugins = ["tests.fixtures_oracle"]


@pytest.fixture(autouse=True)
def _fresh_worker(monkeypatch):
    """Each test counts its own worker deaths."""
    monkeypatch.setattr(hash_worker, "_deaths", 0)
    monkeypatch.setattr(hash_worker, "_disabled", False)
    yield


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _state(pid: int) -> str | None:
    """The process's state letter (Z: a zombie), None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return None


def _reaped(pid: int) -> bool:
    """Whether `pid`, a child of ours, was reaped already (else it is reaped here)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def _home(fake_root, small: int = 400) -> None:
    for i in range(small):
        fake_root.write(f"d{i % 7}/s{i:04d}.dat", b"\0" + bytes([i % 251]) * (2000 + i))
    for i in range(20):
        fake_root.write(f"t/text{i:02d}.txt", f"line {i}\n" * (i + 1))
    fake_root.write("t/binary.bin", b"\0\1\2" * 100)
    for i in range(3):
        fake_root.write(f"big/b{i}.bin", os.urandom(1 << 20) * 3 + bytes([i]))


def _walk(fake_root, keep_texts: bool, open_file=open_file) -> Walk:
    walk = Walk(Bounds(MAX_DEPTH, 1000, 4096, 20_000, HASH_ANY_MAX), open_file, None, keep_texts)
    fd = os.open(fake_root.home_dir, reading.OPEN_DIR)
    try:
        walk.walk(fd, baseline=True)
    finally:
        os.close(fd)
    return walk


def _alone(fake_root, monkeypatch, keep_texts: bool = True):
    monkeypatch.setattr(hash_worker, "ENABLED", False)
    try:
        return take_manifest(fake_root.home_dir, HOME, keep_texts=keep_texts)
    finally:
        monkeypatch.setattr(hash_worker, "ENABLED", True)


def test_the_worker_hashes_what_the_walk_alone_does(fake_root, monkeypatch):
    _home(fake_root)
    alone = _alone(fake_root, monkeypatch)
    take_manifest(fake_root.home_dir, HOME)  # the worker is started (its descriptors counted)
    fds = _fds()
    worker = hash_worker.get()
    before = worker.files
    for keep_texts in (True, False):
        beside = take_manifest(fake_root.home_dir, HOME, keep_texts=keep_texts)
        assert list(beside.entries.items()) == list(alone.entries.items())
        assert beside.texts == (alone.texts if keep_texts else {})
    assert _fds() == fds
    assert worker.files - before > 200, "the worker hashed (almost) nothing"
    assert len(alone.texts) == 20 and "t/binary.bin" not in alone.texts
    big = fake_root.p("big/b2.bin").read_bytes()
    assert alone.entries["big/b2.bin"].sha256 == hashlib.sha256(big).hexdigest()


def test_a_file_growing_after_its_fstat_is_hashed_to_its_end(fake_root, monkeypatch):
    """Two files grow once their descriptor's fstat is taken (while the next file is opened),
    before they are hashed: a kept text past TEXT_MAX and a big file. Both ways hash all of it
    and record the size fstat said."""
    for i in range(100):
        fake_root.write(f"a/f{i:03d}.txt", f"file {i}\n")
    text, big = b"x" * (TEXT_MAX - 10), b"y" * (2 << 20)
    walks = []
    worker = hash_worker.get()
    before = worker.files
    for enabled in (False, True):
        # First in their folder: their batch is the first one, handed to the idle worker.
        fake_root.write("a/0grow.txt", text)
        fake_root.write("a/0growbig.bin", big)
        previous = [""]

        def growing_open(name, dir_fd, previous=previous):
            if previous[0] in ("0grow.txt", "0growbig.bin"):  # its fstat is taken
                with open(fake_root.p("a/" + previous[0]), "ab") as f:
                    f.write(b"z" * 100)
            previous[0] = name
            return open_file(name, dir_fd)

        monkeypatch.setattr(hash_worker, "ENABLED", enabled)
        walks.append(_walk(fake_root, True, growing_open))
    assert worker.files - before >= 2
    alone, beside = walks
    for rel, content in (("a/0grow.txt", text), ("a/0growbig.bin", big)):
        for walk in walks:
            entry = walk.entries[rel]
            digest = hashlib.sha256(content + b"z" * 100).hexdigest()
            assert (entry.size, entry.sha256) == (len(content), digest)
        assert rel not in beside.texts
    same = {rel: (e.size, e.sha256) for rel, e in alone.entries.items()}
    assert {rel: (e.size, e.sha256) for rel, e in beside.entries.items()} == same
    assert beside.texts == alone.texts and len(alone.texts) == 100


def _kill_mid_walk(fake_root, monkeypatch, stop_at: int, then) -> tuple[int, object]:
    """A walk during which the worker is stopped at the `stop_at`th open (batches pile up with
    it), then `then(pid)` runs on a timer; the worker's pid and the manifest."""
    take_manifest(fake_root.home_dir, HOME)
    pid = hash_worker.get().proc.pid
    opened = [0]

    def stopping_open(name, dir_fd):
        opened[0] += 1
        if opened[0] == stop_at:
            os.kill(pid, signal.SIGSTOP)
            threading.Timer(0.3, then, (pid,)).start()
        return open_file(name, dir_fd)

    with monkeypatch.context() as mp:
        mp.setattr("engine.oracle.manifest._open_file", stopping_open)
        return pid, take_manifest(fake_root.home_dir, HOME, keep_texts=True)


def test_a_worker_killed_mid_walk_loses_no_entry(fake_root, monkeypatch):
    _home(fake_root)
    alone = _alone(fake_root, monkeypatch)
    take_manifest(fake_root.home_dir, HOME)
    fds = _fds()
    pid, m = _kill_mid_walk(fake_root, monkeypatch, 60, lambda pid: os.kill(pid, signal.SIGKILL))
    assert list(m.entries.items()) == list(alone.entries.items()) and m.texts == alone.texts
    assert _reaped(pid) and _state(pid) is None  # reaped by the walk: no zombie
    assert _fds() == fds - 1  # the dead worker's socket is closed; nothing else left open
    again = take_manifest(fake_root.home_dir, HOME)  # a new worker for the next walk
    assert hash_worker.get().proc.pid != pid and again.entries == alone.entries
    assert _fds() == fds


def test_a_hung_worker_is_killed_and_its_batches_hashed_here(fake_root, monkeypatch):
    _home(fake_root, small=200)
    alone = _alone(fake_root, monkeypatch)
    monkeypatch.setattr(hash_worker, "REPLY_TIMEOUT_S", 0.5)
    pid, m = _kill_mid_walk(fake_root, monkeypatch, 40, lambda pid: None)  # stopped for good
    assert list(m.entries.items()) == list(alone.entries.items()) and m.texts == alone.texts
    assert _reaped(pid) and _state(pid) is None


def test_a_read_error_on_the_worker_reaches_the_walk(fake_root, monkeypatch):
    """A descriptor that cannot be read (opened write-only here) fails the walk with the read's
    own error, both ways; nothing stays open and the worker serves the next walk."""
    _home(fake_root, small=100)

    def write_only(name, dir_fd):
        if name == "b1.bin":  # in the walk's first batch (6 MB), handed to the idle worker
            return os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        return open_file(name, dir_fd)

    take_manifest(fake_root.home_dir, HOME)
    fds = _fds()
    pid, before = hash_worker.get().proc.pid, hash_worker.get().files
    for enabled in (False, True):
        monkeypatch.setattr(hash_worker, "ENABLED", enabled)
        with pytest.raises(OSError) as exc:
            _walk(fake_root, False, write_only)
        assert exc.value.errno == errno.EBADF
        assert _fds() == fds
    assert hash_worker.get().files > before  # the failing batch was the worker's
    assert take_manifest(fake_root.home_dir, HOME).entries["big/b1.bin"].sha256
    assert hash_worker.get().proc.pid == pid


def test_the_worker_ends_with_its_socket(tmp_path):
    """A parent that dies leaves no worker behind: the worker's socket ends, and it exits."""
    code = (
        "import sys; sys.path[:0] = [sys.argv[1]]\n"
        "from engine.oracle import hash_worker\n"
        "print(hash_worker.get().proc.pid, flush=True)\n"
        "import os; os._exit(0)\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run(
        [sys.executable, "-c", code, root], capture_output=True, text=True, timeout=30
    )
    pid = int(out.stdout)
    deadline = time.monotonic() + 5
    while _state(pid) not in (None, "Z") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert _state(pid) in (None, "Z")  # gone (or left to its new parent, init, to reap)


def test_a_forked_child_starts_its_own_worker(fake_root):
    _home(fake_root, small=100)
    expected = take_manifest(fake_root.home_dir, HOME).entries
    parent_worker = hash_worker.get()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never the parent's worker (their socket is shared)
        ok = hash_worker._WORKER is None
        ok = ok and take_manifest(fake_root.home_dir, HOME).entries == expected
        ok = ok and hash_worker.get().proc.pid != parent_worker.proc.pid
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    assert os.read(read, 1) == b"1"
    os.close(read)
    os.waitpid(pid, 0)
    assert take_manifest(fake_root.home_dir, HOME).entries == expected  # ours still answers
    assert hash_worker.get() is parent_worker
