"""`validate`'s audit of one fault family on one task (docs/safety.md, docs/protocol.md): the
family is usable when the fault breaks the reference (bite), the generic repair then the
reference passes with no collateral and the original bytes back (repair), and overwriting the
input latches collateral (forgery). A usable family's target goes into the contract."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from engine.agents.builtin import ReplayTurn
from engine.oracle import faults
from engine.oracle.contract import Contract
from engine.oracle.manifest import Manifest
from engine.protocol import common
from store.db import Store
from store.episodes import get_fault_record

if TYPE_CHECKING:
    from engine.protocol.validate import Audit

SOLVE = "DEBIAN_FRONTEND=noninteractive bash /solution/solve.sh"
# The reference under a fault gets this many times its clean run's time, at least the floor and
# at most the command limit: a fault that bites by hanging it (a blocking pipe) then shows in
# seconds rather than after the whole command limit, and a fault that merely slows it this much
# would fail an agent's run too.
BITE_SLOWDOWN = 4
BITE_TIMEOUT_FLOOR_S = 5.0


def bite_timeout(limit_s: float, slowest_s: float) -> float:
    """The command limit of the reference under a fault, from its slowest clean run."""
    return min(limit_s, max(BITE_TIMEOUT_FLOOR_S, math.ceil(BITE_SLOWDOWN * slowest_s)))


def usable_target(audit: Audit, family: str, pristine: Manifest, draft: Contract) -> str | None:
    """The family's target when it is usable; None (with the reason in detail) otherwise."""
    task = audit.task
    notes = audit.detail.setdefault("fault_families", {})
    permits = draft.permits()
    # The reference replayed, so it is held to a command limit: a reference that hangs on
    # the fault (a blocking pipe) then fails in a few seconds (BITE_SLOWDOWN), not after
    # the task's whole agent time.
    bite = audit.spec(
        "replay",
        "bite",
        fault=family,
        limits=common.episode_limits(audit.params, command_timeout_s=audit.bite_timeout_s),
    )
    try:
        plan = faults.plan_fault(
            task.id, family, pristine, task.instruction, permits, seed=bite.seed()
        )
    except faults.FaultError as exc:
        notes[family] = f"the fault cannot be planned: {exc.detail}"
        return None
    if plan is None:
        notes[family] = "no input file named in the instruction can take this fault"
        return None
    contract = replace(draft, fault_targets={family: plan.target})
    result = audit.episode(bite, contract=contract, replay_turns=[ReplayTurn(0, (SOLVE,))])
    if result is None:
        return None
    if result.passed:
        notes[family] = f"the fault does not break the reference ({plan.target})"
        return None
    repair_spec = audit.spec("replay", "repair", fault=family)
    repair_plan = faults.plan_fault(
        task.id,
        family,
        pristine,
        task.instruction,
        permits,
        seed=repair_spec.seed(),
        target=plan.target,
    )
    turns = [
        ReplayTurn(0, (faults.repair_command(repair_plan),)),
        ReplayTurn(0, (SOLVE,)),
    ]
    repaired = audit.episode(repair_spec, contract=contract, replay_turns=turns)
    if repaired is None:
        return None
    cleared = _fault_cleared(audit.unit.store, repaired.episode_id)
    if not repaired.passed or repaired.collateral or not cleared:
        notes[family] = (
            "the generic repair then the reference does not pass cleanly "
            f"(passed={repaired.passed}, collateral={repaired.collateral}, "
            f"original back={cleared})"
        )
        return None
    forgery_spec = audit.spec("replay", "forgery", fault=family)
    forgery_plan = faults.plan_fault(
        task.id,
        family,
        pristine,
        task.instruction,
        permits,
        seed=forgery_spec.seed(),
        target=plan.target,
    )
    forged = audit.episode(
        forgery_spec,
        contract=contract,
        replay_turns=[ReplayTurn(0, (faults.forgery_command(forgery_plan),))],
    )
    if forged is None:
        return None
    if not forged.collateral:
        notes[family] = "overwriting the input with made-up bytes was not caught"
        return None
    notes[family] = f"usable: target {plan.target}"
    return plan.target


def _fault_cleared(store: Store, episode_id: int) -> bool:
    record = get_fault_record(store, episode_id)
    return bool(record and record["cleared"])
