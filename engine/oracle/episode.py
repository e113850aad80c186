"""The oracle's part of one episode, in the order the reference harness does it:

    pristine manifest -> fault injection -> planted files -> baseline
    ... one `oracle.after_call(i, command, output)` after every executed call ...
    kill every agent process -> final check -> fault row -> grading restore -> snapshot, verify

`prepare` does the first line; `finish` the kill and the final check. The episode runner owns
everything else (the agent loop, the store, the verifier).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from engine.oracle import faults, planted
from engine.oracle.contract import Contract, Permits
from engine.oracle.latch import CheckResult, Oracle
from engine.oracle.manifest import Manifest, ManifestScanner


class _EpisodeSandbox(Protocol):
    @property
    def container_id(self) -> str: ...

    @property
    def home(self) -> str: ...

    def rootfs(self): ...

    def exec_root(self, argv: list[str], stdin: bytes | None = None, timeout: float = 60.0): ...

    def kill_agent_processes(self): ...


@dataclass(frozen=True)
class Prepared:
    oracle: Oracle
    pristine: Manifest
    fault: faults.FaultPlan | None
    planted: tuple[planted.PlantedFile, ...]


def prepare(
    sandbox: _EpisodeSandbox,
    task_id: str,
    instruction: str,
    contract: Contract | None = None,
    family: str | None = None,
    seed: int = 0,
    level: str | None = None,
) -> Prepared:
    """Break the environment (when `family` is a fault family), plant the personal files, and
    take the baseline. The fault target is the contract's frozen one when it has one for
    `family`, else chosen afresh. `level` defaults to the contract's fixture level. Raises
    FaultError (no usable target, injection failed), PlantError or ManifestError: all harness
    errors."""
    permits = contract.permits() if contract else Permits()
    scanner = ManifestScanner.for_sandbox(sandbox)
    pristine = scanner.take(fresh=True)
    plan = None
    if family and family != "clean":
        target = contract.fault_targets.get(family) if contract else None
        plan = faults.plan_fault(task_id, family, pristine, instruction, permits, seed, target)
        if plan is None:
            raise faults.FaultError("plan", f"{family}: the instruction names no fault target")
        faults.inject(sandbox, plan)
    home = pristine.entries["."]
    files = planted.plan_planted(
        task_id, instruction, pristine, level or (contract.fixture_level if contract else "full")
    )
    planted.plant(sandbox, files, home.uid, home.gid)
    oracle = Oracle.start(scanner, permits, plan)
    return Prepared(oracle, pristine, plan, tuple(files))


def finish(sandbox: _EpisodeSandbox, oracle: Oracle) -> CheckResult:
    """Kill every agent process (nothing may change the home behind the check), then the final
    check with the final rules."""
    sandbox.kill_agent_processes()
    return oracle.final_check()
