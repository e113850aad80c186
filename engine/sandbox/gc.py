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
                api.remove_container(c["Id"], force=True, v=True)
                containers.append(c["Id"])
            except docker.errors.NotFound:
                pass
    for img in api.images(filters={"label": f"{LABEL_ROLE}={ROLE_SNAPSHOT}"}):
        owner = (img.get("Labels") or {}).get(LABEL_OWNER, "")
        if (everything or not owner_alive(owner)) and remove_image(client, img["Id"]):
            images.append(img["Id"])
    return GcResult(containers=containers, images=images)
