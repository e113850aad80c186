"""Fixtures for the verifier tests: a Docker client, the trusted toolchain (built by
docker/toolchain.sh when missing or stale), and "agent snapshots": a container of a base image
where a script runs as the agent (uid 1000, in its home), committed to an image the way the
episode runner snapshots the agent's container. Docker tests fail, never skip, when Docker is
missing. Everything created is labelled depthtui.test=1 and removed."""

from __future__ import annotations

import subprocess
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import pytest

from engine.verify.toolchain import Toolchain, ToolchainError, load_toolchain

ROOT = Path(__file__).resolve().parents[1]
BOOKWORM = "depthtui/base:bookworm"
BULLSEYE = "depthtui/base:bullseye"
LABELS = {"depthtui.test": "1"}
HOME = "/home/user"


@pytest.fixture(scope="session")
def docker_client() -> docker.DockerClient:
    client = docker.from_env()
    client.ping()
    return client


@pytest.fixture(scope="session")
def toolchain(docker_client: docker.DockerClient) -> Toolchain:
    try:
        return load_toolchain()
    except ToolchainError:
        subprocess.run([str(ROOT / "docker" / "toolchain.sh")], check=True, cwd=ROOT)
        return load_toolchain()


Snapshot = Callable[..., str]


@pytest.fixture
def snapshot(docker_client: docker.DockerClient) -> Iterator[Snapshot]:
    """make(agent_script, root_script="", background="", base=BOOKWORM, env=()) -> image id.

    root_script runs first as root (what the task image would hold), then agent_script as uid
    1000 in the home; `background` is started as uid 1000 in a detached exec and left running
    (writing to its stdout) when the container is committed. `env` adds ENV lines to the
    snapshot's image config."""
    made: list[str] = []

    def make(
        agent_script: str,
        *,
        root_script: str = "",
        background: str = "",
        base: str = BOOKWORM,
        env: tuple[str, ...] = (),
    ) -> str:
        box = docker_client.containers.run(
            base,
            ["sleep", "infinity"],
            detach=True,
            labels=LABELS,
            network_mode="none",
            user="0",
        )
        try:
            for script, user in ((root_script, "0"), (agent_script, "1000")):
                if not script:
                    continue
                res = box.exec_run(
                    ["bash", "-c", textwrap.dedent(script)],
                    user=user,
                    workdir=HOME,
                    environment={"HOME": HOME if user == "1000" else "/root"},
                )
                assert res.exit_code == 0, res.output.decode(errors="replace")
            if background:
                box.exec_run(
                    ["bash", "-c", textwrap.dedent(background)],
                    user="1000",
                    workdir=HOME,
                    detach=True,
                )
                top = box.top()["Processes"]
                assert len(top) > 1, "the background process did not start"
            changes = ["LABEL depthtui.test=1", *(f"ENV {e}" for e in env)]
            image = box.commit(changes=changes)
        finally:
            box.remove(force=True)
        made.append(image.id)
        return image.id

    yield make
    for image_id in made:
        try:
            docker_client.images.remove(image_id, force=True)
        except docker.errors.DockerException:
            pass


@pytest.fixture
def write_tests(tmp_path: Path) -> Callable[[dict[str, str]], dict[str, Path]]:
    """write(files) -> a Segment.tests map (name under /tests -> host path) of the given texts."""
    folder = tmp_path / "tests"

    def write(files: dict[str, str]) -> dict[str, Path]:
        out = {}
        for name, text in files.items():
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text))
            out[name] = path
        return out

    return write
