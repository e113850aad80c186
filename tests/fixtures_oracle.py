"""Fixtures for the oracle tests: a fake container root on a tmp folder (pure tests) and a real
container (Docker tests) reached through a small adapter with the Sandbox protocol's harness
methods. Docker tests fail, never skip, when Docker is missing."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

import docker
from engine.oracle.manifest import RACY_NS, ManifestScanner
from engine.sandbox.base import ExecResult

HOME = "/home/user"
IMAGE = "depthtui/base:bookworm"
LABEL = {"depthtui.test": "1"}


@dataclass
class FakeRoot:
    """A folder standing for a container's root, with the home inside it."""

    root: Path

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
        return ManifestScanner(HOME, self.root)

    def settle(self) -> None:
        """Let what was just written age past the racy window, so a first walk caches it."""
        time.sleep(RACY_NS / 1e9 + 0.05)


@pytest.fixture
def fake_root(tmp_path: Path) -> FakeRoot:
    fr = FakeRoot(tmp_path / "rootfs")
    fr.home_dir.mkdir(parents=True)
    return fr


class DockerBox:
    """A raw labelled container with the harness side of the Sandbox protocol: root commands,
    agent commands as uid 1000 in the home, the merged overlay folder, and cleanup."""

    def __init__(self, client: docker.DockerClient, image: str = IMAGE) -> None:
        self.container = client.containers.run(
            image,
            ["sleep", "infinity"],
            detach=True,
            network_mode="none",
            labels=LABEL,
            user="root",
            working_dir=HOME,
        )
        self.home = HOME

    @property
    def container_id(self) -> str:
        return self.container.id

    def _docker(self, user: str, argv: list[str], stdin: bytes | None, timeout: float):
        cmd = ["docker", "exec", *(["-i"] if stdin is not None else []), "-u", user]
        cmd += ["-w", HOME, "-e", f"HOME={HOME}", self.container.id, *argv]
        return subprocess.run(
            cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout
        )

    def exec_root(
        self, argv: list[str], stdin: bytes | None = None, timeout: float = 60.0
    ) -> ExecResult:
        p = self._docker("0", argv, stdin, timeout)
        return ExecResult(p.returncode, p.stdout)

    def agent(self, command: str, timeout: float = 30.0) -> ExecResult:
        """One command in bash as uid 1000 (a stand-in for the agent's shell)."""
        p = self._docker("1000", ["bash", "--noprofile", "--norc", "-c", command], None, timeout)
        return ExecResult(p.returncode, p.stdout)

    def rootfs(self) -> Path | None:
        self.container.reload()
        return Path(self.container.attrs["GraphDriver"]["Data"]["MergedDir"])

    def kill_agent_processes(self) -> None:
        self.exec_root(["pkill", "-9", "-u", "1000"])

    def close(self) -> None:
        try:
            self.container.remove(force=True)
        except docker.errors.NotFound:
            pass


@pytest.fixture
def docker_client():
    try:
        client = docker.from_env()
        client.ping()
        client.images.get(IMAGE)
    except docker.errors.DockerException as exc:
        pytest.fail(f"these tests need a running Docker engine and the image {IMAGE}: {exc}")
    yield client
    client.close()


@pytest.fixture
def box(docker_client):
    b = DockerBox(docker_client)
    try:
        yield b
    finally:
        b.close()
