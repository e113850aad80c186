"""The snapshot's deadline (engine/sandbox/snapshot.py, issue 24 point 4), on real Docker: a
commit past its deadline is given up, blamed on the agent only when its layer is big, and the
image the engine finishes afterwards is removed (no image of a failed try is left)."""

from __future__ import annotations

import time

import docker
import docker.errors
import pytest

from engine.sandbox import snapshot
from engine.sandbox.disk import LayerUsage

pytestmark = [pytest.mark.docker]

IMAGE = "depthtui/base:bookworm"
LABELS = {"depthtui.test": "1"}


def test_the_deadline_grows_with_the_layer() -> None:
    assert snapshot.commit_deadline(None) == snapshot.COMMIT_BASE_S
    ten_gib = LayerUsage(10 << 30, 0, True)
    assert snapshot.commit_deadline(ten_gib) == pytest.approx(snapshot.COMMIT_BASE_S + 640.0)
    many = LayerUsage(0, 400_000, True)
    assert snapshot.commit_deadline(many) == pytest.approx(snapshot.COMMIT_BASE_S + 200.0)


@pytest.mark.parametrize(
    ("layer", "agents"),
    [(LayerUsage(4096, 3, True), False), (LayerUsage(3 << 30, 3, True), True)],
)
def test_a_late_commit_is_given_up_blamed_by_size_and_its_image_removed(
    monkeypatch: pytest.MonkeyPatch, layer: LayerUsage, agents: bool
) -> None:
    client = docker.from_env()
    api = client.api
    container = client.containers.run(
        IMAGE,
        ["bash", "-c", "head -c 20M /dev/urandom > /root/data; sleep 300"],
        detach=True,
        labels=LABELS,
    )
    try:
        time.sleep(1.0)
        # No deadline a commit can meet: the client gives up at once, the engine goes on.
        monkeypatch.setattr(snapshot, "COMMIT_BASE_S", 0.001)
        monkeypatch.setattr(snapshot, "COMMIT_BYTES_PER_S", 1 << 62)
        monkeypatch.setattr(snapshot, "COMMIT_OBJECTS_PER_S", 1 << 62)
        monkeypatch.setattr(snapshot, "LATE_IMAGE_POLL_S", 0.2)
        since = time.time() - 5
        removed: list[str] = []  # the container each removed image was committed from
        real_remove = api.remove_image

        def remove_image(image: str, **kw: object) -> None:
            removed.append(api.inspect_image(image).get("Container"))
            real_remove(image, **kw)

        monkeypatch.setattr(api, "remove_image", remove_image)
        with pytest.raises(snapshot.SnapshotSlow) as caught:
            snapshot.commit(api, container.id, ["LABEL depthtui.test=1"], layer)
        assert caught.value.agents is agents
        assert "deadline" in caught.value.detail
        # The engine finishes the commit after the client left; the watcher removes its image.
        deadline = time.monotonic() + 30
        while not removed and time.monotonic() < deadline:
            time.sleep(0.2)
        assert removed == [container.id]
        assert snapshot.late_images(api, container.id, since) == []
    finally:
        for image_id in snapshot.late_images(api, container.id, 0):
            api.remove_image(image_id, force=True)
        container.remove(force=True)
