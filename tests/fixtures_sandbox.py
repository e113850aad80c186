"""Helpers for the sandbox tests: a minimal Task, and the label every test container and image
carries so a crashed run's leftovers can be found (`docker ps -a --filter label=depthtui.test`)."""

from __future__ import annotations

from pathlib import Path

from engine.tasks.model import Environment, Limits, Segment, Task

BASE = "depthtui/base:bookworm"
TEST_LABELS = {"depthtui.test": "1"}


def make_task(
    task_id: str = "sandbox-test",
    *,
    context_dir: Path | None = None,
    dockerfile: Path | None = None,
    dockerfile_text: str | None = None,
    image: str | None = BASE,
    private_files: tuple[str, ...] = (),
    limits: Limits | None = None,
    build_timeout_sec: float = 600.0,
    agent_user: str = "user",
    agent_uid: int = 1000,
    home: str = "/home/user",
    workdir: str = "/home/user",
    env: dict[str, str] | None = None,
) -> Task:
    return Task(
        id=task_id,
        dataset="sandbox-tests",
        format="depthtui",
        source_path=context_dir or Path("/nonexistent"),
        content_hash="0" * 16,
        segments=(
            Segment(
                name="main",
                instruction="test",
                tests={},
                solution_script=None,
                solution_dir=None,
            ),
        ),
        environment=Environment(
            context_dir=context_dir,
            dockerfile=dockerfile,
            image=image,
            dockerfile_text=dockerfile_text,
            build_timeout_sec=build_timeout_sec,
            private_files=private_files,
            env=env or {},
        ),
        limits=limits or Limits(),
        verifier_kind="pytest",
        agent_user=agent_user,
        agent_uid=agent_uid,
        home=home,
        workdir=workdir,
    )


def rss_bytes() -> int:
    """This process's resident memory."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")
