"""Before the agent: the task's image, its container, the fault and the planted files, the
baseline (in the order of docs/safety.md, through the oracle's steps in engine/oracle/episode.py);
and before each segment its workdir files, setup.sh, healthcheck and, for the oracle agent only,
the reference solution at /solution (docs/tasks.md)."""

from __future__ import annotations

import posixpath
import time

from engine.oracle import episode as oracle_steps
from engine.oracle import faults
from engine.oracle.contract import KINDS, Contract, Permits
from engine.oracle.manifest import ManifestScanner
from engine.protocol.state import EpisodeRun
from engine.sandbox.base import SandboxError
from engine.sandbox.images import build_image
from engine.sandbox.labels import LABEL_EPISODE, LABEL_JOB, LABEL_TASK
from engine.sandbox.start import start_sandbox
from engine.tasks.model import Segment, Task
from store import vocab

SOLUTION_DIR = "/solution"


def setup(run: EpisodeRun) -> None:
    """Image, container, fault, planted files and baseline: run.sandbox and run.oracle."""
    task, spec = run.task, run.spec
    if spec.fault != vocab.NO_FAULT and task.multi_segment:
        raise SandboxError("harness", "faults apply to single-segment tasks only")
    run.event("image")
    with run.phase("image"):
        image = build_image(
            task,
            run.env.log_dir / _slug(task.id),
            labels={LABEL_TASK: task.id},
        )
    run.image_tag = image.tag
    for warning in image.warnings:
        run.event("warning", detail=warning)
    if image.warnings:
        run.rec.update_running(error_detail="; ".join(image.warnings)[:2000])
    run.check_stop()
    run.event("start")
    with run.phase("start"):
        run.sandbox = sandbox = start_sandbox(
            task,
            image.tag,
            labels={
                LABEL_JOB: str(run.env.job_id or ""),
                LABEL_EPISODE: str(run.eid),
            },
            network=spec.network,
        )
    run.rec.update_running(container_id=sandbox.container_id)
    scanner = ManifestScanner.for_sandbox(sandbox)
    permits = permits_for(task, run.contract)

    def injected(plan: faults.FaultPlan) -> None:
        run.state.fault = plan
        run.rec.set_fault_record(**oracle_steps.fault_planned(plan))
        # The episode's own column too, so a query of episodes alone names the target.
        run.rec.update_running(fault_target=plan.target)

    if spec.fault != vocab.NO_FAULT or spec.planted != oracle_steps.NO_PLANTED:
        with run.phase("plant"):
            prepared = oracle_steps.prepare(
                sandbox,
                scanner,
                task.id,
                task.instruction,
                permits,
                family=spec.fault,
                seed=spec.seed(),
                target=run.contract.fault_targets.get(spec.fault) if run.contract else None,
                level=spec.planted,
                on_fault=injected,
            )
        if spec.planted != oracle_steps.NO_PLANTED:
            run.state.planted = [f.path for f in prepared.planted]
    run.event("baseline")
    with run.phase("baseline"):
        run.oracle = oracle_steps.baseline(
            scanner, permits, run.state.fault, run.state.planted or ()
        )
    # Decided by the baseline (an upper folder it cannot read means the full walk).
    run.rec.update_running(oracle_way=scanner.way)


def permits_for(task: Task, contract: Contract | None) -> Permits:
    """What the oracle lets the agent change: the contract's permits, or everything."""
    if contract is not None:
        return contract.permits()
    # No contract yet: everything is permitted, so the oracle shows what changed without
    # judging it (only `validate` freezes what a task may change).
    root = task.home.rstrip("/") or "/"
    return Permits({root: KINDS, root + "/": KINDS})


def prepare_segment(run: EpisodeRun, idx: int) -> None:
    """Segment `idx`'s workdir files, setup.sh and healthcheck, then the reference solution at
    /solution when this agent may see it (the previous segment's goes first)."""
    task, sandbox = run.task, run.sandbox
    assert sandbox is not None
    segment = task.segments[idx]
    owner = "agent"
    if segment.workdir_dir is not None and segment.workdir_dir.is_dir():
        for item in sorted(segment.workdir_dir.iterdir()):
            sandbox.put_path(item, posixpath.join(task.workdir, item.name), owner=owner)
    if segment.setup_script is not None:
        script = posixpath.join(task.workdir, segment.setup_script.name)
        if not (segment.workdir_dir and segment.setup_script.parent == segment.workdir_dir):
            sandbox.put_path(segment.setup_script, script, owner=owner)
        res = sandbox.exec_as(
            str(sandbox.agent_uid),
            ["bash", script],
            timeout=600.0,
            workdir=task.workdir,
        )
        if res.exit_code != 0:
            raise SandboxError(
                "setup",
                f"segment {segment.name}: setup.sh exited {res.exit_code}: "
                f"{res.output.decode('utf-8', 'replace')[-800:]}",
            )
    if segment.healthcheck is not None:
        healthcheck(run, segment)
    if run.solution_uploaded:
        sandbox.exec_root(["rm", "-rf", SOLUTION_DIR])
        run.solution_uploaded = False
    uses_solution = run.spec.agent == "oracle" or run.spec.solution
    if uses_solution and segment.solution_dir is not None:
        sandbox.put_path(segment.solution_dir, SOLUTION_DIR, owner="root", readable=True)
        run.solution_uploaded = True


def healthcheck(run: EpisodeRun, segment: Segment) -> None:
    hc = segment.healthcheck
    assert hc is not None and run.sandbox is not None
    last = b""
    for _ in range(max(hc.retries, 1)):
        res = run.sandbox.exec_as(
            str(run.sandbox.agent_uid),
            ["bash", "-c", hc.command],
            timeout=hc.timeout_sec,
            workdir=run.task.workdir,
        )
        if res.exit_code == 0:
            return
        last = res.output
        time.sleep(hc.interval_sec)
    raise SandboxError(
        "healthcheck",
        f"segment {segment.name}: `{hc.command}` kept failing: "
        f"{last.decode('utf-8', 'replace')[-500:]}",
    )


def _slug(task_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in task_id)
