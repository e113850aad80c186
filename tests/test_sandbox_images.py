"""Task images: content-hash tags, FROM substitution, failing builds and private files (real
Docker builds FROM the local base image; every image made here is removed at the end)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.sandbox.base import SandboxError
from engine.sandbox.dockerapi import connect
from engine.sandbox.images import BASE_IMAGE, TAG_REPO, build_image, remove_task_images
from tests.fixtures_sandbox import BASE, TEST_LABELS, make_task

pytestmark = pytest.mark.docker


@pytest.fixture
def made() -> Iterator[list]:
    """Tasks whose built images the test wants gone afterwards."""
    tasks: list = []
    yield tasks
    client = connect()
    for task in tasks:
        remove_task_images(client, task)


def _context(root: Path, dockerfile: str, files: dict[str, str]) -> Path:
    env = root / "environment"
    env.mkdir(parents=True)
    (env / "Dockerfile").write_text(dockerfile)
    for rel, text in files.items():
        (env / rel).parent.mkdir(parents=True, exist_ok=True)
        (env / rel).write_text(text)
    return env


def _run_in(image: str, argv: list[str]) -> str:
    # Wait, read the logs, then remove: run(remove=True) can lose the output of a container
    # that exits at once when the daemon is busy.
    client = connect()
    container = client.containers.run(
        image, argv, detach=True, network_mode="none", labels=TEST_LABELS, entrypoint=[]
    )
    try:
        container.wait(timeout=120)
        return container.logs(stdout=True, stderr=False).decode()
    finally:
        container.remove(force=True)


def _task(task_id: str, env: Path, **kw):
    return make_task(task_id, context_dir=env, dockerfile=env / "Dockerfile", image=None, **kw)


def test_same_content_is_built_once_and_a_change_rebuilds(tmp_path: Path, made: list) -> None:
    env = _context(
        tmp_path / "t",
        f"FROM {BASE}\nCOPY data.txt /opt/data.txt\n",
        {"data.txt": "one\n", "task.json": '{"truth": "secret"}'},
    )
    task = _task("sandbox-test/hash", env, private_files=("task.json",))
    made.append(task)
    lines: list[str] = []
    first = build_image(task, tmp_path / "logs", lines.append, labels=TEST_LABELS)
    assert first.built and first.tag.startswith(f"{TAG_REPO}/sandbox-test-hash:")
    assert first.log_path is not None and first.log_path.exists() and lines
    again = build_image(task, tmp_path / "logs", labels=TEST_LABELS)
    assert again == first.__class__(first.tag, False, (), first.log_path)
    # A private file is not part of the image, so changing it changes nothing.
    (env / "task.json").write_text('{"truth": "changed"}')
    assert build_image(task, tmp_path / "logs", labels=TEST_LABELS).tag == first.tag
    (env / "data.txt").write_text("two\n")
    changed = build_image(task, tmp_path / "logs", labels=TEST_LABELS)
    assert changed.built and changed.tag != first.tag
    assert _run_in(changed.tag, ["cat", "/opt/data.txt"]) == "two\n"


def test_private_files_never_enter_the_image(tmp_path: Path, made: list) -> None:
    env = _context(
        tmp_path / "t",
        f"FROM {BASE}\nCOPY . /ctx/\n",
        {
            "task.json": "truth",
            "test_initial_state.py": "secret test",
            "hidden/deep.txt": "private dir",
            "visible.txt": "ok",
        },
    )
    task = _task(
        "sandbox-test/private",
        env,
        private_files=("task.json", str(env / "test_initial_state.py"), "hidden"),
    )
    made.append(task)
    result = build_image(task, tmp_path / "logs", labels=TEST_LABELS)
    listing = _run_in(result.tag, ["sh", "-c", "cd /ctx && find . -type f | sort"])
    assert listing == "./Dockerfile\n./visible.txt\n"


def test_unobtainable_from_image_is_substituted_with_a_warning(tmp_path: Path, made: list) -> None:
    missing = "python:3.99-slim-bookworm"  # no such image anywhere, and offline besides
    env = _context(
        tmp_path / "t",
        f"ARG BASE={missing}\nFROM ${{BASE}} AS build\nRUN echo built > /made\n"
        "FROM build\nRUN cat /made\n",
        {},
    )
    task = _task("sandbox-test/substitute", env)
    made.append(task)
    said: list[str] = []
    result = build_image(task, tmp_path / "logs", said.append, labels=TEST_LABELS)
    assert result.built
    assert len(result.warnings) == 1
    assert missing in result.warnings[0] and BASE_IMAGE in result.warnings[0]
    assert any(line.startswith("warning:") and missing in line for line in said)
    assert result.log_path is not None and missing in result.log_path.read_text()
    assert _run_in(result.tag, ["cat", "/etc/debian_version", "/made"]).startswith("12.")


def test_a_substituted_base_looks_like_a_stock_image(tmp_path: Path, made: list) -> None:
    # Endless Terminals Dockerfiles create the agent user themselves; on the substitute that
    # must work as it does on ubuntu:22.04, which has no `user` account.
    env = _context(
        tmp_path / "t",
        "FROM ubuntu:22.04\nRUN useradd -m -u 1000 -s /bin/bash user && pwd > /workdir\n"
        "WORKDIR /home/user\n",
        {},
    )
    task = _task("sandbox-test/stock-like", env)
    made.append(task)
    result = build_image(task, tmp_path / "logs", labels=TEST_LABELS)
    assert result.warnings and "ubuntu:22.04" in result.warnings[0]
    out = _run_in(result.tag, ["sh", "-c", "cat /workdir; id -u user; stat -c %U /home/user"])
    assert out.split() == ["/", "1000", "user"]


def test_a_failing_build_raises_with_the_log_tail(tmp_path: Path, made: list) -> None:
    env = _context(
        tmp_path / "t",
        f"FROM {BASE}\n"
        "RUN for i in $(seq 1 60); do echo line-$i; done; echo about-to-fail; exit 3\n",
        {},
    )
    task = _task("sandbox-test/fails", env)
    made.append(task)
    with pytest.raises(SandboxError) as err:
        build_image(task, tmp_path / "logs", labels=TEST_LABELS)
    assert err.value.kind == "build"
    detail = err.value.detail
    assert "about-to-fail" in detail and "line-60" in detail
    assert "line-5\n" not in detail  # only the tail
    assert "returned a non-zero code: 3" in detail
    assert str(tmp_path / "logs") in detail


def test_build_timeout_stops_the_build(tmp_path: Path, made: list) -> None:
    env = _context(tmp_path / "t", f"FROM {BASE}\nRUN sleep 60\n", {})
    task = _task("sandbox-test/slow", env, build_timeout_sec=2)
    made.append(task)
    with pytest.raises(SandboxError) as err:
        build_image(task, tmp_path / "logs", labels=TEST_LABELS)
    assert "build_timeout_sec = 2 s" in err.value.detail


def test_generated_dockerfile_text_wins_and_local_images_are_used(
    tmp_path: Path, made: list
) -> None:
    env = _context(tmp_path / "t", "FROM this-file-is-not-used\n", {"a.txt": "A"})
    task = make_task(
        "sandbox-test/text",
        context_dir=env,
        dockerfile=env / "Dockerfile",
        dockerfile_text=f"FROM {BASE}\nCOPY a.txt /a.txt\n",
        image=None,
    )
    made.append(task)
    result = build_image(task, tmp_path / "logs", labels=TEST_LABELS)
    assert result.built and not result.warnings
    assert _run_in(result.tag, ["cat", "/a.txt"]) == "A"
    prebuilt = make_task("sandbox-test/prebuilt", image=result.tag)
    assert build_image(prebuilt, tmp_path / "logs").tag == result.tag


def test_a_prebuilt_image_that_cannot_be_had_is_substituted(tmp_path: Path) -> None:
    task = make_task("sandbox-test/gone", image="depthtui-test/never-built:1")
    result = build_image(task, tmp_path / "logs")
    assert result.tag == BASE_IMAGE and not result.built
    assert "depthtui-test/never-built:1" in result.warnings[0]


def test_a_substituted_ubuntu_24_has_its_ubuntu_account(tmp_path: Path, made: list) -> None:
    # Terminal-Bench images built on ubuntu:24.04 often remove its `ubuntu` user first.
    env = _context(
        tmp_path / "t",
        "FROM ubuntu:24.04\nRUN userdel -r ubuntu && useradd -m -u 1000 agent\n",
        {},
    )
    task = _task("sandbox-test/noble-like", env)
    made.append(task)
    result = build_image(task, tmp_path / "logs", labels=TEST_LABELS)
    assert _run_in(result.tag, ["id", "-u", "agent"]).split() == ["1000"]
