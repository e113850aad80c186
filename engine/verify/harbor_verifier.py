"""The verifier for Harbor tasks (docs/verifier.md): `tests/test.sh` writes the reward.

In a fresh container from the snapshot: the tests at /tests (read-only), test.sh made to run
offline with the trusted pytest (preamble.py), run as `(/tests/test.sh) 2>&1` in the workdir,
its exit code ignored. Its output is read by this process from the container's stream, a head
and a tail kept (stream.py): nothing it prints is written to the host, and past FLOOD_LIMIT the
run is stopped as the agent's failure (`output_flood`). /logs/verifier is a
fresh host folder mounted over whatever the snapshot holds there, so no reward file the agent
left behind counts, and no agent process survives into the run. reward.json wins over
reward.txt; missing, empty or garbage is a verifier error.

Per-test results: every pytest run the rewritten test.sh makes is the trusted toolchain's, whose
collector writes one record per run into a fresh host folder mounted at RESULTS_DIR; they are
graded by the same inventory rule as pytest tasks (docs/verifier-tests.md). A test.sh that runs
no pytest has no per-test results (`per_test` False) and its reward file alone decides.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import docker

from engine.sandbox.base import SandboxError
from engine.sandbox.disk import layer_usage
from engine.sandbox.labels import LABEL_TASK
from engine.tasks.model import DEFAULT_HOME, Limits, Task
from engine.verify.agent_code import RiskReport, scan_python, scan_tests
from engine.verify.agent_env import scan_env
from engine.verify.bounded import BoundedFolders
from engine.verify.container import (
    Bind,
    ContainerStartError,
    RunResult,
    docker_client,
    run_once,
)
from engine.verify.preamble import OfflineError, rewrite_test_sh
from engine.verify.pytest_verifier import TESTS_MOUNT, staged_tests
from engine.verify.rewards import RewardError, Rewards, gate_decision, parse_rewards
from engine.verify.runner import RESULTS_DIR
from engine.verify.services import entrypoint_services, services_gone
from engine.verify.toolchain import MOUNT, Toolchain, ToolchainError, load_toolchain
from engine.verify.verdict import TestResult, grade

LOGS_MOUNT = "/logs/verifier"
# test.sh's output goes to the container's stdout, which this process reads and bounds
# (engine/verify/stream.py), never to a file on the host: what it prints can be the agent's.
COMMAND = f"({TESTS_MOUNT}/test.sh) 2>&1"
# Past this much output, or this much in the host folders the run writes (/logs/verifier and
# the per-test records), the run is stopped: the agent's failure (`output_flood`), since only
# what the agent left makes a task's test.sh print or write that much.
FLOOD_LIMIT = 256 * 1024 * 1024
FLOOD_OBJECTS = 100_000
READ_LIMIT = 1024 * 1024
# Records beyond this many pytest runs in one test.sh are ignored (and said so).
MAX_RECORDS = 50
OUTPUT_TAIL = 4000
# test.sh runs in the working directory, which is the agent's: `python3 -c CODE`, `python3 -`
# and `python3 -m MODULE` put the current folder first on sys.path, so a module the agent left
# there under a standard library name (/app/json.py) would run as the verifier's user, unseen
# by the scan for agent code, and could print what the check wants or write the reward. Python
# 3.11 and later put no such folder on sys.path with this set (older ones ignore it: not
# covered). A task whose checks import from the working folder on purpose runs agent code; its
# [verifier] env can set PYTHONSAFEPATH="" to have it back (docs/verifier.md).
SAFE_ENV = ("PYTHONSAFEPATH=1",)


@dataclass(frozen=True)
class HarborSpec:
    image: str  # the snapshot
    tests: Mapping[str, Path]  # name under /tests -> host file; must hold test.sh
    workdir: str = DEFAULT_HOME
    home: str = DEFAULT_HOME
    user: str = "root"  # the task's [verifier] user
    limits: Limits = field(default_factory=Limits)
    timeout_s: float = 600.0
    env: Mapping[str, str] = field(default_factory=dict)
    min_reward: float | Mapping[str, float] | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    # The task's own image (built before the agent ran): what test.sh's apt packages are
    # checked in. None: `image` (a library caller grading an image it trusts).
    task_image: str | None = None
    # The task's [environment] env: what its ENTRYPOINT's services start with (services.py).
    services_env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class HarborVerdict:
    rewards: Rewards
    passed: bool  # the min_reward gate (never True on an error)
    error_kind: str | None = None  # "verifier" whenever set
    error_code: str | None = None
    error_detail: str | None = None
    output: str = ""  # tail of test.sh's output (stdout and stderr)
    changes: tuple[str, ...] = ()  # what the offline rewrite of test.sh changed
    risk: tuple[str, ...] = ()  # agent code the tests run (file:line: what)
    exit_code: int | None = None  # test.sh's; recorded, never used to grade
    toolchain_sha256: str = ""
    duration_s: float = 0.0
    # Per-test results of the pytest runs test.sh made (the inventory rule applied); per_test
    # is False when test.sh runs no pytest, and then the counts mean nothing.
    per_test: bool = False
    results: tuple[TestResult, ...] = ()
    tests_passed: int = 0
    tests_total: int = 0
    inventory: tuple[str, ...] = ()
    # Which reward key decided the gate, in words ("" on an error).
    gate: str = ""

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    @property
    def forgeable(self) -> bool:
        """Agent code ran where it could write the reward: the verdict is Harbor's, graded as
        Harbor grades it, but the agent could have forged it."""
        return bool(self.risk)


def spec_for(task: Task, segment_idx: int, image: str, **overrides: object) -> HarborSpec:
    segment = task.segments[segment_idx]
    values: dict = {
        "image": image,
        "tests": dict(segment.tests),
        "workdir": task.workdir,
        "home": task.home,
        "limits": task.limits,
        "timeout_s": segment.verifier_timeout_sec,
        "env": dict(segment.verifier_env),
        "min_reward": segment.min_reward,
        "labels": {LABEL_TASK: task.id},
        "services_env": dict(task.environment.env),
    }
    values.update(overrides)
    return HarborSpec(**values)


def runs_pytest(tests: Mapping[str, Path]) -> bool:
    """Whether the task's test.sh, made to run offline, runs the trusted pytest (and so gives
    per-test results)."""
    try:
        return rewrite_test_sh(Path(tests["test.sh"]).read_text(errors="replace")).runs_pytest
    except (KeyError, OfflineError, OSError):
        return False


def graded_tests(tests: Mapping[str, Path]) -> dict[str, Path | bytes]:
    """The test files as the verifier runs them: test.sh after its offline rewrite, so a scan
    for agent-written code does not count the network preamble the verifier drops. A test.sh
    that cannot run offline is given as written (the verifier refuses it anyway)."""
    files: dict[str, Path | bytes] = dict(tests)
    if "test.sh" in tests:
        try:
            original = Path(tests["test.sh"]).read_text(errors="replace")
            files["test.sh"] = rewrite_test_sh(original).script.encode()
        except (OfflineError, OSError):
            pass
    return files


def _error(code: str, detail: str, **extra: object) -> HarborVerdict:
    return HarborVerdict(
        rewards={},
        passed=False,
        error_kind="verifier",
        error_code=code,
        error_detail=f"{code}: {detail}",
        **extra,  # type: ignore[arg-type]
    )


def run_harbor_verifier(
    spec: HarborSpec,
    inventory: Sequence[str] | None = None,
    *,
    client: docker.DockerClient | None = None,
    toolchain: Toolchain | None = None,
) -> HarborVerdict:
    """Run the task's test.sh against snapshot `spec.image` and read its reward. Never raises
    for what happens in the container; every failure is a verdict with error_kind "verifier".
    Tests that run agent-written code are graded as Harbor grades them, and the verdict says
    it is forgeable (`risk` holds the evidence). `inventory`: the frozen test inventory (node
    ids relative to /tests) that the per-test results are graded against; None on a first run,
    when it is what pytest executed."""
    if "test.sh" not in spec.tests:
        return _error("no_test_sh", "the task has no tests/test.sh")
    try:
        original = Path(spec.tests["test.sh"]).read_text(errors="replace")
        rewrite = rewrite_test_sh(original)
        sources = {n: Path(p).read_bytes() for n, p in spec.tests.items() if n.endswith(".py")}
    except OfflineError as exc:
        return _error("needs_network", str(exc))
    except OSError as exc:
        return _error("tests_unreadable", str(exc))
    changes = rewrite.changes
    if rewrite.runs_pytest:
        missing = _missing_modules(sources)
        if missing:
            return _error(
                "missing_module",
                f"the tests import {', '.join(missing)}, which the trusted pytest lacks and the "
                "verifier cannot download",
                changes=changes,
            )
    risk = _risk({**sources, "test.sh": rewrite.script.encode()}, spec)
    try:
        tc = toolchain or load_toolchain()
    except ToolchainError as exc:
        return _error("toolchain", str(exc), changes=changes, risk=risk.lines())

    # One byte past FLOOD_LIMIT fits, so the poll still sees the run went past it.
    written = BoundedFolders.make(size=FLOOD_LIMIT + (1 << 20), inodes=FLOOD_OBJECTS + 64)
    logs, results = written.folder("logs"), written.folder("results")
    script_dir = Path(tempfile.mkdtemp(prefix="depthtui-testsh-"))
    try:
        script = script_dir / "test.sh"
        script.write_text(rewrite.script)
        tests = {**spec.tests, "test.sh": script}
        client = client or docker_client()
        if rewrite.apt_packages:
            missing_apt = _missing_apt(client, spec, rewrite.apt_packages)
            if missing_apt:
                return _error("needs_network", missing_apt, changes=changes, risk=risk.lines())
        image_env = client.api.inspect_image(spec.image)["Config"].get("Env") or []
        env = [*image_env, *SAFE_ENV, *(f"{k}={v}" for k, v in spec.env.items())]
        # A search path into the agent's folders runs its code unseen by the test files' scan.
        env_risk = scan_env(env, home=spec.home, workdir=spec.workdir)
        risk = RiskReport(risk.evidence + tuple(env_risk))
        with (
            staged_tests(tests, executable=["test.sh"]) as tests_dir,
            entrypoint_services(
                client,
                spec.task_image,
                env=spec.services_env,
                limits=spec.limits,
                labels=spec.labels,
            ) as network_mode,
        ):
            run = _run_beside(
                client,
                image=spec.image,
                argv=["/bin/bash", "-c", COMMAND],
                user=spec.user,
                workdir=spec.workdir,
                env=env,
                binds=[
                    Bind(str(tests_dir), TESTS_MOUNT),
                    Bind(str(tc.path), MOUNT),
                    Bind(str(logs), LOGS_MOUNT, read_only=False),
                    Bind(str(results), RESULTS_DIR, read_only=False),
                    Bind("/dev/null", "/etc/ld.so.preload"),
                ],
                limits=spec.limits,
                timeout_s=spec.timeout_s,
                labels=spec.labels,
                drop_all_caps=False,
                # Beside what the task image's ENTRYPOINT started, when it has one.
                network_mode=network_mode,
                output_limit=FLOOD_LIMIT,
                watch=lambda: _written_past(FLOOD_LIMIT, logs, results),
            )
        verdict = _judge(spec, run, logs, changes, risk, tc)
        if not rewrite.runs_pytest:
            return verdict
        return _with_tests(verdict, _read_records(results), inventory)
    except ContainerStartError as exc:
        return _error(exc.kind, exc.detail, changes=changes, risk=risk.lines())
    except (SandboxError, docker.errors.DockerException, OSError) as exc:
        return _error("docker", str(exc), changes=changes, risk=risk.lines())
    finally:
        written.remove()
        shutil.rmtree(script_dir, ignore_errors=True)


def _run_beside(client: docker.DockerClient, **kw: Any) -> RunResult:
    """run_once beside the services container (kw["network_mode"]): a container that does not
    start because that one stopped meanwhile is the services' trouble (infrastructure), never
    the snapshot's (container_start, which the episode may blame on the agent)."""
    try:
        return run_once(client, **kw)
    except ContainerStartError as exc:
        gone = services_gone(client, kw["network_mode"])
        if gone:
            raise SandboxError("verifier", f"{gone}; {exc.detail}") from exc
        raise


def _read_records(folder: Path) -> list[dict]:
    """The runner's per-test records, in the order the pytest runs ended; a file that is not a
    regular file or not a JSON object is skipped."""
    records: list[dict] = []
    for path in sorted(folder.glob("[0-9]*.json"))[:MAX_RECORDS]:
        try:
            record = json.loads(_read_regular(path) or b"")
        except (RewardError, ValueError):
            continue
        if isinstance(record, dict) and isinstance(record.get("tests"), list):
            records.append(record)
    return records


def merge_records(records: Sequence[dict]) -> dict:
    """One record for all the pytest runs of a test.sh: each test's phases from the last run
    that reported it."""
    tests: dict[str, dict] = {}
    collect_errors: list = []
    for record in records:
        collect_errors += record.get("collect_errors") or []
        for entry in record["tests"]:
            if isinstance(entry, dict) and isinstance(entry.get("nodeid"), str):
                tests[entry["nodeid"]] = entry
    return {"tests": list(tests.values()), "collect_errors": collect_errors}


def _with_tests(
    verdict: HarborVerdict, records: Sequence[dict], inventory: Sequence[str] | None
) -> HarborVerdict:
    """The verdict with the per-test results of test.sh's pytest runs. With no test result at
    all (pytest never started: test.sh stopped before it; or it collected nothing) a failing
    reward stands alone, and a passing one is a verifier error: a pass no test stands behind."""
    results, passed, total, inv = grade(merge_records(records), inventory)
    if total == 0:
        if not verdict.ok or not verdict.passed:
            return verdict
        why = "no pytest run left a record" if not records else "pytest ran no test"
        # The agent's state can cause this (a test.sh that reads what the agent left): the
        # episode runs the tests without the agent to tell whose it is (verify/outcome.py).
        failed = _error("no_test_record", f"test.sh runs pytest, yet {why}")
        return replace(failed, **{k: getattr(verdict, k) for k in _KEPT})
    return replace(
        verdict,
        per_test=True,
        results=results,
        tests_passed=passed,
        tests_total=total,
        inventory=inv,
    )


# What an error verdict made after the run keeps of the run's own verdict.
_KEPT = (
    "output",
    "changes",
    "risk",
    "exit_code",
    "toolchain_sha256",
    "duration_s",
)


def _judge(
    spec: HarborSpec,
    run: RunResult,
    logs: Path,
    changes: tuple[str, ...],
    risk: RiskReport,
    tc: Toolchain,
) -> HarborVerdict:
    text = run.stdout.decode("utf-8", "replace")
    size = run.output_bytes or len(run.stdout)
    tail = text if len(text) <= OUTPUT_TAIL else f"[... {size} bytes in all]" + text[-OUTPUT_TAIL:]
    common = {
        "output": tail,
        "changes": changes,
        "risk": risk.lines(),
        "exit_code": run.exit_code,
        "toolchain_sha256": tc.sha256,
        "duration_s": run.duration_s,
    }
    if run.flooded:
        why = (
            f"test.sh was stopped: {run.flooded} (it prints or copies what the agent left: a "
            "link to /dev/zero, a huge file)"
        )
        return _error("output_flood", why, **common)
    if run.timed_out:
        return _error("timeout", f"test.sh ran past {spec.timeout_s:g} s and was killed", **common)
    if run.oom_killed:
        return _error("out_of_memory", "test.sh was killed for memory", **common)
    try:
        rewards = parse_rewards(
            _read_regular(logs / "reward.json"), _read_regular(logs / "reward.txt")
        )
    except RewardError as exc:
        return _error("no_reward", str(exc), **common)
    passed, gate = gate_decision(rewards, spec.min_reward)
    # The decision is said where the verifier's output is kept, after what test.sh printed.
    common["output"] = f"{tail}\n[depthtui] {'passed' if passed else 'failed'}: {gate}".lstrip("\n")
    return HarborVerdict(rewards=rewards, passed=passed, gate=gate, **common)


def _written_past(limit: int, *folders: Path) -> str:
    """Why the host folders a verifier run writes into hold too much ("" when they do not):
    more than `limit` bytes (apparent sizes), or more than FLOOD_OBJECTS files and folders."""
    usages = [layer_usage(f, FLOOD_OBJECTS + 1, budget_s=0.2) for f in folders]
    if sum(u.bytes for u in usages) > limit:
        return f"it wrote more than {limit >> 20} MiB into {LOGS_MOUNT} and its records"
    if sum(u.objects for u in usages) > FLOOD_OBJECTS:
        return f"it made more than {FLOOD_OBJECTS} files in {LOGS_MOUNT} and its records"
    return ""


def _missing_apt(client: docker.DockerClient, spec: HarborSpec, packages: Sequence[str]) -> str:
    """Why the task's image lacks apt packages test.sh installs ("" when it has them all).
    Asked of the task's own image, where the agent never ran, by an exit code only: nothing
    the agent can write (test.sh's output, the snapshot) decides that the task needs the
    network (issue 24)."""
    run = run_once(
        client,
        image=spec.task_image or spec.image,
        argv=["dpkg", "-s", *packages],
        user="root",
        workdir="/",
        env=[],
        binds=[],
        limits=spec.limits,
        timeout_s=60.0,
        labels=spec.labels,
    )
    if run.timed_out:
        raise SandboxError("`dpkg -s` on the task's image ran past 60 s")
    if run.exit_code == 0:
        return ""
    return (
        f"apt packages {' '.join(packages)} are not all in the task's image and the verifier "
        "has no network"
    )


def _read_regular(path: Path) -> bytes | None:
    """A file the container wrote, read without following links (a link could point anywhere
    on this host) and only if it is a regular file; None when it does not exist."""
    where = f"{LOGS_MOUNT}/{path.name}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RewardError(f"{where} is not a regular file ({exc.strerror}); refused") from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise RewardError(f"{where} is not a regular file; refused")
        return os.read(fd, READ_LIMIT)
    finally:
        os.close(fd)


def _missing_modules(sources: Mapping[str, bytes]) -> list[str]:
    local = {Path(n).parts[0] if "/" in n else Path(n).stem for n in sources}
    missing: list[str] = []
    for name, data in sources.items():
        for ev in scan_python(name, data.decode("utf-8", "replace"), local_modules=local):
            if ev.kind == "import" and ev.target and ev.target not in missing:
                missing.append(ev.target)
    return missing


def _risk(sources: Mapping[str, bytes], spec: HarborSpec) -> RiskReport:
    """Agent code the tests run. Other imports are judged by _missing_modules instead: under
    the trusted pytest a module outside it cannot load at all, unless the tests put the folder
    holding it on sys.path (then it is the agent's: kind agent_import)."""
    report = scan_tests(sources, home=spec.home, workdir=spec.workdir)
    return RiskReport(tuple(e for e in report.evidence if e.kind != "import"))
