"""The disk guard, in a real container: writing past the task's storage limit, from a command or
from a process left in the background, is stopped within seconds and the agent is told why; what
it wrote stays, so deleting it works and the episode goes on; a command under the limit, or one
that is not writing, is untouched."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.sandbox.containers import DockerSandbox
from engine.sandbox.disk import GROWTH_BYTES, DiskGuard, layer_bytes
from engine.sandbox.start import start_sandbox
from engine.tasks.model import Limits
from tests.fixtures_sandbox import BASE, TEST_LABELS, make_task

pytestmark = pytest.mark.docker

LIMIT_MB = 64
SAID = f"the container's disk use passed its limit of {LIMIT_MB} MiB"


@pytest.fixture(scope="module")
def sb() -> Iterator[DockerSandbox]:
    task = make_task("disk-test", limits=Limits(storage_mb=LIMIT_MB))
    sandbox = start_sandbox(task, BASE, labels=TEST_LABELS)
    try:
        yield sandbox
    finally:
        sandbox.close(remove_snapshots=True)


def write_slowly(path: Path, chunks: int, size: int) -> None:
    """`chunks` × `size` bytes to `path`, one chunk every 0.4 s: a steady writer on the host."""
    with path.open("wb") as out:
        for _ in range(chunks):
            time.sleep(0.4)
            out.write(b"\0" * size)
            out.flush()


def size_of(sb: DockerSandbox, path: str) -> int:
    return int(sb.run(f"stat -c %s {path}").output)


def test_the_guard_watches_this_containers_own_layer(sb: DockerSandbox) -> None:
    assert sb.disk_watch is not None and sb.disk_watch.guard.limit == LIMIT_MB << 20


def test_a_command_writing_past_the_limit_is_stopped_and_can_be_undone(sb: DockerSandbox) -> None:
    began = time.monotonic()
    r = sb.run("head -c 2G /dev/zero > ~/flood; echo status=$?", timeout=120)
    took = time.monotonic() - began
    assert took < 30, took  # stopped, not run to its end or its timeout
    assert "status=137" in r.output.decode()  # head was killed; the shell lives on
    assert SAID in r.note and "delete what you wrote" in r.observation
    assert not r.shell_restarted
    assert LIMIT_MB << 20 < size_of(sb, "~/flood") < 2 << 30
    # the files stay; a command that is not writing is not stopped, however long it runs, even
    # while something else (another episode, here the host itself) writes to the same disk
    assert sb.disk_watch is not None
    device = sb.disk_watch.guard.upper.stat().st_dev
    candidates = [Path("/tmp"), Path("/var/tmp"), Path("/var/lib/docker/tmp")]
    elsewhere = next(d for d in candidates if d.is_dir() and d.stat().st_dev == device)
    other = elsewhere / f"depthtui-test-foreign-{os.getpid()}"
    writer = threading.Thread(target=write_slowly, args=(other, 6, 64 << 20))
    writer.start()
    try:
        slow = sb.run("sleep 3; echo still-here")
    finally:
        writer.join()
        other.unlink(missing_ok=True)
    assert slow.output == b"still-here\n" and slow.note == ""
    again = sb.run("rm ~/flood && echo removed")
    assert again.output == b"removed\n" and again.exit_code == 0 and again.note == ""


def test_a_background_writer_is_stopped_between_commands(sb: DockerSandbox) -> None:
    started = sb.run("(yes > ~/bg &) ; echo started")
    assert started.output == b"started\n"
    time.sleep(4)  # the model thinking: no command runs
    r = sb.run("pgrep -x yes || echo no-yes")
    assert r.output == b"no-yes\n"
    assert SAID in r.note and "yes (pid" in r.note
    assert size_of(sb, "~/bg") > LIMIT_MB << 20
    assert sb.run("rm ~/bg && echo removed").output == b"removed\n"


def test_a_write_under_the_limit_is_untouched(sb: DockerSandbox) -> None:
    r = sb.run("head -c 16M /dev/zero > ~/small && sleep 1 && stat -c %s ~/small && rm ~/small")
    assert r.exit_code == 0 and r.note == ""
    assert r.output == f"{16 << 20}\n".encode()


def test_layer_bytes_counts_blocks_without_following_links(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one").write_bytes(b"x" * (1 << 20))
    (tmp_path / "two").write_bytes(b"y" * (1 << 20))
    (tmp_path / "link").symlink_to("/usr")
    size, whole = layer_bytes(tmp_path)
    assert whole and 2 << 20 <= size < 3 << 20
    # past its time budget the walk stops with a lower bound, and says so
    partial, whole = layer_bytes(tmp_path, budget_s=-1.0)
    assert not whole and partial < 2 << 20


def test_guard_decisions_on_a_plain_folder(tmp_path: Path) -> None:
    layer = tmp_path / "upper"
    layer.mkdir()
    guard = DiskGuard(layer, limit_bytes=1 << 20)
    assert guard.check() is None  # nothing written

    def host_lost(recently: int) -> None:
        # As if the host had lost 8 MiB since the container started, `recently` of it just now.
        guard.free_at_start = guard._last_free + (8 << 20)
        guard._last_free += recently
        guard._walked = float("-inf")

    (layer / "big").write_bytes(b"z" * (4 << 20))
    host_lost(2 * GROWTH_BYTES)
    assert guard.check() == "the container's disk use passed its limit of 1 MiB"
    # nothing written since the last look: over the limit, but nobody is writing
    assert guard.check() is None
    # the host is written to, this layer (over its limit) is not: another container's writes
    (tmp_path / "elsewhere").write_bytes(b"e" * (4 << 20))
    host_lost(2 * GROWTH_BYTES)
    assert guard.check() is None
    # this layer grows again
    (layer / "more").write_bytes(b"m" * (2 << 20))
    host_lost(2 * GROWTH_BYTES)
    assert guard.check() == "the container's disk use passed its limit of 1 MiB"
    # what writers left before their kill is not growth the next time
    (layer / "tail").write_bytes(b"t" * (2 << 20))
    guard.settle()
    host_lost(2 * GROWTH_BYTES)
    assert guard.check() is None
    # writing again, but this layer is small: someone else's writes
    for name in ("big", "more", "tail"):
        (layer / name).unlink()
    guard.settle()
    (layer / "little").write_bytes(b"l" * (GROWTH_BYTES // 2))
    host_lost(2 * GROWTH_BYTES)
    assert guard.check() is None
