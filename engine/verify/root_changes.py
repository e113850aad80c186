"""What an agent that ran as root changed among the programs and libraries a Harbor test.sh runs.

Harbor runs the agent as root unless the task says otherwise (most Terminal-Bench tasks), and
depthtui grades test.sh in a snapshot of that container, as Harbor grades it in the container
itself. Every program test.sh starts comes from the snapshot, the `/bin/bash` that runs test.sh
included, so a root agent that replaced one (a `/usr/bin/bash` that writes 1 to the reward file)
passed without doing the task, and nothing said so: the scan of the test files (agent_code.py)
cannot see it. The container's own change list (Docker's, of its writable layer) can: each
changed, added or deleted path under the system's program and library folders, outside the
agent's home and working folder, is evidence, and the verdict is marked forgeable
(docs/realtasks.md). The grade itself stays Harbor's.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

import docker
import docker.errors

# Where the programs, libraries and their configuration that test.sh may run live.
SYSTEM_FOLDERS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/usr", "/etc", "/opt")
# Made by Docker itself for every container (mount points of its init and its network files):
# the verifier's own container mounts them again.
DOCKER_MADE = frozenset(
    {"/usr/sbin/docker-init", "/etc/hosts", "/etc/hostname", "/etc/resolv.conf", "/etc/mtab"}
)
SHOWN = 3
_KIND = {0: "changed", 1: "added", 2: "deleted"}


def changed_paths(api: docker.APIClient, container_id: str) -> frozenset[str]:
    """Every path Docker lists as changed in the container's writable layer ("" on failure)."""
    try:
        return frozenset(c.get("Path", "") for c in api.diff(container_id) or [])
    except docker.errors.DockerException:
        return frozenset()


def root_changes(
    api: docker.APIClient,
    container_id: str,
    *,
    home: str,
    workdir: str,
    before: frozenset[str] = frozenset(),
) -> tuple[str, ...]:
    """One evidence line naming what the container's writable layer changed under
    SYSTEM_FOLDERS (home and workdir excepted), or () when nothing there changed. Paths in
    `before` (changed before the agent's turns: the image's ENTRYPOINT, a setup.sh) do not
    count: the task made them. (A path both the task and the agent changed is not seen.)"""
    try:
        changes = api.diff(container_id) or []
    except docker.errors.DockerException as exc:
        return (f"changed as root: unknown (the container's changes could not be listed: {exc})",)
    listed = [(c.get("Path", ""), int(c.get("Kind", 0))) for c in changes]
    found = [
        (path, kind)
        for path, kind in system_leaves(listed, home=home, workdir=workdir)
        if path not in before
    ]
    if not found:
        return ()
    shown = ", ".join(f"{path} ({_KIND.get(kind, 'changed')})" for path, kind in found[:SHOWN])
    more = f" and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    return (
        f"changed as root: {shown}{more}; test.sh runs the snapshot's programs (its bash "
        "included), which the agent could replace",
    )


def system_leaves(
    changes: Sequence[tuple[str, int]], *, home: str, workdir: str
) -> list[tuple[str, int]]:
    """The changes that are not merely a folder holding other changes (Docker lists every
    folder above a change as changed), under SYSTEM_FOLDERS and outside `home` and `workdir`,
    sorted by path."""
    parents = {posixpath.dirname(path) for path, _ in changes}
    own = [r.rstrip("/") for r in (home, workdir) if r.rstrip("/")]
    found = []
    for path, kind in changes:
        if (path in parents and kind != 2) or path in DOCKER_MADE:
            continue
        if not any(path == f or path.startswith(f + "/") for f in SYSTEM_FOLDERS):
            continue
        if any(path == r or path.startswith(r + "/") for r in own):
            continue
        found.append((path, kind))
    return sorted(found)
