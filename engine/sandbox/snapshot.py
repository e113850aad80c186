"""The snapshot of an agent's container (`docker commit`), with a deadline its data sets.

A commit writes out the writable layer, so its time grows with what the agent left. The Docker
client's fixed 120 s read timeout made a big layer an infrastructure error (left out of rates,
tried again) and left the late image behind (issue 24). Here the deadline is COMMIT_BASE_S plus
one second per COMMIT_BYTES_PER_S of the layer's apparent size and per COMMIT_OBJECTS_PER_S of
its objects; past it the commit is given up,
and the image the engine may still finish is removed when it appears (a watcher thread; the
next engine's gc otherwise, by the owner label the image inherits). A commit past its deadline
on a layer of at least AGENT_DATA_BYTES (or AGENT_DATA_OBJECTS) is the agent's data's doing:
`SnapshotSlow` with `agents` True, which the episode stores as the agent's failure
(`snapshot_timeout`); on a small layer it is the engine's (infrastructure).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence

import docker
import docker.errors
import requests.exceptions

from engine.sandbox.base import SandboxError
from engine.sandbox.disk import LayerUsage

COMMIT_BASE_S = 120.0
COMMIT_BYTES_PER_S = 16 << 20
COMMIT_OBJECTS_PER_S = 2000  # many small files cost a commit time too
# A layer this large (or holding this many objects) is the agent's doing: a commit of it past
# its deadline is the agent's.
AGENT_DATA_BYTES = 1 << 30
AGENT_DATA_OBJECTS = 100_000
# How long the watcher waits for an abandoned commit's image, to remove it.
LATE_IMAGE_WAIT_S = 3600.0
LATE_IMAGE_POLL_S = 5.0


class SnapshotSlow(SandboxError):
    """The commit ran past its deadline; `agents`: the agent's data made it slow."""

    def __init__(self, detail: str, agents: bool) -> None:
        super().__init__("snapshot", detail)
        self.agents = agents


def commit_deadline(layer: LayerUsage | None) -> float:
    """Seconds a commit of `layer` (apparent sizes; None: not readable here) may take."""
    if layer is None:
        return COMMIT_BASE_S
    return COMMIT_BASE_S + layer.bytes / COMMIT_BYTES_PER_S + layer.objects / COMMIT_OBJECTS_PER_S


def commit(
    api: docker.APIClient,
    container_id: str,
    changes: Sequence[str],
    layer: LayerUsage | None,
) -> str:
    """`docker commit` (paused) of the container; its image id. SnapshotSlow past the deadline,
    SandboxError when the engine refuses."""
    deadline = commit_deadline(layer)
    params = {"container": container_id, "changes": list(changes), "pause": True}
    started = time.monotonic()
    try:
        # api.commit takes no timeout; the same request with one (the SDK's own helpers).
        response = api._post_json(api._url("/commit"), data={}, params=params, timeout=deadline)
        return str(api._result(response, json=True)["Id"])
    except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
        remove_when_done(api, container_id, started)
        big = layer is not None and (
            layer.bytes >= AGENT_DATA_BYTES or layer.objects >= AGENT_DATA_OBJECTS
        )
        size = (
            f"{layer.bytes >> 20} MiB in {layer.objects} objects"
            if layer is not None
            else "a layer not readable here"
        )
        whose = (
            "the agent's data made it slow"
            if big
            else "the layer is small: the Docker engine is slow"
        )
        raise SnapshotSlow(
            f"the snapshot (docker commit) of {size} ran past its deadline of {deadline:.0f} s "
            f"({whose}); its image is removed when the engine finishes it",
            agents=big,
        ) from None
    except docker.errors.APIError as exc:
        raise SandboxError("snapshot", exc.explanation or str(exc)) from None


def remove_when_done(api: docker.APIClient, container_id: str, since: float) -> None:
    """In a daemon thread: remove the image an abandoned commit of `container_id` produces
    (the engine goes on committing after the client gave up)."""
    started_wall = time.time() - (time.monotonic() - since) - 5

    def watch() -> None:
        end = time.monotonic() + LATE_IMAGE_WAIT_S
        while time.monotonic() < end:
            for image_id in late_images(api, container_id, started_wall):
                with contextlib.suppress(docker.errors.DockerException):
                    api.remove_image(image_id, force=True)
                    return
            time.sleep(LATE_IMAGE_POLL_S)

    threading.Thread(target=watch, name="depthtui-late-snapshot", daemon=True).start()


def late_images(api: docker.APIClient, container_id: str, since_wall: float) -> list[str]:
    """Images committed from `container_id` at or after `since_wall` (epoch seconds)."""
    found: list[str] = []
    with contextlib.suppress(docker.errors.DockerException, requests.exceptions.RequestException):
        for image in api.images(filters={"dangling": True}):
            if image.get("Created", 0) < since_wall:
                continue
            info = api.inspect_image(image["Id"])
            if info.get("Container") == container_id:
                found.append(image["Id"])
    return found
