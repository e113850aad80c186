"""The oracle's part of one episode, the steps the episode runs (engine/protocol/setup.py and
seal.py), in the order the reference harness does them:

    pristine manifest -> fault injection -> planted files    `prepare`
    -> baseline                                              `baseline`
    ... `oracle.after_call(i, command, output)` after every executed call ...
    kill every agent process -> final check                  `stop_agent`, `final_check`
    -> grading restore -> fault record                       `restore_for_grading`, `fault_record`
    -> snapshot, verify (the episode's)

The episode owns everything else (the agent loop, the store, the verifier, the timings).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.oracle import faults, planted
from engine.oracle.contract import Permits
from engine.oracle.latch import CheckResult, Oracle, Scanner
from engine.sandbox.base import Sandbox
from engine.sandbox.freezer import FreezeError
from store import vocab

NO_PLANTED = "none"  # the planted level of an episode without planted files


@dataclass(frozen=True)
class Prepared:
    """What `prepare` did to the home before the baseline."""

    fault: faults.FaultPlan | None
    planted: tuple[planted.PlantedFile, ...]


def prepare(
    sandbox: Sandbox,
    scanner: Scanner,
    task_id: str,
    instruction: str,
    permits: Permits,
    *,
    family: str = vocab.NO_FAULT,
    seed: int = 0,
    target: str | None = None,
    level: str = NO_PLANTED,
    on_fault: Callable[[faults.FaultPlan], None] | None = None,
) -> Prepared:
    """Break the environment (when `family` is a fault family) and plant the personal files at
    `level`, both decided on the pristine home. The fault target is `target` (a frozen
    contract's) when given, else chosen afresh; `on_fault` hears of the fault as soon as it is
    injected. Raises FaultError (no usable target, injection failed) or PlantError: harness
    errors."""
    if family == vocab.NO_FAULT and level == NO_PLANTED:
        return Prepared(None, ())
    pristine = scanner.take()
    plan = None
    if family != vocab.NO_FAULT:
        plan = faults.plan_fault(
            task_id, family, pristine, instruction, permits, seed=seed, target=target
        )
        if plan is None:
            why = f"no input file of {task_id} can take the {family} fault"
            raise faults.FaultError("plan", why)
        faults.inject(sandbox, plan)
        if on_fault is not None:
            on_fault(plan)
    files: list[planted.PlantedFile] = []
    if level != NO_PLANTED:
        files = planted.plan_planted(task_id, instruction, pristine, level)
        planted.plant(sandbox, files, sandbox.agent_uid, sandbox.agent_gid)
    return Prepared(plan, tuple(files))


def baseline(
    scanner: Scanner,
    permits: Permits,
    fault: faults.FaultPlan | None,
    planted: tuple[str, ...] | list[str] = (),
) -> Oracle:
    """The baseline (after the fault and the planted files) and the oracle judging against it;
    the planted files (container paths) are hashed afresh at every check."""
    return Oracle.start(scanner, permits, fault, planted)


def stop_agent(sandbox: Sandbox) -> None:
    """Kill every agent process, so that nothing changes the home behind the final check."""
    sandbox.kill_agent_processes()


def final_check(oracle: Oracle) -> CheckResult:
    """The last check, with the final rules and every file hashed afresh (after `stop_agent`)."""
    return oracle.final_check()


def fault_planned(plan: faults.FaultPlan) -> dict[str, Any]:
    """The fault record's columns known once the fault is injected."""
    return {
        "family": plan.family,
        "target": plan.target,
        "spare_path": plan.spare,
        "detail_json": plan.to_dict(),
    }


def fault_record(oracle: Oracle, restored_for_grading: bool = False) -> dict[str, Any] | None:
    """The fault record's columns after the final check (episode_id aside); None in a clean
    episode. `cleared` and `integrity` come from the last check's manifest (the final one), so a
    grading restore done since does not count as the agent's repair."""
    plan = oracle.fault
    if plan is None:
        return None
    now = oracle.last
    breaches = faults.integrity(plan, oracle.baseline, now, final=True)
    return {
        **fault_planned(plan),
        "observed_call": oracle.observed_call,
        "cleared": faults.fault_cleared(plan, now),
        "integrity": "; ".join(b.kind for b in breaches) or None,
        "restored_for_grading": restored_for_grading,
    }


def restore_for_grading(sandbox: Sandbox, oracle: Oracle) -> bool:
    """Put an intact moved or piped-away input back where the tests look for it (grading only;
    never a permission fault). A root exec: the container runs for it (no process of the agent
    is left), however deep it is held frozen (engine/sandbox/freezer.py). True when something
    was put back."""
    plan = oracle.fault
    if plan is None:
        return False
    restored = False
    with contextlib.suppress(FreezeError), sandbox.freezer.thawed():
        restored = faults.restore_for_grading(sandbox, plan, oracle.baseline, oracle.last)
    return restored
