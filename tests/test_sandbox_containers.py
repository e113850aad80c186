"""Containers: limits, isolation, harness operations, snapshots, gc and a missing engine (real
Docker)."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from engine.sandbox import freezer, procs
from engine.sandbox.base import SandboxError
from engine.sandbox.containers import DockerSandbox, _Headroom
from engine.sandbox.dockerapi import connect
from engine.sandbox.gc import gc
from engine.sandbox.images import build_image
from engine.sandbox.labels import this_owner
from engine.sandbox.start import KEPT_CAPS, start_sandbox
from engine.tasks.model import Limits
from tests.fixtures_sandbox import BASE, TEST_LABELS, make_task

pytestmark = pytest.mark.docker

LABELS = {**TEST_LABELS, "depthtui.job": "17", "depthtui.episode": "42"}


@pytest.fixture(scope="module")
def sb() -> Iterator[DockerSandbox]:
    sandbox = start_sandbox(make_task(), BASE, labels=LABELS)
    try:
        yield sandbox
    finally:
        sandbox.close(remove_snapshots=True)


def _agent_pids(sb: DockerSandbox) -> list[tuple[int, str]]:
    return procs.parse_pids(sb.exec_root(procs.sh(procs.LIST_UID, 1000)).stdout)


def test_container_has_the_limits_labels_and_no_privileges(sb: DockerSandbox) -> None:
    info = sb.api.inspect_container(sb.container_id)
    host = info["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["NanoCpus"] == 1_000_000_000
    assert host["Memory"] == host["MemorySwap"] == 2048 * 1024 * 1024
    assert host["PidsLimit"] == 256
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["CapDrop"] == ["ALL"] and sorted(host["CapAdd"]) == sorted(KEPT_CAPS)
    assert host["Init"] is True
    labels = info["Config"]["Labels"]
    assert labels["depthtui.owner"] == this_owner()
    assert labels["depthtui.role"] == "agent"
    assert (labels["depthtui.job"], labels["depthtui.episode"]) == ("17", "42")


def test_agent_has_no_capabilities_and_cannot_gain_any(sb: DockerSandbox) -> None:
    r = sb.run("grep -E '^(NoNewPrivs|CapEff|CapPrm):' /proc/self/status")
    fields = dict(line.split(":\t") for line in r.output.decode().splitlines())
    assert fields == {"NoNewPrivs": "1", "CapEff": "0000000000000000", "CapPrm": "0000000000000000"}


def test_agent_cannot_write_outside_what_it_owns(sb: DockerSandbox) -> None:
    places = ["/etc/x", "/usr/bin/x", "/root/x", "/x", "/var/lib/x", "/opt/x", "/home/x"]
    script = "; ".join(f"(echo > {p}) 2>/dev/null && echo wrote {p}" for p in places)
    r = sb.run(f"{script}; echo > ~/mine && echo > /tmp/mine && echo own-ok")
    assert r.output == b"own-ok\n"
    denied = sb.run("chmod 777 /etc/passwd; chown user /etc/shadow; echo rc=$?")
    assert b"Operation not permitted" in denied.output


def test_no_network_reaches_outside(sb: DockerSandbox) -> None:
    r = sb.run("ls /sys/class/net; cat /proc/net/route | wc -l")
    assert r.output == b"lo\n1\n"  # only loopback, and a routing table with its header only
    # TEST-NET-1 (documentation range): with no interface but lo the kernel refuses at once.
    probe = (
        'python3 -c "import socket, errno\n'
        "try:\n socket.create_connection(('192.0.2.1', 9), timeout=3)\n"
        'except OSError as e: print(errno.errorcode.get(e.errno, e))"'
    )
    assert sb.run(probe).output.strip() == b"ENETUNREACH"


def test_files_go_in_and_out_with_owners_and_modes(sb: DockerSandbox, tmp_path: Path) -> None:
    sb.put_bytes("/home/user/in/deep/note.txt", b"hello\x00bytes", mode=0o600, owner="user")
    assert sb.get_bytes("/home/user/in/deep/note.txt") == b"hello\x00bytes"
    st = sb.exec_root(["stat", "-c", "%u %a", "/home/user/in/deep/note.txt"]).stdout
    assert st == b"1000 600\n"
    folder = tmp_path / "payload"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "a.txt").write_text("A")
    (folder / "b.txt").write_text("B")
    sb.put_path(folder, "/opt/uploaded")
    r = sb.exec_root(["sh", "-c", "cd /opt/uploaded && find . -type f | sort && stat -c %u ."])
    assert r.stdout == b"./b.txt\n./sub/a.txt\n0\n"
    back = sb.get_path("/opt/uploaded", tmp_path / "back")
    assert (back / "sub" / "a.txt").read_text() == "A"
    with pytest.raises(SandboxError) as missing:
        sb.get_bytes("/no/such/file")
    assert missing.value.kind == "not_found" and "/no/such/file" in missing.value.detail


def test_exec_root_is_root_takes_stdin_and_splits_streams(sb: DockerSandbox) -> None:
    r = sb.exec_root(["sh", "-c", "id -u; cat; echo warn >&2; exit 5"], stdin=b"piped\n")
    assert r.exit_code == 5
    assert r.stdout == b"0\npiped\n" and r.stderr == b"warn\n"
    assert sorted(r.output.splitlines()) == [b"0", b"piped", b"warn"]
    # Megabytes in while megabytes come out: no deadlock between the two pipes.
    big = bytes(range(256)) * 20_000
    assert sb.exec_root(["cat"], stdin=big).stdout == big


def test_exec_root_timeout_raises_and_kills_the_process(sb: DockerSandbox) -> None:
    with pytest.raises(SandboxError) as err:
        sb.exec_root(["sleep", "4321"], timeout=1)
    assert err.value.kind == "exec" and "sleep 4321" in err.value.detail
    left = sb.exec_root(["sh", "-c", "pgrep -fx 'sleep 4321' || echo gone"]).stdout
    assert left == b"gone\n"


def test_an_exec_waits_out_a_pause_the_engine_still_reports(sb: DockerSandbox) -> None:
    # After an unpause the engine can call the container paused a moment longer (a late event
    # from containerd), and refused execs then. Held paused for 0.3 s here: the harness's exec
    # and a new shell both wait it out instead of failing.
    sb.api.pause(sb.container_id)
    timer = threading.Timer(0.3, sb.api.unpause, args=(sb.container_id,))
    timer.start()
    try:
        began = time.monotonic()
        assert sb.exec_root(["echo", "ran"]).stdout == b"ran\n"
        assert time.monotonic() - began >= 0.25
    finally:
        timer.join()
    sb.api.pause(sb.container_id)
    timer = threading.Timer(0.3, sb.api.unpause, args=(sb.container_id,))
    timer.start()
    try:
        assert sb.shell is not None
        sb.shell.abandon("the test ended it")
        r = sb.run("echo again")
        assert r.output == b"again\n" and "the test ended it" in r.note
    finally:
        timer.join()


def test_rootfs_is_the_merged_filesystem(sb: DockerSandbox) -> None:
    sb.run("echo from-agent > ~/rootfs-probe")
    root = sb.rootfs()
    assert root is not None
    assert (root / "home/user/rootfs-probe").read_text() == "from-agent\n"


def test_background_processes_die_when_the_episode_ends() -> None:
    sandbox = start_sandbox(make_task(), BASE, labels=LABELS)
    try:
        sandbox.run("sleep 1000 & nohup sleep 999 >/dev/null 2>&1 & setsid sleep 998 &")
        sandbox.run("(sleep 997 &) ; true")
        # The backgrounded children may not have exec'd sleep yet (seen under load): wait for them.
        for _ in range(100):
            names = [comm for _, comm in _agent_pids(sandbox)]
            if names.count("sleep") == 4:
                break
            time.sleep(0.1)
        assert names.count("sleep") == 4
        killed = sandbox.kill_agent_processes()
        assert {comm for _, comm in killed} >= {"sleep", "bash"}
        assert _agent_pids(sandbox) == []
        info = sandbox.api.inspect_container(sandbox.container_id)
        assert info["State"]["Running"]  # the root sleeper stays
        again = sandbox.run("echo next")
        assert again.output == b"next\n"
        assert again.shell_restarted and "the harness ended every process" in again.note
    finally:
        sandbox.close()
    with pytest.raises(docker.errors.NotFound):
        sandbox.api.inspect_container(sandbox.container_id)
    sandbox.close()  # idempotent
    with pytest.raises(SandboxError):
        sandbox.run("true")


def test_fork_bomb_is_contained_and_the_episode_continues() -> None:
    sandbox = start_sandbox(make_task(limits=Limits(pids=64)), BASE, labels=LABELS)
    try:
        r = sandbox.run(":(){ :|:& };:", timeout=3)
        assert r.observation  # the call itself comes back, whatever it printed
        # Counted from the host (a listing inside would need a fork). The harness's moment of
        # headroom (a shell replaced beside the bomb) lends the cgroup 8 slots the bomb may take.
        counts = []
        for _ in range(3):
            listed = freezer.container_procs(sandbox.container_id, sandbox.freezer.listed)
            counts.append(sum(1 for p in listed if p.uid == 1000))
            time.sleep(0.2)
        assert 32 <= max(counts) <= 64 + _Headroom.EXTRA
        sandbox.kill_agent_processes()
        assert _agent_pids(sandbox) == []
        after = sandbox.run("echo survived; ls / >/dev/null && echo forks-again")
        assert after.output == b"survived\nforks-again\n"
        limit = sandbox.api.inspect_container(sandbox.container_id)["HostConfig"]["PidsLimit"]
        assert limit == 64  # the harness's moment of headroom was given back
    finally:
        sandbox.close()


def test_harness_commands_still_run_when_the_process_limit_is_full() -> None:
    sandbox = start_sandbox(make_task(limits=Limits(pids=32)), BASE, labels=LABELS)
    try:
        # A background filler takes every process slot and holds it.
        sandbox.run("(for i in $(seq 60); do sleep 1000 & done) >/dev/null 2>&1 &")
        for _ in range(200):
            stats = sandbox.api.stats(sandbox.container_id, stream=False, one_shot=True)
            if stats["pids_stats"]["current"] >= 31:
                break
            time.sleep(0.1)
        assert stats["pids_stats"]["current"] >= 31
        # Listing needs forks inside the exec: it only works with the moment of headroom.
        listed = _agent_pids(sandbox)
        assert [comm for _, comm in listed].count("sleep") >= 25
        limit = sandbox.api.inspect_container(sandbox.container_id)["HostConfig"]["PidsLimit"]
        assert limit == 32
        sandbox.kill_agent_processes()
        assert _agent_pids(sandbox) == []
        assert sandbox.run("echo free; ls / >/dev/null && echo forks").output == b"free\nforks\n"
    finally:
        sandbox.close()


def test_snapshot_is_labelled_runnable_and_removed_with_the_sandbox() -> None:
    sandbox = start_sandbox(make_task(), BASE, labels=LABELS)
    try:
        sandbox.run("echo kept > ~/state.txt")
        image_id = sandbox.snapshot()
        labels = sandbox.api.inspect_image(image_id)["Config"]["Labels"]
        assert labels["depthtui.role"] == "snapshot" and labels["depthtui.owner"] == this_owner()
        verifier = start_sandbox(make_task(), image_id, labels={**LABELS, "depthtui.role": "v"})
        try:
            assert verifier.run("cat ~/state.txt").output == b"kept\n"
        finally:
            verifier.close()
    finally:
        sandbox.close(remove_snapshots=True)
    with pytest.raises(docker.errors.ImageNotFound):
        sandbox.api.inspect_image(image_id)


def test_agent_user_is_created_when_the_image_lacks_it() -> None:
    task = make_task(agent_user="agent", agent_uid=1234, home="/home/agent", workdir="/srv/work")
    sandbox = start_sandbox(task, BASE, labels=LABELS)
    try:
        r = sandbox.run("id -u; id -un; pwd; echo $HOME; stat -c %u ~ .; touch ~/x && echo ok")
        assert r.output == b"1234\nagent\n/srv/work\n/home/agent\n1234\n1234\nok\n"
    finally:
        sandbox.close()


def test_gc_removes_what_dead_owners_left_and_keeps_the_living() -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = this_owner().rpartition(":")[0]
    orphan = start_sandbox(
        make_task(), BASE, labels={**LABELS, "depthtui.owner": f"{host}:{dead.pid}"}
    )
    mine = start_sandbox(make_task(), BASE, labels=LABELS)
    try:
        snap = orphan.snapshot()
        result = gc()
        assert orphan.container_id in result.containers
        assert snap in result.images
        assert mine.container_id not in result.containers
        assert mine.api.inspect_container(mine.container_id)["State"]["Running"]
        with pytest.raises(docker.errors.NotFound):
            orphan.api.inspect_container(orphan.container_id)
    finally:
        orphan.close(remove_snapshots=True)
        mine.close()


def test_a_missing_engine_gives_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    socket_path = "/tmp/depthtui-no-engine-here.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{socket_path}")
    calls = [
        lambda: start_sandbox(make_task(), BASE, labels=LABELS),
        lambda: build_image(make_task(), Path("/tmp")),
        lambda: gc(),
        lambda: connect(),
    ]
    for call in calls:
        with pytest.raises(SandboxError) as err:
            call()
        assert err.value.kind == "docker"
        message = str(err.value)
        assert socket_path in message and "docker/setup.sh" in message
        assert "\n" not in message


def test_gc_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from depthtui.cli import _register, app

    _register()
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = this_owner().rpartition(":")[0]
    orphan = start_sandbox(
        make_task(), BASE, labels={**LABELS, "depthtui.owner": f"{host}:{dead.pid}"}
    )
    try:
        result = CliRunner().invoke(app, ["sandbox", "gc", "--json"])
        assert result.exit_code == 0, result.output
        assert orphan.container_id in result.output
    finally:
        orphan.close()
    monkeypatch.setenv("DOCKER_HOST", "unix:///tmp/depthtui-no-engine-here.sock")
    failed = CliRunner().invoke(app, ["sandbox", "gc"])
    assert failed.exit_code == 1
    assert "no Docker engine answers" in failed.output and "docker/setup.sh" in failed.output


def test_the_images_own_account_wins_over_a_guessed_uid(tmp_path: Path) -> None:
    # A Harbor task names its agent user; the loader can only guess the uid. Here the base
    # already holds uid 1000, so the Dockerfile's `useradd agent` makes it 1001.
    from engine.sandbox.dockerapi import connect
    from engine.sandbox.images import build_image, remove_task_images

    env = tmp_path / "environment"
    env.mkdir()
    (env / "Dockerfile").write_text(f"FROM {BASE}\nRUN useradd -m -s /bin/bash agent\n")
    task = make_task(
        "sandbox-test/named-user",
        context_dir=env,
        dockerfile=env / "Dockerfile",
        image=None,
        agent_user="agent",
        agent_uid=1000,
        home="/home/agent",
        workdir="/home/agent",
    )
    image = build_image(task, tmp_path / "logs", labels=LABELS)
    try:
        sandbox = start_sandbox(task, image.tag, labels=LABELS)
        try:
            assert (sandbox.agent_uid, sandbox.agent_gid) == (1001, 1001)
            out = sandbox.run("id -un; touch mine; stat -c %u:%g mine; pwd")
            assert out.output.decode().split() == ["agent", "1001:1001", "/home/agent"]
            sandbox.put_bytes("/home/agent/given", b"x", owner="agent")
            assert sandbox.run("stat -c %u given").output == b"1001\n"
        finally:
            sandbox.close()
    finally:
        remove_task_images(connect(), task)
