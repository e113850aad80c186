"""The services a task's image ENTRYPOINT starts, given to the verifier (docs/realtasks.md).

Harbor grades in the environment the agent had: what the entrypoint started (a local server, the
names it wrote to /etc/hosts) is still there when test.sh runs. depthtui grades in a fresh
container of the snapshot, where no process survives, and must not run the snapshot's
entrypoint: the agent could have rewritten it. So the services run from the task's own image,
where the agent never ran: a container of it is started as the agent's was (its ENTRYPOINT, our
sleeper as the command, no network), and the verifier's container joins its network namespace
(`--network container:ID`), which gives it that loopback and that /etc/hosts. The verifier still
runs no code of the agent's beyond what the task's tests run.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Mapping

import docker
import docker.errors

from engine.sandbox.base import SandboxError
from engine.sandbox.containers import show_argv
from engine.sandbox.labels import LABEL_OWNER, LABEL_ROLE, ROLE_VERIFIER, this_owner
from engine.sandbox.start import (
    ENTRYPOINT_WAIT_S,
    FIND_SLEEPER,
    KEPT_CAPS,
    SLEEPER,
    image_entrypoint,
)
from engine.tasks.model import Limits

NO_SERVICES = "none"
# After the entrypoint handed over: how long the listening sockets must stay the same (a service
# started in the background may still be binding), and the most that is waited for it.
SETTLE_S = 0.6
SETTLE_MAX_S = 10.0
_LISTENING = [
    "/bin/sh",
    "-c",
    # State 0A is LISTEN; the local address column names the port.
    "cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk '$4 == \"0A\" {print $2}' | sort",
]


@contextlib.contextmanager
def entrypoint_services(
    client: docker.DockerClient,
    task_image: str | None,
    *,
    env: Mapping[str, str],
    limits: Limits,
    labels: Mapping[str, str],
) -> Iterator[str]:
    """The network mode for the verifier's container: "container:ID" of a running container of
    `task_image` whose ENTRYPOINT has started its services, removed on exit; "none" when the
    image has no ENTRYPOINT (or no task image is known). Raises SandboxError when the services
    cannot be started (an infrastructure error: the same entrypoint ran before the agent)."""
    entrypoint = image_entrypoint(client, task_image) if task_image else []
    if not entrypoint:
        yield NO_SERVICES
        return
    api = client.api
    host_config = api.create_host_config(
        network_mode="none",
        nano_cpus=int(limits.cpus * 1e9),
        mem_limit=f"{limits.memory_mb}m",
        memswap_limit=f"{limits.memory_mb}m",
        pids_limit=limits.pids,
        security_opt=["no-new-privileges"],
        cap_drop=["ALL"],
        cap_add=list(KEPT_CAPS),
        init=True,
    )
    try:
        created = api.create_container(
            task_image,
            command=SLEEPER,  # under the image's own ENTRYPOINT, as the agent's container
            user="0",
            environment=dict(env) or None,
            host_config=host_config,
            # Its sleeper never ends: an engine that dies while grading would leave it running
            # for good, unless `sandbox gc` (and the next engine) can tell whose it is.
            labels={LABEL_OWNER: this_owner(), LABEL_ROLE: ROLE_VERIFIER, **labels},
            # Network mode "none" (loopback only), but not disabled: a disabled network has no
            # /etc/hosts of Docker's, and that file is what the verifier's container shares.
            network_disabled=False,
        )
    except docker.errors.DockerException as exc:
        raise SandboxError(
            "verifier", f"cannot create the services container of {task_image}: {exc}"
        ) from exc
    cid = created["Id"]
    try:
        api.start(cid)
        _await_sleeper(api, cid, entrypoint)
        _settle(api, cid)
        yield f"container:{cid}"
    except docker.errors.DockerException as exc:
        raise SandboxError("verifier", f"services container {cid[:12]} failed: {exc}") from exc
    finally:
        with contextlib.suppress(docker.errors.DockerException):
            api.remove_container(cid, force=True, v=True)


def services_gone(client: docker.DockerClient, network_mode: str) -> str:
    """Why the services container a verifier joins (`network_mode` "container:ID") is no
    longer running; "" while it runs, or when there is none."""
    if not network_mode.startswith("container:"):
        return ""
    cid = network_mode.split(":", 1)[1]
    try:
        state = client.api.inspect_container(cid)["State"]
    except docker.errors.DockerException as exc:
        return f"the services container {cid[:12]} is gone ({exc})"
    if state.get("Running"):
        return ""
    return f"the services container {cid[:12]} stopped (exit code {state.get('ExitCode')})"


def _exec(api: docker.APIClient, cid: str, argv: list[str]) -> tuple[int | None, bytes]:
    handle = api.exec_create(cid, argv, user="0", stdout=True, stderr=False)
    out = api.exec_start(handle["Id"])
    return api.exec_inspect(handle["Id"]).get("ExitCode"), out or b""


def _await_sleeper(api: docker.APIClient, cid: str, entrypoint: list[str]) -> None:
    deadline = time.monotonic() + ENTRYPOINT_WAIT_S
    while time.monotonic() < deadline:
        state = api.inspect_container(cid)["State"]
        if not state.get("Running"):
            said = " ".join(api.logs(cid, tail=15).decode("utf-8", "replace").split())[-400:]
            raise SandboxError(
                "verifier",
                f"the image's ENTRYPOINT {show_argv(entrypoint)} exited with code "
                f"{state.get('ExitCode')} in the services container"
                + (f"; it printed: {said}" if said else ""),
            )
        if _exec(api, cid, FIND_SLEEPER)[0] == 0:
            return
        time.sleep(0.1)
    # One that never hands over keeps running: its services are what it started.


def _settle(api: docker.APIClient, cid: str) -> None:
    """Wait until the listening sockets stop changing for SETTLE_S (at most SETTLE_MAX_S)."""
    deadline = time.monotonic() + SETTLE_MAX_S
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        now = _exec(api, cid, _LISTENING)[1]
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= SETTLE_S:
            return
        time.sleep(0.15)
