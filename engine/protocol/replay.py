"""`replay`: re-execute a stored episode's commands, turn by turn, in a fresh environment, and
grade the result again — so a verdict met in triage can be reproduced (or shown not to be).

The replay keeps the original's stated cap, budget, prompt, fault family, planted files and
limits; the commands come from the store, not from a model. Its episode records `replay_of`, and
the triage queue of suspected verifier false positives lists a replay whose verdict disagrees.
"""

from __future__ import annotations

import json
from typing import Any

from engine.agents.builtin import replay_turns
from engine.agents.loop import EpisodeLimits
from engine.oracle.contract import Contract
from engine.protocol import common
from engine.protocol.kinds import JobKind, UnitContext, UnitResult
from engine.protocol.spec import EpisodeSpec
from engine.tasks.model import TaskError
from store import episodes as ep
from store import protocol as sp
from store import vocab


def episode_units(store: Any, params: dict[str, Any]) -> list[str]:
    ids = params.get("episodes")
    if not ids:
        raise common.ParamError("episodes: name at least one episode to replay")
    return [str(i) for i in ids]


def run_unit(unit: UnitContext, episode: str) -> UnitResult:
    original = ep.get_episode(unit.store, int(episode))
    if original is None:
        return UnitResult(episode, False, error=f"no episode {episode} in the store")
    if original["status"] != "done":
        return UnitResult(episode, False, error=f"episode {episode} is {original['status']}")
    try:
        task = common.load_unit_task(unit.store, original["task_id"])
    except TaskError as exc:
        return UnitResult(episode, False, error=str(exc))
    stored = json.loads(original["spec_json"] or "{}").get("spec", {})
    limits = EpisodeLimits(**stored["limits"]) if stored.get("limits") else EpisodeLimits()
    spec = EpisodeSpec(
        task_id=task.id,
        task_hash=task.content_hash,
        mode="replay",
        agent="replay",
        cap=original["cap"],
        budget=original["budget"],
        prompt=original["prompt_name"] or "general",
        fault=original["fault_family"],
        planted=stored.get("planted", "none"),
        limits=limits,
        accept_risk=bool(unit.params.get("accept_risk")),
        replay_of=original["id"],
        solution=original["agent"] == "oracle" or bool(stored.get("solution")),
    )
    turns = replay_turns(
        ep.list_turns(unit.store, original["id"]), ep.list_calls(unit.store, original["id"])
    )
    stored = sp.get_contract(unit.store, task.id) if original["mode"] == "episodes" else None
    contract = Contract.from_dict(stored, f"the stored contract of {task.id}") if stored else None
    ctx = common.run_context(unit, common.registry_for(unit.params))
    tally = common.Tally()
    result = tally.add(
        common.run_with_retries(ctx, task, spec, contract=contract, replay_turns=turns)
    )
    if result.status != "done":
        return tally.unit(episode, False, {}, "stopped")
    before = [
        c["observation"] for c in ep.list_calls(unit.store, original["id"]) if not c["not_run"]
    ]
    after = [c["observation"] for c in ep.list_calls(unit.store, result.episode_id)]
    summary = {
        "original": original["id"],
        "replay": result.episode_id,
        "original_passed": bool(original["passed"]),
        "replay_passed": result.passed,
        # Both pass or neither does, on a replay that counts (store/vocab.py).
        "agree": vocab.replay_agrees(result.outcome, original["outcome"]) is True,
        "original_outcome": original["outcome"],
        "replay_outcome": result.outcome,
        "same_outputs": sum(a == b for a, b in zip(before, after, strict=False)),
        "commands": len(before),
        "task_changed": task.content_hash != original["task_hash"],
        "error": result.error_kind,
    }
    ok = result.outcome != vocab.INFRA_ERROR
    return tally.unit(episode, ok, summary, result.error_detail or "")


KIND = JobKind("replay", episode_units, run_unit)
