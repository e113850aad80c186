"""`ladder` and `audit`: the DEPTH protocol (docs/protocol.md) run for real, one task per unit.

The decisions are `ladder.evaluate`'s; this module only runs the run it asks for, feeds the
outcome back, and writes the estimates after every step, so a report mid-way shows where each
task stands and a rerun resumes (every completed run is reused by its run key).

`audit` is the same protocol for single-instruction tasks grouped by dataset, with a 30-minute
limit per task. With `fault`, the ladder runs under that fault family (recovery depth): its
estimates are stored under "<protocol>+<fault>" and reported as the turns the fault adds. With
`search` other than the protocol's, they are stored under "<protocol>/<search>": another
estimator, never mixed with the protocol's.

Each write replaces the task's estimates under that estimator: a rerun with another model list
leaves no estimate of a model that is no longer measured (the runs themselves stay stored and
are reused if the model comes back).
"""

from __future__ import annotations

from typing import Any

from engine.oracle.contract import Contract
from engine.protocol import common
from engine.protocol.free import measurement_limits
from engine.protocol.kinds import JobKind, UnitContext, UnitResult
from engine.protocol.ladder import (
    CAPS,
    DEFAULT_SEARCH,
    SEARCHES,
    Estimator,
    LadderState,
    Run,
    RunVerdict,
    evaluate,
    format_depth,
)
from engine.protocol.spec import EpisodeSpec
from engine.tasks.model import TaskError
from store import protocol as sp
from store import vocab

SUMMARY_MODEL = ""


def protocol_name(kind: str, fault: str | None, search: str = DEFAULT_SEARCH) -> str:
    return Estimator(kind, fault or vocab.NO_FAULT, search).name


def _run_unit(kind: str, unit: UnitContext, task_id: str) -> UnitResult:
    params = unit.params
    models = list(params.get("models") or [])
    if not models:
        return UnitResult(task_id, False, error=f"{kind}: name at least one --model")
    caps = tuple(sorted(params.get("caps") or CAPS))
    fault = params.get("fault") or vocab.NO_FAULT
    if fault != vocab.NO_FAULT and fault not in vocab.FAULT_FAMILIES:
        return UnitResult(task_id, False, error=f"{kind}: unknown fault family '{fault}'")
    search = params.get("search") or DEFAULT_SEARCH
    if search not in SEARCHES:
        return UnitResult(task_id, False, error=f"{kind}: unknown search '{search}'")
    try:
        task = common.load_unit_task(unit.store, task_id)
    except TaskError as exc:
        return UnitResult(task_id, False, error=str(exc))
    if kind == "audit" and task.multi_segment:
        return UnitResult(
            task_id,
            False,
            error=f"{task_id} has {len(task.segments)} segments: audit measures "
            "single-instruction tasks (use `ladder`)",
        )
    contract = None
    if fault != vocab.NO_FAULT:
        stored = sp.get_contract(unit.store, task_id)
        if stored is None or fault not in (stored.get("fault_targets") or {}):
            return UnitResult(
                task_id,
                False,
                error=f"{task_id}: no validated {fault} target; run `depthtui validate` first",
            )
        contract = Contract.from_dict(stored, f"the stored contract of {task_id}")
    ctx = common.run_context(unit, common.registry_for(params))
    limits = common.episode_limits(params, **measurement_limits(params))
    protocol = protocol_name(kind, fault, search)
    outcomes: dict[Run, RunVerdict] = {}
    episodes: dict[str, int] = {}
    tally = common.Tally()
    while True:
        state = evaluate(models, outcomes, caps, search)
        _write_estimates(unit, task, protocol, models, state, episodes)
        if state.finished:
            break
        if unit.should_stop():
            return tally.unit(task_id, False, _summary(state), "stopped")
        run = state.next
        spec = EpisodeSpec(
            task_id=task.id,
            task_hash=task.content_hash,
            mode=kind,
            agent=run.model,
            cap=run.cap,
            attempt=run.attempt,
            prompt=params.get("prompt") or "general",
            fault=fault,
            planted="full" if fault != vocab.NO_FAULT else "none",
            limits=limits,
            accept_risk=bool(params.get("accept_risk")),
        )
        result = tally.add(
            common.run_with_retries(
                ctx, task, spec, contract=contract, retry_errors=bool(params.get("retry_errors"))
            )
        )
        if result.status != "done":
            return tally.unit(task_id, False, _summary(state), "stopped")
        episodes[f"{run.model}|{run.cap}|{run.attempt}"] = result.episode_id
        if not vocab.in_rates(result.outcome):
            # Infrastructure after its retries, or a broken task: no model outcome to count.
            after = "after retries" if result.outcome == vocab.INFRA_ERROR else "(task broken)"
            return tally.unit(
                task_id,
                False,
                _summary(state),
                f"{spec.label}: {result.error_kind} error {after}: {result.error_detail}",
            )
        # An agent error is the model failing this run (docs/outcomes.md).
        outcomes[run] = RunVerdict(passed=vocab.passed(result.outcome), turns=result.turns)
    return tally.unit(task_id, True, _summary(state))


def _summary(state: LadderState) -> dict[str, Any]:
    return {
        "finished": state.finished,
        "solved": state.solved,
        "N": state.n_turns,
        "D": state.depth,
        "D_display": format_depth(state.depth),
        "estimates": {m.model: m.estimate for m in state.per_model},
    }


def _write_estimates(
    unit: UnitContext,
    task: Any,
    protocol: str,
    models: list[str],
    state: LadderState,
    episodes: dict[str, int],
) -> None:
    summary = sp.EstimateRow(
        SUMMARY_MODEL,
        n_turns=state.n_turns,
        estimate=state.depth,
        detail={
            "solved": state.solved,
            "models": models,
            "next": None if state.next is None else vars(state.next),
            "episodes": episodes,
        },
    )
    per_model = [
        sp.EstimateRow(
            m.model,
            n_turns=state.n_turns if m.model == models[0] else None,
            estimate=m.estimate,
            detail={"tried": list(m.tried)},
        )
        for m in state.per_model
    ]
    sp.replace_estimates(
        unit.store, task.id, task.content_hash, protocol, [summary, *per_model], state.finished
    )


def _make(kind: str) -> JobKind:
    return JobKind(
        kind,
        common.task_units,
        lambda unit, task_id: _run_unit(kind, unit, task_id),
    )


KINDS = {"ladder": _make("ladder"), "audit": _make("audit")}
