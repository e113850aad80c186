"""The bare Docker floor of one episode, for `depthtui bench engine`: what any harness pays to run
a task in a container and grade it, through the same docker SDK API depthtui uses, with nothing
of depthtui's own in between.

Per task: create and start a container of the task image (no network, the task's limits), commit
it, run a verifier container of the snapshot that runs the trusted toolchain's pytest on the
task's tests (mounted read-only, as the verifier has them) and wait for it, then remove both
containers and the snapshot. No shell, no oracle, no fault, no planted files, no signed record.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import docker

from engine.sandbox.images import build_image
from engine.verify.toolchain import MOUNT, RUNNER, load_toolchain

LABELS = {"depthtui.bench": "floor"}


def floor_seconds(client: docker.DockerClient, task: Any, log_dir: Path) -> float:
    """Wall time of one bare episode of `task` (run, commit, verifier container with pytest,
    removal)."""
    image = build_image(task, log_dir).tag  # built before the passes: a cache lookup here
    toolchain = load_toolchain()
    limits = task.limits
    api = client.api
    tests = Path(tempfile.mkdtemp(prefix="depthtui-floor-tests-"))
    try:
        for name, path in task.segments[0].tests.items():
            (tests / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, tests / name)
        tests.chmod(0o755)
        started = time.monotonic()
        agent = api.create_container(
            image,
            entrypoint=["sleep"],
            command=["infinity"],
            labels=LABELS,
            network_disabled=True,
            host_config=_host_config(api, limits),
        )["Id"]
        snapshot = None
        verifier = None
        try:
            api.start(agent)
            snapshot = api.commit(agent)["Id"]
            argv = toolchain.python_argv(RUNNER, "--plain", "-q", "/tests")
            verifier = api.create_container(
                snapshot,
                entrypoint=[argv[0]],
                command=argv[1:],
                user="1000",
                working_dir=task.workdir,
                labels=LABELS,
                network_disabled=True,
                host_config=_host_config(
                    api, limits, binds=[f"{toolchain.path}:{MOUNT}:ro", f"{tests}:/tests:ro"]
                ),
            )["Id"]
            api.start(verifier)
            api.wait(verifier, timeout=300)
            api.logs(verifier)
        finally:
            for cid in (verifier, agent):
                if cid is not None:
                    api.remove_container(cid, force=True, v=True)
            if snapshot is not None:
                api.remove_image(snapshot, force=True)
        return time.monotonic() - started
    finally:
        shutil.rmtree(tests, ignore_errors=True)


def _host_config(api: Any, limits: Any, binds: list[str] | None = None) -> dict:
    """The limits an episode's containers get (no network), for both of the floor's containers."""
    return api.create_host_config(
        network_mode="none",
        nano_cpus=int(limits.cpus * 1e9),
        mem_limit=f"{limits.memory_mb}m",
        pids_limit=limits.pids,
        init=True,
        binds=binds,
    )
