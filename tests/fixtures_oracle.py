"""Fixtures for the oracle tests: a fake container root on a tmp folder (pure tests) and a real
episode sandbox (Docker tests). Docker tests fail, never skip, when Docker is missing."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest

from engine.oracle.manifest import RACY_NS, ManifestScanner
from engine.sandbox.start import start_sandbox
from engine.tasks.model import Environment, Limits, Segment, Task

HOME = "/home/user"
IMAGE = "depthtui/base:bookworm"
LABEL = {"depthtui.test": "1"}


@dataclass
class FakeRoot:
    """A folder standing for a container's root, with the home inside it."""

    root: Path
    upper: Path | None = None  # the overlay's upper folder when root is an overlay mount

    @property
    def home_dir(self) -> Path:
        return self.root / HOME.lstrip("/")

    def p(self, rel: str) -> Path:
        return self.home_dir / rel

    def write(self, rel: str, data: str | bytes, mode: int = 0o644) -> Path:
        path = self.p(rel)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        os.chmod(path, mode)
        return path

    def scanner(self) -> ManifestScanner:
        return ManifestScanner(HOME, self.root, upper=self.upper)

    def settle(self) -> None:
        """Let what was just written age past the racy window, so a first walk caches it."""
        time.sleep(RACY_NS / 1e9 + 0.05)


@pytest.fixture(params=["walk", "upper"])
def fake_root(tmp_path: Path, request):
    """Each oracle test runs both ways: a plain folder walked in full, and a real overlay mount
    whose checks read the upper folder's change set (engine/oracle/upper.py)."""
    if request.param == "walk":
        fr = FakeRoot(tmp_path / "rootfs")
        fr.home_dir.mkdir(parents=True)
        yield fr
        return
    layers = tmp_path / "overlay"
    for d in ("lower", "upper", "work"):
        (layers / d).mkdir(parents=True)
    root = tmp_path / "rootfs"
    root.mkdir()
    opts = f"lowerdir={layers}/lower,upperdir={layers}/upper,workdir={layers}/work"
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o", opts, str(root)], check=True)
    fr = FakeRoot(root, layers / "upper")
    fr.home_dir.mkdir(parents=True)
    try:
        yield fr
    finally:
        subprocess.run(["umount", "-l", str(root)], check=False)


def sandbox_task(tmp_path: Path, task_id: str = "oracle-test") -> Task:
    """The least Task the real sandbox needs: the base image, the agent as uid 1000 in its home."""
    seg = Segment(name="main", instruction="", tests={}, solution_script=None, solution_dir=None)
    return Task(
        id=task_id,
        dataset="oracle-tests",
        format="depthtui",
        source_path=tmp_path,
        content_hash="0",
        segments=(seg,),
        environment=Environment(context_dir=None, dockerfile=None, image=IMAGE),
        limits=Limits(),
        verifier_kind="pytest",
    )


@pytest.fixture
def oracle_docker():
    try:
        client = docker.from_env()
        client.ping()
        client.images.get(IMAGE)
    except docker.errors.DockerException as exc:
        pytest.fail(f"these tests need a running Docker engine and the image {IMAGE}: {exc}")
    yield client
    client.close()


@pytest.fixture
def box_factory(oracle_docker, tmp_path):
    """Start real episode sandboxes (engine.sandbox) on the base image, labelled as test
    containers; `volumes` in Docker's bind form. All are removed at the end of the test."""
    started = []

    def make(volumes: dict | None = None):
        sandbox = start_sandbox(
            sandbox_task(tmp_path), IMAGE, labels=LABEL, volumes=volumes, client=oracle_docker
        )
        started.append(sandbox)
        return sandbox

    try:
        yield make
    finally:
        for sandbox in started:
            sandbox.close(remove_snapshots=True)


@pytest.fixture
def box(box_factory):
    """One real episode sandbox."""
    return box_factory()
