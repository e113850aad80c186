"""One verifier run: a fresh, short-lived container from a snapshot image, fed a few bytes on
stdin, stopped at a whole-run timeout, and always removed.

A fresh container is what keeps the agent out of grading: no process the agent left running
survives a `docker commit`, and every mount given here (the tests, the toolchain, the log folder)
lies over whatever the snapshot has at that path.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors
import requests.exceptions
from docker.types import LogConfig

from engine.sandbox.base import SandboxError
from engine.sandbox.labels import LABEL_OWNER, LABEL_ROLE, ROLE_VERIFIER, this_owner
from engine.tasks.model import Limits
from engine.verify import stream

# Both streams share one json-file log of at most this size; older output is dropped first, so
# the runner's record (printed last) survives a flood of test output.
LOG_MAX_SIZE = "16m"
OUTPUT_LIMIT = 16 * 1024 * 1024
# How often a streamed run asks its `watch` (the size of the host folders it writes into).
WATCH_EVERY_S = 0.25


@dataclass(frozen=True)
class Bind:
    source: str
    target: str
    read_only: bool = True

    def spec(self) -> str:
        return f"{self.source}:{self.target}:{'ro' if self.read_only else 'rw'}"


@dataclass(frozen=True)
class RunResult:
    exit_code: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    oom_killed: bool
    duration_s: float
    # A streamed run (`output_limit`): how many bytes both streams carried in all, and why the
    # run was stopped before its end for what it printed or wrote ("" when it was not).
    output_bytes: int = 0
    flooded: str = ""


def docker_client() -> docker.DockerClient:
    try:
        return docker.from_env()
    except docker.errors.DockerException as exc:
        raise SandboxError("infrastructure", f"no Docker engine answers: {exc}") from exc


class ContainerStartError(SandboxError):
    """The verifier's container was made but does not start (twice): Docker refused what the
    image holds at a path it mounts onto (a file where a folder must be, a folder at
    /etc/ld.so.preload). On a snapshot that can be the agent's doing; the verifiers give it the
    code `container_start`, which the episode tells apart by starting the same on the task's
    own image (verify/outcome.py)."""

    def __init__(self, detail: str) -> None:
        super().__init__("container_start", detail)


def run_once(client: docker.DockerClient, **kw: Any) -> RunResult:
    """Run `argv` once in a new container of `image` (_run_once has the arguments); a
    container that does not start is tried once more, so that a moment's trouble of the
    engine is not taken for the image's."""
    try:
        return _run_once(client, **kw)
    except ContainerStartError:
        return _run_once(client, **kw)


def _run_once(
    client: docker.DockerClient,
    *,
    image: str,
    argv: Sequence[str],
    user: str,
    workdir: str,
    env: Sequence[str],
    binds: Sequence[Bind],
    limits: Limits,
    timeout_s: float,
    stdin: bytes | None = None,
    labels: Mapping[str, str] | None = None,
    drop_all_caps: bool = True,
    network_mode: str = "none",
    output_limit: int | None = None,
    watch: Callable[[], str] | None = None,
) -> RunResult:
    """Run `argv` once in a new container of `image` with no network and the agent's limits;
    raise SandboxError when Docker itself fails (never for what the command does).
    `network_mode` "container:ID" joins the offline network namespace (loopback, /etc/hosts)
    of a services container (services.py) instead.

    With `output_limit`, both streams are read by this process as they come (nothing is logged
    by the engine on the host) and kept as a head and a tail (`stream.BoundedOutput`); past the
    limit, or when `watch` (asked every WATCH_EVERY_S) names a reason, the container is killed
    and the result says why (`flooded`)."""
    api = client.api
    streamed = output_limit is not None
    log_config = (
        LogConfig(type="none", config={})
        if streamed
        else LogConfig(type="json-file", config={"max-size": LOG_MAX_SIZE, "max-file": "1"})
    )
    host_config = api.create_host_config(
        binds=[b.spec() for b in binds],
        network_mode=network_mode,
        mem_limit=f"{limits.memory_mb}m",
        memswap_limit=f"{limits.memory_mb}m",
        nano_cpus=int(limits.cpus * 1e9),
        pids_limit=limits.pids,
        security_opt=["no-new-privileges"],
        cap_drop=["ALL"] if drop_all_caps else None,
        # A static init (docker-init from the host) reaps what the tests leave behind.
        init=True,
        log_config=log_config,
    )
    try:
        created = api.create_container(
            image,
            command=list(argv[1:]),
            entrypoint=[argv[0]],
            user=user,
            working_dir=workdir,
            environment=list(env),
            host_config=host_config,
            # The owner (this process) lets `sandbox gc` and the next engine remove a verifier
            # container that a dead engine left running (a test.sh that never ends runs on).
            labels={LABEL_OWNER: this_owner(), LABEL_ROLE: ROLE_VERIFIER, **(labels or {})},
            stdin_open=stdin is not None,
            detach=stdin is None,
            network_disabled=network_mode == "none",
        )
    except docker.errors.DockerException as exc:
        raise SandboxError(
            "verifier", f"cannot create a verifier container of {image}: {exc}"
        ) from exc
    cid = created["Id"]
    started = time.monotonic()
    try:
        sock = None
        if stdin is not None:
            sock = api.attach_socket(cid, params={"stdin": 1, "stream": 1})
        if streamed:
            # Attached before the start, so no byte is missed.
            out = stream.attach(api, cid)
        try:
            api.start(cid)
        except docker.errors.APIError as exc:
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()
            if streamed:
                out.close()
            raise ContainerStartError(
                f"the verifier's container of {image} does not start: {exc.explanation or exc}"
            ) from exc
        if sock is not None:
            _send_and_close(sock, stdin or b"")
        if streamed:
            assert output_limit is not None
            return _streamed_result(
                api, cid, out, output_limit, watch, started, started + timeout_s
            )
        timed_out = False
        exit_code: int | None = None
        try:
            exit_code = int(api.wait(cid, timeout=timeout_s)["StatusCode"])
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            timed_out = True
            with contextlib.suppress(docker.errors.DockerException):
                api.kill(cid)
        duration = time.monotonic() - started
        state = api.inspect_container(cid)["State"]
        stdout = api.logs(cid, stdout=True, stderr=False)[-OUTPUT_LIMIT:]
        stderr = api.logs(cid, stdout=False, stderr=True)[-OUTPUT_LIMIT:]
        return RunResult(
            exit_code=None if timed_out else exit_code,
            stdout=stdout,
            stderr=stderr,
            timed_out=timed_out,
            oom_killed=bool(state.get("OOMKilled")),
            duration_s=duration,
        )
    except docker.errors.DockerException as exc:
        raise SandboxError("verifier", f"verifier container {cid[:12]} failed: {exc}") from exc
    finally:
        with contextlib.suppress(docker.errors.DockerException):
            api.remove_container(cid, force=True, v=True)


def _streamed_result(
    api: docker.APIClient,
    cid: str,
    out: stream.Attached,
    limit: int,
    watch: Callable[[], str] | None,
    started: float,
    deadline: float,
) -> RunResult:
    """Read the run's output until it ends, its deadline passes, it prints past `limit` or
    `watch` names a reason to stop it; then its result (output as stdout, stderr empty)."""
    kept = stream.BoundedOutput()
    flooded = ""
    timed_out = False
    next_watch = time.monotonic() + WATCH_EVERY_S
    try:
        while not out.ended:
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            out.read_into(kept, min(deadline - now, WATCH_EVERY_S))
            if kept.total > limit:
                flooded = f"it printed more than {limit >> 20} MiB"
                break
            if watch is not None and time.monotonic() >= next_watch:
                next_watch = time.monotonic() + WATCH_EVERY_S
                flooded = watch()
                if flooded:
                    break
    finally:
        out.close()
    exit_code: int | None = None
    if timed_out or flooded:
        with contextlib.suppress(docker.errors.DockerException):
            api.kill(cid)
    else:
        try:
            left = max(deadline - time.monotonic(), 1.0)
            exit_code = int(api.wait(cid, timeout=left)["StatusCode"])
        except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
            timed_out = True
            with contextlib.suppress(docker.errors.DockerException):
                api.kill(cid)
    duration = time.monotonic() - started
    if watch is not None and not flooded and not timed_out:
        # Once more after the end: a writer faster than the poll (a bounded folder filled in
        # a fraction of WATCH_EVERY_S, the rest refused by the kernel) ends before any poll.
        flooded = watch()
    state = api.inspect_container(cid)["State"]
    return RunResult(
        exit_code=exit_code,
        stdout=kept.text(),
        stderr=b"",
        timed_out=timed_out,
        oom_killed=bool(state.get("OOMKilled")),
        duration_s=duration,
        output_bytes=kept.total,
        flooded=flooded,
    )


def _send_and_close(sock: object, data: bytes) -> None:
    raw = getattr(sock, "_sock", sock)
    try:
        raw.sendall(data)
        with contextlib.suppress(OSError):
            raw.shutdown(socket.SHUT_WR)
    finally:
        with contextlib.suppress(OSError):
            sock.close()
