"""Running judges over tasks and episodes: reuse what is stored, keep to --max-cost, store each
judgement with its prompt's hash, its seed and its cost. An endpoint error is an infrastructure
error: stored as such (a rerun asks again), never as findings."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from engine.agents.registry import Registry
from engine.judges import analyze, review
from engine.judges.client import JudgeError, ask, parse_findings, text_hash
from engine.protocol.common import load_unit_task
from engine.tasks.model import TaskError
from store import judgements as jq
from store.db import Store


@dataclass
class Budget:
    """USD spent by this command's judge calls; none starts once `max_cost` is reached."""

    max_cost: float | None = None
    spent: float = 0.0

    def exhausted(self) -> bool:
        return self.max_cost is not None and self.spent >= self.max_cost


def _judge(
    store: Store,
    registry: Registry,
    judge: str,
    budget: Budget,
    stored: dict[str, Any] | None,
    system: str,
    user: str,
    key: str,
    check: Callable[[list[dict[str, Any]]], Any],
    put: Callable[..., None],
) -> dict[str, Any]:
    if stored is not None and stored["status"] == jq.DONE:
        return {**stored, "reused": True}
    if budget.exhausted():
        return {"status": "skipped", "error": f"--max-cost {budget.max_cost} reached"}
    config = registry.get(judge)
    row: dict[str, Any] = {
        "judge": judge,
        "model_id": config.model,
        "prompt_hash": text_hash(system),
    }
    try:
        reply = ask(config, system, user, key)
    except JudgeError as exc:
        row.update(status=exc.kind, error=str(exc)[:2000], findings=[], dropped=[], reply="")
        put(**row)
        return {**row, "reused": False}
    budget.spent += reply.cost_usd
    findings, unparsed = parse_findings(reply.text)
    checked = check(findings)
    dropped = list(checked.dropped)
    if unparsed:
        dropped.append({"dropped": unparsed})
    row.update(
        status=jq.DONE,
        error=None,
        seed=reply.seed,
        findings=checked.kept,
        dropped=dropped,
        reply=reply.text[:20000],
        cost_usd=reply.cost_usd,
    )
    put(**row)
    return {**row, "reused": False}


def review_tasks(
    store: Store, registry: Registry, judge: str, task_ids: list[str], budget: Budget
) -> list[dict[str, Any]]:
    """One review per task (reused when this judge already reviewed this task version with
    this prompt)."""
    system = review.prompt_text()
    out = []
    for task_id in task_ids:
        try:
            task = load_unit_task(store, task_id)
        except TaskError as exc:
            out.append({"task": task_id, "status": "error", "error": str(exc)})
            continue
        files = review.task_files(task)
        stored = jq.get_review(store, task.id, task.content_hash, judge, text_hash(system))

        put = partial(jq.put_review, store, task_id=task.id, task_hash=task.content_hash)
        check = partial(_check_review, files=files)
        got = _judge(
            store, registry, judge, budget, stored, system, review.render(files),
            f"review|{task.id}|{task.content_hash}", check, put,
        )  # fmt: skip
        out.append({"task": task.id, **_public(got)})
    return out


def analyze_episodes(
    store: Store, registry: Registry, judge: str, episode_ids: list[int], budget: Budget
) -> list[dict[str, Any]]:
    """One reward-hacking analysis per episode (reused likewise)."""
    system = analyze.prompt_text()
    out = []
    for eid in episode_ids:
        transcript = analyze.transcript(store.conn, eid)
        if transcript is None:
            out.append({"episode": eid, "status": "error", "error": f"there is no episode {eid}"})
            continue
        stored = jq.get_analysis(store, eid, judge, text_hash(system))

        put = partial(jq.put_analysis, store, episode_id=eid)
        check = partial(_check_analysis, tr=transcript)
        got = _judge(
            store, registry, judge, budget, stored, system, transcript.text,
            f"analyze|{eid}", check, put,
        )  # fmt: skip
        out.append({"episode": eid, "task": transcript.task_id, **_public(got)})
    return out


def _check_review(findings: list[dict[str, Any]], files: dict[str, list[str]]) -> Any:
    return review.check(findings, files)


def _check_analysis(findings: list[dict[str, Any]], tr: analyze.Transcript) -> Any:
    return analyze.check(findings, tr)


def _public(row: dict[str, Any]) -> dict[str, Any]:
    keep = ("judge", "model_id", "status", "error", "findings", "dropped", "cost_usd", "seed")
    return {
        **{k: row.get(k) for k in keep},
        "prompt_hash": (row.get("prompt_hash") or "")[:12],
        "reused": bool(row.get("reused")),
    }
