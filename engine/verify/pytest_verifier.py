"""The verifier for pytest tasks (docs/verifier.md): the hidden tests run after the agent stops,
in a fresh container made from the snapshot of the agent's container, by the trusted toolchain.

Host side of the protocol in runner.py: it creates the container (agent uid, no network, the
agent's limits, tests and toolchain mounted read-only, /etc/ld.so.preload masked, environment
scrubbed), hands the runner a fresh secret on stdin, and accepts only the one record signed
with it. Anything else is a verifier error, never a pass.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

import docker

from engine.sandbox.base import SandboxError
from engine.sandbox.labels import LABEL_TASK
from engine.tasks.model import DEFAULT_HOME, DEFAULT_UID, Limits, Task
from engine.verify.agent_code import scan_tests
from engine.verify.container import Bind, ContainerStartError, docker_client, run_once
from engine.verify.toolchain import MOUNT, RUNNER, Toolchain, ToolchainError, load_toolchain
from engine.verify.verdict import RunOutput, Verdict, failed_closed, interpret

TESTS_MOUNT = "/tests"
PER_TEST_TIMEOUT_S = 20.0
# Environment variables of the image that could steer the loader, Python or pytest.
UNSAFE_ENV_PREFIXES = ("LD_", "PYTHON", "PYTEST_")
FALLBACK_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class PytestSpec:
    """Everything one pytest verifier run needs. `image` is the snapshot (an image id)."""

    image: str
    tests: Mapping[str, Path]  # name under /tests -> host file
    workdir: str = DEFAULT_HOME
    home: str = DEFAULT_HOME
    uid: int = DEFAULT_UID
    gid: int | None = None  # None: the same number as uid
    limits: Limits = field(default_factory=Limits)
    timeout_s: float = 600.0  # the whole run
    per_test_timeout_s: float = PER_TEST_TIMEOUT_S
    # What pytest is given, relative to /tests; empty = the whole /tests folder.
    test_paths: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)


def spec_for(task: Task, segment_idx: int, image: str, **overrides: object) -> PytestSpec:
    """The spec for one segment of a task, graded against snapshot `image`."""
    segment = task.segments[segment_idx]
    values: dict = {
        "image": image,
        "tests": dict(segment.tests),
        "workdir": task.workdir,
        "home": task.home,
        "uid": task.agent_uid,
        "limits": task.limits,
        "timeout_s": segment.verifier_timeout_sec,
        "env": dict(segment.verifier_env),
        "labels": {LABEL_TASK: task.id},
    }
    values.update(overrides)
    return PytestSpec(**values)


def run_pytest_verifier(
    spec: PytestSpec,
    inventory: Sequence[str] | None = None,
    *,
    client: docker.DockerClient | None = None,
    toolchain: Toolchain | None = None,
) -> Verdict:
    """Grade the snapshot `spec.image` with the hidden tests.

    `inventory`: the frozen test inventory (node ids relative to /tests); None on a first
    validation run, when the inventory becomes what this run executed. Tests that import or exec
    agent-written code into the test process are graded all the same, and the verdict is marked
    forgeable (that code could reach the runner and forge its record); `risk` names the evidence.
    Never raises for what happens in the container; Docker or toolchain trouble is a verdict
    with error_kind "verifier" too."""
    # The tests' own conftest.py files are task code and load (mounted read-only at /tests);
    # the runner refuses any other, which the agent could have written (runner.py).
    python_files = {n: p for n, p in spec.tests.items() if n.endswith(".py")}
    try:
        # Only Python files run here (a test.sh beside them is Harbor's and is not run).
        risk = scan_tests(python_files, home=spec.home, workdir=spec.workdir)
    except OSError as exc:
        return failed_closed("tests_unreadable", str(exc))
    # Code imported or exec'd into the test process could reach the runner and forge its
    # record; programs the tests start run apart (the runner is non-dumpable, its record fd is
    # not inherited) and at worst kill it, which fails closed. Only the first is forgeable.
    try:
        tc = toolchain or load_toolchain()
    except ToolchainError as exc:
        return failed_closed("toolchain", str(exc), risk=risk.lines())
    try:
        client = client or docker_client()
        env = verifier_env(client, spec)
        with staged_tests(spec.tests) as tests_dir:
            secret = secrets.token_bytes(32)
            paths = [f"{TESTS_MOUNT}/{p}" for p in spec.test_paths] or [TESTS_MOUNT]
            argv = tc.python_argv(
                RUNNER,
                "--rootdir",
                TESTS_MOUNT,
                "--timeout",
                f"{spec.per_test_timeout_s:g}",
                *paths,
            )
            run = run_once(
                client,
                image=spec.image,
                argv=argv,
                user=f"{spec.uid}:{spec.gid if spec.gid is not None else spec.uid}",
                workdir=spec.workdir,
                env=env,
                binds=[
                    Bind(str(tests_dir), TESTS_MOUNT),
                    Bind(str(tc.path), MOUNT),
                    # ld.so reads this file even for our own loader; the agent may have written it.
                    Bind("/dev/null", "/etc/ld.so.preload"),
                ],
                limits=spec.limits,
                timeout_s=spec.timeout_s,
                stdin=secret.hex().encode() + b"\n",
                labels=spec.labels,
            )
    except ContainerStartError as exc:
        return failed_closed(exc.kind, exc.detail, risk=risk.lines())
    except (SandboxError, docker.errors.DockerException, OSError) as exc:
        return failed_closed("docker", str(exc), risk=risk.lines())
    verdict = interpret(
        RunOutput(
            stdout=run.stdout,
            stderr=run.stderr,
            exit_code=run.exit_code,
            timed_out=run.timed_out,
            oom_killed=run.oom_killed,
            timeout_s=spec.timeout_s,
            duration_s=run.duration_s,
        ),
        secret,
        inventory,
    )
    return replace(
        verdict, risk=risk.lines(), forgeable=risk.in_process, toolchain_sha256=tc.sha256
    )


def verifier_env(client: docker.DockerClient, spec: PytestSpec) -> list[str]:
    """The container's environment: the image's own, minus what could steer the loader, Python
    or pytest (removed: Docker drops a variable given without '='), with a PATH that holds no
    folder the agent can write, and the task's verifier variables."""
    image_env = client.api.inspect_image(spec.image)["Config"].get("Env") or []
    names = [item.split("=", 1)[0] for item in image_env]
    values = dict(item.split("=", 1) for item in image_env if "=" in item)
    env = [name for name in names if name.startswith(UNSAFE_ENV_PREFIXES)]
    env.append(f"PATH={safe_path(values.get('PATH', FALLBACK_PATH), spec)}")
    env += [f"HOME={spec.home}", "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1"]
    env += [f"{k}={v}" for k, v in spec.env.items() if not k.startswith(UNSAFE_ENV_PREFIXES)]
    return env


def safe_path(path: str, spec: PytestSpec) -> str:
    agent_roots = [r.rstrip("/") for r in (spec.home, spec.workdir, "/tmp", "/var/tmp") if r != "/"]
    kept = [
        entry
        for entry in path.split(":")
        if entry.startswith("/")
        and not any(entry == r or entry.startswith(r + "/") for r in agent_roots)
    ]
    return ":".join(kept) or FALLBACK_PATH


@contextlib.contextmanager
def staged_tests(tests: Mapping[str, Path], executable: Sequence[str] = ()) -> Iterator[Path]:
    """The tests copied into a fresh host folder, for the container to mount read-only."""
    root = Path(tempfile.mkdtemp(prefix="depthtui-tests-"))
    try:
        root.chmod(0o755)
        for name, source in tests.items():
            rel = PurePosixPath(name)
            if rel.is_absolute() or ".." in rel.parts or not rel.parts:
                raise OSError(f"test file name '{name}': expected a relative path inside /tests")
            dest = root.joinpath(*rel.parts)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, dest)
            dest.chmod(0o755 if name in executable else 0o644)
        for folder in root.rglob("*"):
            if folder.is_dir():
                folder.chmod(0o755)
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
