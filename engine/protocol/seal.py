"""The end of a graded segment, in an order that is load-bearing (docs/sandbox.md,
docs/safety.md): after the last segment every agent process is killed from the host, then the
validity audit's probe runs, then, with the container frozen: the final check (with the fault's
record and its grading restore, run thawed under the freezer's lock), the storage and object
limits, and the snapshot (`docker commit` with pause=True, which leaves a frozen container
frozen); then the thaw, and the snapshot is graded in a fresh container."""

from __future__ import annotations

import contextlib
import time
from contextlib import AbstractContextManager

from engine.oracle import episode as oracle_steps
from engine.protocol.state import AfterAgent, EpisodeRun
from engine.sandbox.base import SandboxError
from engine.sandbox.snapshot import SnapshotSlow
from engine.verify import outputs
from engine.verify.grade import Grade, grade_sandbox


def stop_agent(run: EpisodeRun) -> None:
    """Every process of the agent killed from the host (freeze, SIGKILL, thaw: see
    engine/sandbox/freezer.py), so nothing of it runs again in this container."""
    assert run.sandbox is not None
    with run.phase("stop_agent"):
        oracle_steps.stop_agent(run.sandbox)


def frozen(run: EpisodeRun) -> AbstractContextManager[object]:
    """The container frozen (when this host can freeze and read it) while the harness takes
    its last look and the snapshot: defence in depth after the kill, so best effort (a
    container the kernel would not freeze has no process of the agent left anyway)."""
    sandbox = run.sandbox
    assert sandbox is not None
    if not sandbox.host_kill:
        return contextlib.nullcontext()
    return sandbox.freezer.held(best_effort=True)


def seal(run: EpisodeRun, last: bool, after_agent: AfterAgent | None) -> str | Grade:
    """The end of a graded segment. After the last one: the agent stopped from the host and
    the validity audit's probe, then, frozen: the final check. After any segment, frozen:
    the limits and the snapshot (an earlier segment's processes live on into the next, a
    server it started say, but nothing they do after the freeze reaches its grade). The
    snapshot's image id, or the agent's failure when its container is over its storage or
    object limit (never committed: docs/sandbox.md) or its data made the commit run past its
    deadline (engine/sandbox/snapshot.py)."""
    sandbox, oracle = run.sandbox, run.oracle
    assert sandbox is not None and oracle is not None
    if last:
        stop_agent(run)
        if after_agent is not None:
            after_agent(sandbox, oracle, run.state)
    with frozen(run):
        if last:
            final_check(run)
        with run.phase("snapshot"):  # the limits first: over one, nothing is committed
            over = sandbox.over_limits()
            if over is None:
                try:
                    return sandbox.snapshot()
                except SnapshotSlow as exc:
                    if not exc.agents:
                        raise  # the engine's slowness on a small layer: infrastructure
                    over = ("snapshot_timeout", exc.detail)
        kind, reason = over
        run.event("warning", detail=reason)
        # A reward-only test.sh still reads 0 of 1 (no per-test results).
        per_test = run.task.verifier_kind == "pytest"
        return Grade(False, {"reward": 0.0}, 0, 0, [], reason, kind, reason, per_test=per_test)


def final_check(run: EpisodeRun) -> None:
    """The oracle's last check (the agent stopped, the container frozen), then the fault's
    record and its grading restore."""
    sandbox, oracle = run.sandbox, run.oracle
    assert sandbox is not None and oracle is not None
    run.event("final_check")
    with run.phase("final_check"):
        run.final = oracle_steps.final_check(oracle)
    if run.final.events:
        run.rec.add_oracle_events([e.row() for e in run.final.events])
    # The graded outputs as they stand now, before any grading restore: what differential
    # grading compares with the reference's (store/differential.py).
    with run.phase("graded_outputs"):
        try:
            run.graded_outputs = outputs.capture(sandbox, oracle, run.task)
        except (OSError, SandboxError) as exc:  # not recorded: the run is not compared
            run.event("warning", detail=f"graded outputs not recorded: {exc}")
    if run.state.fault is not None:
        restored = oracle_steps.restore_for_grading(sandbox, oracle)
        record = oracle_steps.fault_record(oracle, restored_for_grading=restored)
        assert record is not None
        run.rec.set_fault_record(**record)


def grade(run: EpisodeRun, idx: int, last: bool, image: str) -> Grade:
    """Segment `idx`'s tests on its snapshot `image`; after the last one, the agent's container
    is removed meanwhile."""
    assert run.sandbox is not None
    run.event("verify")
    with run.phase("verify"):
        return grade_sandbox(
            run.sandbox,
            run.task,
            idx,
            run.contract,
            run.env.job_id,
            run.eid,
            meanwhile=(lambda: close_container(run)) if last else None,
            image=image,
            task_image=run.image_tag,
        )


def close_container(run: EpisodeRun) -> None:
    assert run.sandbox is not None
    started = time.monotonic()
    try:
        run.sandbox.close()
    except SandboxError:
        pass  # teardown tries again; gc removes it by its labels otherwise
    # Inside the "verify" phase's time already: kept apart so no phase counts it twice.
    run.state.time("teardown_during_verify", time.monotonic() - started)
