"""Docker containers for episodes: the Sandbox of base.py, made real.

A container's main process is a root sleeper under docker-init (which reaps orphans), so the
agent's shell dying never stops the container. The agent reaches it only through its persistent
shell (shell.py); every other operation is a root exec or the engine's archive API, which the
agent can neither see nor influence.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
import tarfile
import threading
import time
from pathlib import Path, PurePosixPath

import docker
import docker.errors

from engine.sandbox import freezer, procs, snapshot
from engine.sandbox.base import CallResult, ExecResult, SandboxError
from engine.sandbox.disk import DiskWatch, LayerUsage, over_limits
from engine.sandbox.dockerapi import (
    STDOUT,
    ExecStream,
    create_exec,
    engine_is_local,
    start_exec,
)
from engine.sandbox.gc import remove_image
from engine.sandbox.labels import LABEL_ROLE, ROLE_SNAPSHOT
from engine.sandbox.shell import PersistentShell
from engine.tasks.model import Limits, Task


class DockerSandbox:
    """One running container for one episode, with the agent's persistent shell."""

    def __init__(
        self,
        client: docker.DockerClient,
        container_id: str,
        task: Task,
        limits: Limits,
    ) -> None:
        self.client = client
        self.api = client.api
        self._id = container_id
        self.task = task
        self.limits = limits
        self.agent_uid = task.agent_uid
        self.agent_gid = task.agent_uid
        self.sleeper_pid: int | None = None
        self.snapshots: list[str] = []
        # The layer as over_limits just summed it, for the snapshot right after (one walk).
        self._measured: LayerUsage | None = None
        # What the container's layer changed before the agent's turns (verify/root_changes.py).
        self.changes_before_agent: frozenset[str] = frozenset()
        self.closed = False
        self.shell: PersistentShell | None = None
        self.disk_watch: DiskWatch | None = None
        self.freezer = freezer.Freezer(self.api, container_id)
        # Set by _prepare: whether this process can see and signal the container's processes.
        self.host_kill = False

    # --- the Sandbox protocol ---------------------------------------------------------------

    @property
    def container_id(self) -> str:
        return self._id

    @property
    def home(self) -> str:
        return self.task.home

    def run(self, command: str, timeout: float | None = None) -> CallResult:
        self._check_open()
        assert self.shell is not None
        return self.shell.run(command, timeout)

    def probe_shell(self) -> None:
        self._check_open()
        if self.shell is not None:
            self.shell.probe()

    def exec_root(
        self, argv: list[str], stdin: bytes | None = None, timeout: float = 60.0
    ) -> ExecResult:
        return self.exec_as("0", argv, stdin=stdin, timeout=timeout)

    def exec_as(
        self,
        user: str,
        argv: list[str],
        stdin: bytes | None = None,
        timeout: float = 60.0,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
    ) -> ExecResult:
        """Run a command in its own exec (never the agent's shell). An exec joins the container
        even at its process limit, but cannot fork there: when it failed to fork and the
        container is at its limit (a fork bomb), it runs once more with the limit raised for
        that moment."""
        self._check_open()
        result = self._exec_once(user, argv, stdin, timeout, env, workdir)
        if _FORK_FAILED.search(result.output) and self._at_pids_limit():
            with self._pid_headroom():
                result = self._exec_once(user, argv, stdin, timeout, env, workdir)
        return result

    def _at_pids_limit(self) -> bool:
        try:
            pids = self.api.stats(self._id, stream=False, one_shot=True).get("pids_stats", {})
        except docker.errors.APIError:
            return False
        return pids.get("current", 0) >= self.limits.pids - 2

    def put_path(
        self, host_path: Path, dest: str, owner: str = "root", readable: bool = False
    ) -> None:
        """Copy a host file or folder to `dest`; `readable` makes it readable (and folders
        enterable) by everyone, whatever the host modes were."""
        host_path = Path(host_path)
        if not host_path.exists():
            raise SandboxError("upload", f"{host_path} does not exist on the host")
        uid, gid = self._owner(owner)
        dest_p = PurePosixPath(dest)

        def chown(info: tarfile.TarInfo) -> tarfile.TarInfo:
            info.uid, info.gid, info.uname, info.gname = uid, gid, "", ""
            if readable:
                info.mode |= 0o555 if info.isdir() or info.mode & 0o100 else 0o444
            return info

        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.add(str(host_path), arcname=dest_p.name, filter=chown)
        self._put_archive(str(dest_p.parent), buf.getvalue())

    def put_bytes(self, dest: str, data: bytes, mode: int = 0o644, owner: str = "root") -> None:
        uid, gid = self._owner(owner)
        dest_p = PurePosixPath(dest)
        info = tarfile.TarInfo(dest_p.name)
        info.size, info.mode, info.uid, info.gid = len(data), mode, uid, gid
        info.mtime = int(time.time())
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            tar.addfile(info, io.BytesIO(data))
        self._put_archive(str(dest_p.parent), buf.getvalue())

    def get_bytes(self, path: str) -> bytes:
        with self._archive(path) as tar:
            member = tar.next()
            if member is None or not member.isfile():
                raise SandboxError("not_found", f"{path} is not a regular file in the container")
            f = tar.extractfile(member)
            assert f is not None
            return f.read()

    def get_path(self, path: str, host_dest: Path) -> Path:
        """Copy a file or folder out of the container to `host_dest` (which it becomes)."""
        host_dest = Path(host_dest)
        host_dest.parent.mkdir(parents=True, exist_ok=True)
        staging = host_dest.parent / f".{host_dest.name}.depthtui-get"
        with self._archive(path) as tar:
            tar.extractall(staging, filter="data")
        (staging / PurePosixPath(path).name).rename(host_dest)
        staging.rmdir()
        return host_dest

    def rootfs(self) -> Path | None:
        merged = self._layer_dir("MergedDir")
        return Path(merged) if merged and os.access(merged, os.R_OK | os.X_OK) else None

    def upper(self) -> Path | None:
        """The container's overlay2 upper folder on this host, when it can be read here (the
        oracle's change set, engine/oracle/upper.py); None otherwise."""
        upper = self._layer_dir("UpperDir")
        return Path(upper) if upper and os.access(upper, os.R_OK | os.X_OK) else None

    def _layer_dir(self, key: str) -> str | None:
        """The overlay2 folder `key` (MergedDir, UpperDir) as the host sees it; None when the
        engine is not local or uses another storage driver."""
        if not engine_is_local():
            return None
        try:
            info = self.api.inspect_container(self._id)
        except docker.errors.APIError:
            return None
        return (info.get("GraphDriver") or {}).get("Data", {}).get(key)

    def kill_agent_processes(self) -> list[tuple[int, str]]:
        """Kill every process of the agent user; the sleeper (root) stays. Returns what was
        killed when that is known. The agent's shell is among them: the next `run` starts a
        new one and says so. From the host when it can (freezer.py: nothing the agent does
        inside can outlive it), else from inside the container."""
        self._check_open()
        if self.host_kill:
            spare = {1, self.sleeper_pid or 1}
            killed = self.freezer.kill(freezer.of_uid(self.agent_uid, spare))
            if self.shell is not None:
                self.shell.abandon(
                    "the harness ended every process of the agent, the shell included"
                )
            return [(p.pid, p.name) for p in killed]
        return self._kill_inside()

    def kill_from_host(self, spare_shell: bool) -> list[tuple[int, str]]:
        """The disk watch's kill: every process of the agent but (if asked) its shell."""
        spare = {1, self.sleeper_pid or 1}
        if spare_shell and self.shell is not None and self.shell.pid:
            spare.add(self.shell.pid)
        return [(p.pid, p.name) for p in self.freezer.kill(freezer.of_uid(self.agent_uid, spare))]

    def _kill_command_from_host(
        self, shell_pid: int, last_pid: int | None, since_tick: int | None
    ) -> list[tuple[int, str]]:
        """The timeout's kill, from the host: what the command started (shell.py)."""
        killed = self.freezer.kill(freezer.command_tree(shell_pid, last_pid, since_tick))
        return [(p.pid, p.name) for p in killed]

    def freeze(self) -> None:
        """Freeze every process of the container (the cgroup freezer, as `docker pause`)."""
        self._check_open()
        self.freezer.freeze()

    def thaw(self) -> None:
        self.freezer.thaw()

    def usage(self, max_objects: int) -> LayerUsage | None:
        """What the container's writable layer holds (apparent sizes; counting stops past
        `max_objects`), read from the host; None when it cannot be read here."""
        upper = self._layer_dir("UpperDir")
        if not upper or not os.access(upper, os.R_OK | os.X_OK):
            return None
        from engine.sandbox.disk import layer_usage

        return layer_usage(Path(upper), max_objects)

    def over_limits(self) -> tuple[str, str] | None:
        """(error kind, reason) when the writable layer is over its storage or object limit:
        such a container is never committed. None when within them (or not readable here)."""
        watch = self.disk_watch
        if watch is None:
            return None
        self._measured = self.usage(watch.guard.object_limit + 1)
        return over_limits(watch.guard, self._measured)

    def _kill_inside(self) -> list[tuple[int, str]]:
        if self.agent_uid != 0:
            swept = self.exec_as(
                str(self.agent_uid), procs.sh(procs.KILL_OWN, self.agent_uid), timeout=30
            )
            if self.shell is not None:
                self.shell.abandon(
                    "the harness ended every process of the agent, the shell included"
                )
            if swept.exit_code == 0:
                return procs.parse_pids(swept.stdout)
            # The sweep could not finish (no room for its shell, say): list, kill, check.
            before = self._list_uid()
            # kill(-1) as the agent reaches every process of that uid in one atomic sweep, so a
            # fork bomb cannot outrun it.
            for _ in range(5):
                self.exec_as(str(self.agent_uid), ["/bin/sh", "-c", "kill -9 -1"], timeout=30)
                if not self._list_uid():
                    break
            return before
        if self.shell is not None:
            self.shell.abandon("the harness ended every process of the agent, the shell included")
        result = self.exec_root(procs.sh(procs.KILL_UID, 0, self.sleeper_pid or 1))
        return procs.parse_pids(result.stdout)

    def snapshot(self) -> str:
        """`docker commit` of the container (labelled as this owner's snapshot); the image id.
        The engine pauses a running container for the commit and leaves a frozen one frozen
        (pause=True), so the image is one instant of the filesystem. Its deadline grows with
        the layer's size (snapshot.py: SnapshotSlow past it)."""
        self._check_open()
        usage, self._measured = self._measured, None
        if usage is None and self.disk_watch is not None:
            usage = self.usage(self.disk_watch.guard.object_limit + 1)
        image_id = snapshot.commit(
            self.api,
            self._id,
            [f"LABEL {LABEL_ROLE}={ROLE_SNAPSHOT}"],
            usage,
        )
        self.snapshots.append(image_id)
        return image_id

    def remove_snapshot(self, image_id: str) -> bool:
        """Remove one snapshot image of this sandbox; False when it was already gone."""
        if image_id in self.snapshots:
            self.snapshots.remove(image_id)
        return remove_image(self.client, image_id)

    def close(self, remove_snapshots: bool = False) -> None:
        """Stop and remove the container (and, if asked, its snapshot images); idempotent."""
        if not self.closed:
            self.closed = True
            if self.disk_watch is not None:
                self.disk_watch.close()
            if self.shell is not None:
                self.shell.close()
            try:
                self.freezer.release()
            except SandboxError:
                pass  # removal kills a frozen container too
            try:
                self.api.remove_container(self._id, force=True, v=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                if "already in progress" not in str(exc):
                    raise SandboxError(
                        "container", f"cannot remove {self._id[:12]}: {exc}"
                    ) from None
        if remove_snapshots:
            for image_id in self.snapshots:
                remove_image(self.client, image_id)
            self.snapshots.clear()

    def __enter__(self) -> DockerSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(remove_snapshots=True)

    # --- helpers ----------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self.closed:
            raise SandboxError("container", f"sandbox {self._id[:12]} is closed")

    def _exec_once(
        self,
        user: str,
        argv: list[str],
        stdin: bytes | None,
        timeout: float,
        env: dict[str, str] | None,
        workdir: str | None,
    ) -> ExecResult:
        try:
            exec_id = create_exec(
                self.api,
                self._id,
                argv,
                stdin=stdin is not None,
                stdout=True,
                stderr=True,
                tty=False,
                user=user,
                environment=[f"{k}={v}" for k, v in (env or {}).items()] or None,
                workdir=workdir,
            )
        except docker.errors.NotFound:
            raise SandboxError("container", f"container {self._id[:12]} is gone") from None
        except docker.errors.APIError as exc:
            raise SandboxError("exec", exc.explanation or str(exc)) from None
        stream = start_exec(self.api, exec_id)
        out, err, both = bytearray(), bytearray(), bytearray()
        try:
            if stdin is not None:
                # From a thread: a command that prints while it reads would otherwise block on
                # its full output pipe while we block on its full input pipe.
                feeder = threading.Thread(target=_feed, args=(stream, stdin), daemon=True)
                feeder.start()
            deadline = time.monotonic() + timeout
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    self._kill_exec(exec_id)
                    why = f"{show_argv(argv)} did not finish within {timeout:g} s"
                    raise SandboxError("exec", why)
                frames = stream.read(left)
                if frames is None:
                    break
                for kind, data in frames:
                    (out if kind == STDOUT else err).extend(data)
                    both += data
        finally:
            stream.close()
        code = None
        for _ in range(100):
            info = self.api.exec_inspect(exec_id)
            if not info.get("Running"):
                code = info.get("ExitCode")
                break
            time.sleep(0.01)
        return ExecResult(
            exit_code=-1 if code is None else code,
            output=bytes(both),
            stdout=bytes(out),
            stderr=bytes(err),
        )

    def _kill_exec(self, exec_id: str) -> None:
        """Best effort: an exec cannot be stopped through the API, but on a local engine its
        process is ours to kill."""
        try:
            pid = self.api.exec_inspect(exec_id).get("Pid") or 0
        except docker.errors.APIError:
            return
        if pid > 0 and engine_is_local():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def _pid_headroom(self) -> _Headroom:
        return _Headroom(self.api, self._id, self.limits.pids)

    def _list_uid(self) -> list[tuple[int, str]]:
        result = self.exec_root(procs.sh(procs.LIST_UID, self.agent_uid))
        return procs.parse_pids(result.stdout)

    def _owner(self, owner: str) -> tuple[int, int]:
        if owner == "root":
            return 0, 0
        if owner in (self.task.agent_user, "agent"):
            return self.agent_uid, self.agent_gid
        uid, _, gid = owner.partition(":")
        if uid.isdigit() and (not gid or gid.isdigit()):
            return int(uid), int(gid or uid)
        result = self.exec_root(["id", "-u", owner])
        group = self.exec_root(["id", "-g", owner])
        if result.exit_code != 0 or group.exit_code != 0:
            raise SandboxError("upload", f"owner {owner!r} is no user in the container")
        return int(result.stdout), int(group.stdout)

    def _put_archive(self, parent: str, data: bytes) -> None:
        try:
            self.api.put_archive(self._id, parent, data)
            return
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            raise SandboxError("upload", f"{parent}: {exc.explanation or exc}") from None
        made = self.exec_root(["mkdir", "-p", parent])
        if made.exit_code != 0:
            raise SandboxError("upload", f"cannot create {parent}: {made.output.decode()[:300]}")
        try:
            self.api.put_archive(self._id, parent, data)
        except docker.errors.APIError as exc:
            raise SandboxError("upload", f"{parent}: {exc.explanation or exc}") from None

    def _archive(self, path: str) -> tarfile.TarFile:
        try:
            stream, _ = self.api.get_archive(self._id, path)
        except docker.errors.NotFound:
            raise SandboxError("not_found", f"{path} does not exist in the container") from None
        except docker.errors.APIError as exc:
            raise SandboxError("download", f"{path}: {exc.explanation or exc}") from None
        return tarfile.open(fileobj=io.BytesIO(b"".join(stream)), mode="r")


class _Headroom:
    """Raises a container's pids limit for a moment (so a root exec can start beside a fork bomb)
    and puts it back. The SDK's update_container has no pids limit, so this posts it."""

    # Few: a fork bomb takes the extra slots as soon as they exist, so this is what the agent can
    # hold beyond its limit; the exec needs only its runtime's own process or two.
    EXTRA = 8

    def __init__(self, api: docker.APIClient, container_id: str, pids: int) -> None:
        self.api, self.id, self.pids = api, container_id, pids

    def _set(self, pids: int) -> None:
        url = f"{self.api.base_url}/v{self.api.api_version}/containers/{self.id}/update"
        response = self.api.post(url, json={"PidsLimit": pids})
        if response.status_code >= 400:
            raise SandboxError("container", f"cannot set the pids limit: {response.text[:300]}")

    def __enter__(self) -> None:
        self._set(self.pids + self.EXTRA)

    def __exit__(self, *exc: object) -> None:
        self._set(self.pids)


def _feed(stream: ExecStream, data: bytes) -> None:
    with contextlib.suppress(SandboxError):
        stream.send(data)
    stream.close_input()


# What sh (dash, busybox), bash and the runtime say when a fork hits the process limit (runc
# itself cannot always start the exec's process there: "read init-p: connection reset by peer").
_FORK_FAILED = re.compile(
    rb"(?i)cannot fork|fork: |can't fork|resource temporarily unavailable"
    rb"|unable to start container process"
)


def show_argv(argv: list[str]) -> str:
    """An argv as an error message shows it (one line, cut)."""
    return " ".join(argv)[:120]
