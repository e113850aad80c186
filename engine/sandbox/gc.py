"""Removing what dead processes left behind: containers and snapshot images labelled with an
owner (`host:pid`) that no longer runs. The engine calls `gc` when it starts; users run
`depthtui sandbox gc`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import docker
import docker.errors

from engine.sandbox.base import SandboxError
from engine.sandbox.dockerapi import connect
from engine.sandbox.labels import LABEL_OWNER, LABEL_ROLE, ROLE_SNAPSHOT, process_runs


@dataclass(frozen=True)
class GcResult:
    containers: list[str] = field(default_factory=list)
    images: list[str] = field(default_factory=list)


def remove_image(client: docker.DockerClient, image_id: str) -> bool:
    """Remove an image (a snapshot); False when it was already gone."""
    try:
        client.api.remove_image(image_id, force=True)
    except docker.errors.NotFound:
        return False
    except docker.errors.APIError as exc:
        raise SandboxError("snapshot", f"cannot remove image {image_id[:19]}: {exc}") from None
    return True


def end_container(api: docker.APIClient, container_id: str, paused: bool) -> None:
    """Kill and remove a container. One left paused (frozen) by a dead harness, its agent's
    processes alive in it (a `docker exec` from outside raced the harness's freeze, issue 24),
    is killed while frozen (the SIGKILLs stay pending: no process of it runs one more
    instruction) and thawed, so the kills land whatever the engine does with a frozen
    container, then removed."""
    if paused:
        try:
            api.kill(container_id)
        except docker.errors.NotFound:
            raise
        except docker.errors.APIError:
            pass  # the removal below kills it too
        try:
            api.unpause(container_id)
        except docker.errors.NotFound:
            raise
        except docker.errors.APIError:
            pass  # not paused any more (killed and thawed by the engine)
    api.remove_container(container_id, force=True, v=True)


def gc(
    owner_alive: Callable[[str], bool] = process_runs,
    *,
    everything: bool = False,
    client: docker.DockerClient | None = None,
) -> GcResult:
    """Remove depthtui containers and snapshot images whose owner is not alive (all of them with
    `everything`). Images built for tasks are a cache and stay."""
    client = client or connect()
    api = client.api
    containers: list[str] = []
    images: list[str] = []
    for c in api.containers(all=True, filters={"label": LABEL_OWNER}):
        owner = (c.get("Labels") or {}).get(LABEL_OWNER, "")
        if everything or not owner_alive(owner):
            try:
                end_container(api, c["Id"], paused=c.get("State") == "paused")
                containers.append(c["Id"])
            except docker.errors.NotFound:
                pass
    for img in api.images(filters={"label": f"{LABEL_ROLE}={ROLE_SNAPSHOT}"}):
        owner = (img.get("Labels") or {}).get(LABEL_OWNER, "")
        if (everything or not owner_alive(owner)) and remove_image(client, img["Id"]):
            images.append(img["Id"])
    return GcResult(containers=containers, images=images)
