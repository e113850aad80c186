"""Starting an episode's container: limits, capabilities, labels, the root sleeper (under the
image's own ENTRYPOINT when it has one), the agent user and its home, then the agent's shell.
What the started container offers is DockerSandbox's (containers.py).
"""

from __future__ import annotations

import time

import docker
import docker.errors

from engine.sandbox import freezer, procs
from engine.sandbox.base import SandboxError
from engine.sandbox.containers import DockerSandbox, show_argv
from engine.sandbox.disk import watch_for
from engine.sandbox.dockerapi import connect
from engine.sandbox.labels import LABEL_OWNER, LABEL_ROLE, ROLE_AGENT, this_owner
from engine.sandbox.shell import PersistentShell
from engine.tasks.model import Limits, Task

# Capabilities kept in the bounding set. The agent runs as an unprivileged uid with
# no-new-privileges, so it holds none of them; they are there for the root-side harness execs:
#   CHOWN, FOWNER, FSETID     plant files owned by the agent, set modes on its files (faults)
#   DAC_OVERRIDE              read and restore any file whatever its mode (manifest, mode-000)
#   KILL                      kill the agent's processes on a timeout and at the end
#   SETUID, SETGID            start execs (the agent's shell, verifier runs) as another user
# Everything else Docker grants by default is dropped: NET_RAW, NET_BIND_SERVICE, MKNOD,
# SYS_CHROOT, AUDIT_WRITE, SETPCAP, SETFCAP.
KEPT_CAPS = ("CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "SETUID", "SETGID")

# Runs forever as root; `sleep` is asked again every day so busybox images work too.
SLEEPER = ["/bin/sh", "-c", "while :; do sleep 86400; done"]

# $1 uid, $2 user name, $3 home, $4 workdir. Makes sure the agent user exists, owns its home,
# and the workdir exists; prints "gid N" and "sleeper PID" (pid 1's only child at this point).
_SETUP = r"""
uid=$1; user=$2; home=$3; workdir=$4; gid=
# The image's own account of that name wins: a task's uid may be a guess (a Dockerfile's
# `useradd agent` on a base that already has uid 1000 gives 1001).
if [ "$uid" != 0 ]; then
    while IFS=: read -r n _ u g _; do
        if [ "$n" = "$user" ]; then uid=$u; gid=$g; break; fi
    done < /etc/passwd
fi
if [ -z "$gid" ]; then
    while IFS=: read -r n _ u g _; do
        if [ "$u" = "$uid" ]; then gid=$g; break; fi
    done < /etc/passwd
fi
if [ -z "$gid" ]; then
    gid=$uid
    have=
    while IFS=: read -r n _ g _; do
        if [ "$g" = "$gid" ]; then have=1; break; fi
    done < /etc/group
    [ -n "$have" ] || echo "$user:x:$gid:" >> /etc/group
    echo "$user:x:$uid:$gid::$home:/bin/bash" >> /etc/passwd
fi
if [ ! -d "$home" ]; then mkdir -p "$home"; fi
if [ "$uid" != 0 ]; then chown "$uid:$gid" "$home"; fi
if [ ! -d "$workdir" ]; then
    mkdir -p "$workdir"
    if [ "$uid" != 0 ]; then chown "$uid:$gid" "$workdir"; fi
fi
echo "uid $uid"
echo "gid $gid"
for d in /proc/[0-9]*; do
    read -r line 2>/dev/null < "$d/stat" || continue
    set -- ${line##*) }
    if [ "$2" = 1 ]; then echo "sleeper ${d#/proc/}"; break; fi
done
"""


def start_sandbox(
    task: Task,
    image: str,
    *,
    labels: dict[str, str],
    network: bool = False,
    limits: Limits | None = None,
    volumes: dict[str, dict[str, str]] | None = None,
    client: docker.DockerClient | None = None,
) -> DockerSandbox:
    """Start a container for one episode and its agent shell; ready for `run` on return.

    `labels` should carry `depthtui.job` and `depthtui.episode`; `depthtui.owner` (this process)
    and `depthtui.role=agent` are added unless given. `volumes` is Docker's bind form
    ({host path: {"bind": path, "mode": "ro"}}), for the verifier's read-only mounts.
    """
    client = client or connect()
    limits = limits or task.limits
    all_labels = {LABEL_OWNER: this_owner(), LABEL_ROLE: ROLE_AGENT, **labels}
    host_config = client.api.create_host_config(
        network_mode="bridge" if network else "none",
        nano_cpus=int(limits.cpus * 1e9),
        mem_limit=f"{limits.memory_mb}m",
        memswap_limit=f"{limits.memory_mb}m",
        pids_limit=limits.pids,
        security_opt=["no-new-privileges"],
        cap_drop=["ALL"],
        cap_add=list(KEPT_CAPS),
        init=True,
        binds=volumes or None,
    )
    entrypoint = image_entrypoint(client, image)
    try:
        created = client.api.create_container(
            image,
            # As Harbor does: the image's ENTRYPOINT stays and runs the sleeper as its command
            # (one that ends in `exec "$@"`); without one, the sleeper is the entrypoint.
            entrypoint=None if entrypoint else SLEEPER[:1],
            command=SLEEPER if entrypoint else SLEEPER[1:],
            user="0",
            labels=all_labels,
            environment=dict(task.environment.env) or None,
            host_config=host_config,
            network_disabled=not network,
        )
        container_id = created["Id"]
    except docker.errors.ImageNotFound:
        raise SandboxError("container", f"image {image} is not on this engine") from None
    except docker.errors.APIError as exc:
        raise SandboxError("container", f"cannot create a container of {image}: {exc}") from None
    sandbox = DockerSandbox(client, container_id, task, limits)
    try:
        client.api.start(container_id)
        if entrypoint:
            _await_sleeper(sandbox, entrypoint)
        _prepare(sandbox)
    except BaseException:
        sandbox.close()
        raise
    return sandbox


# How long an image's ENTRYPOINT may take to reach `exec "$@"` (it may start a service first).
ENTRYPOINT_WAIT_S = 30.0
# Finds the running sleeper; the bracket keeps the search from finding its own command line.
FIND_SLEEPER = ["/bin/sh", "-c", "grep -l 'do slee[p] 86400' /proc/[0-9]*/cmdline 2>/dev/null"]


def image_entrypoint(client: docker.DockerClient, image: str) -> list[str]:
    """The image's own ENTRYPOINT ([] when it has none, or it is our sleeper)."""
    try:
        config = client.api.inspect_image(image).get("Config") or {}
    except docker.errors.ImageNotFound:
        return []  # create_container says so in its own words
    entrypoint = list(config.get("Entrypoint") or [])
    # A snapshot of one of our containers carries our own sleeper as its entrypoint.
    return [] if entrypoint == SLEEPER[:1] else entrypoint


def _await_sleeper(sandbox: DockerSandbox, entrypoint: list[str]) -> None:
    """Wait until the image's entrypoint has handed over to the sleeper. One that exits first is
    the task's error, named with what it printed. One that never hands over but keeps running
    is left running (the harness only needs the container up)."""
    deadline = time.monotonic() + ENTRYPOINT_WAIT_S
    while time.monotonic() < deadline:
        state = sandbox.api.inspect_container(sandbox.container_id)["State"]
        if not state.get("Running"):
            raw = sandbox.api.logs(sandbox.container_id, tail=15)
            said = " ".join(raw.decode("utf-8", "replace").split())[-400:]
            raise SandboxError(
                "entrypoint",
                f"the image's ENTRYPOINT {show_argv(entrypoint)} exited with code "
                f"{state.get('ExitCode')} before running its command (the task's image must "
                f'keep running `sleep` as Harbor runs it: end the entrypoint in exec "$@")'
                + (f"; it printed: {said}" if said else ""),
            )
        try:
            found = sandbox.exec_root(FIND_SLEEPER, timeout=10.0)
        except SandboxError:
            continue  # the container stopped meanwhile: the next look says how
        if found.exit_code == 0:
            return
        time.sleep(0.1)


def _prepare(sandbox: DockerSandbox) -> None:
    task = sandbox.task
    result = sandbox.exec_root(
        procs.sh(_SETUP, task.agent_uid, task.agent_user, task.home, task.workdir)
    )
    if result.exit_code != 0:
        detail = result.output.decode("utf-8", "replace")[-500:]
        raise SandboxError("container", f"setting up the agent user failed: {detail}")
    for line in result.stdout.decode().splitlines():
        key, _, value = line.partition(" ")
        if key == "uid" and value.isdigit():
            sandbox.agent_uid = int(value)
        elif key == "gid" and value.isdigit():
            sandbox.agent_gid = int(value)
        elif key == "sleeper" and value.isdigit():
            sandbox.sleeper_pid = int(value)
    env = {
        "HOME": task.home,
        "USER": task.agent_user,
        "LOGNAME": task.agent_user,
        "TERM": "dumb",
        "PAGER": "cat",
        "GIT_PAGER": "cat",
        **task.environment.env,
    }
    sandbox.shell = PersistentShell(
        sandbox.api,
        sandbox.container_id,
        user=f"{sandbox.agent_uid}:{sandbox.agent_gid}",
        env=env,
        workdir=task.workdir,
        home=task.home,
        exec_as=sandbox.exec_as,
        default_timeout=sandbox.limits.command_timeout_sec,
    )
    shell = sandbox.shell
    view = freezer.host_view(sandbox.api, sandbox.container_id)
    sandbox.host_kill, sandbox.freezer.listed = view.local, view.listed
    shell.procs_file = view.unified  # before the first shell, which reads what quiet is
    shell.start()
    if sandbox.host_kill:
        shell.host_kill = sandbox._kill_command_from_host
    shell.disk_watch = sandbox.disk_watch = watch_for(
        sandbox._layer_dir("UpperDir"),
        sandbox.limits.storage_mb,
        kill=lambda: sandbox.kill_from_host(spare_shell=True),
    )
