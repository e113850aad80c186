"""One episode, start to finish, as the job kinds ask for it: `run_episode` claims the run in
the store (or reuses a finished one), hands its body to an executor (engine/protocol/execute.py)
and stores the outcome; `execute_episode` is the body where it runs.

The body's steps, each in its module: setup.py (image, container, then per docs/safety.md the
fault, the planted files and the baseline; each segment's files, setup.sh, healthcheck and
/solution for the oracle agent only), segments.py (the agent loop per segment with the safety
oracle after every call, the run stopping at the first failed segment), seal.py (after the last
segment every agent process killed, the final check with the final rules, an intact moved or
piped-away input put back for grading only, the snapshot) with grading in a fresh container
(engine/verify/grade.py), and finish.py (the outcome columns, by engine/verify/outcome.py).

Trouble ends the episode with error_kind/error_detail set and an explicit outcome
(store/vocab.py, docs/outcomes.md): infrastructure (Docker, the model endpoint, our bugs) is never
the model's failure; what the agent's state caused (the verifier timing out or running out of
memory on it, ...) is; a task whose own files fail is task broken. Never an exception out of
here. A cancel or pause interrupts the episode: it is marked interrupted, its container goes,
and a later run does it again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.agents.base import Agent
from engine.agents.builtin import ReplayTurn
from engine.agents.make import make_agent
from engine.agents.prompts import load_prompt
from engine.agents.registry import Registry, RegistryError, for_run
from engine.oracle.contract import Contract
from engine.protocol.execute import (
    EpisodeBody,
    EpisodeEnv,
    EpisodeWork,
    Executor,
    Recorder,
    StoreRecorder,
)
from engine.protocol.finish import CREATED, error_fields
from engine.protocol.kinds import ProgressEvent
from engine.protocol.segments import run_body, teardown
from engine.protocol.spec import EpisodeSpec
from engine.protocol.state import AfterAgent, EpisodeRun, EpisodeState
from engine.sandbox import build_proxy
from engine.tasks.model import Task
from store import episodes as ep
from store import queue, vocab
from store.db import Store

# The episode's public names, for the job kinds (validate's probe gets the sandbox, the oracle
# and the state; CREATED marks new paths in final_changes).
__all__ = [
    "CREATED",
    "LOCAL",
    "AfterAgent",
    "EpisodeResult",
    "EpisodeState",
    "LocalExecutor",
    "RunContext",
    "execute_episode",
    "run_episode",
]

BUSY_POLL_S = 2.0
BUSY_WAIT_S = 3600.0
MAX_REQUEUES = 3  # runs of one episode lost with their executor's node before giving up


@dataclass
class RunContext:
    """What the runner needs from whoever runs it (a unit of a job)."""

    store: Store
    registry: Registry
    owner: str
    job_id: int | None = None
    log_dir: Path = Path("/tmp/depthtui-build-logs")
    should_stop: Callable[[], str | None] = lambda: None
    progress: Callable[[ProgressEvent], None] = lambda event: None
    add_cost: Callable[[float], None] = lambda usd: None
    owner_alive: Callable[[str], bool] | None = None
    # Where episode bodies run (engine/jobs/executor.py); None = in this thread.
    executor: Executor | None = None


@dataclass(frozen=True)
class EpisodeResult:
    """What one episode came to, as the job kinds read it (plain values; `to_json` for where
    it travels as JSON)."""

    episode_id: int
    reused: bool
    status: str  # done | interrupted
    passed: bool
    turns: int
    error_kind: str | None
    error_detail: str | None
    cost_usd: float
    reward: float | None
    collateral: bool
    final_changes: dict[str, list[str]] = field(default_factory=dict)
    inventory: tuple[str, ...] = ()
    agent_s: float = 0.0  # the agent's own time (its commands, the model's replies)
    outcome: str | None = None  # store/vocab.py's OUTCOMES; None while not done
    # The tries of the same run before this one (infrastructure errors), oldest first.
    earlier: tuple[EpisodeResult, ...] = ()
    forgeable: bool = False  # graded on tests that ran agent code where it could forge the grade
    # The graded outputs' final state (engine/verify/outputs.py); None when not recorded.
    graded_outputs: dict[str, dict[str, Any]] | None = None

    @property
    def ok(self) -> bool:
        """Finished with an outcome that is the model's: pass, fail or an agent error."""
        return self.status == "done" and vocab.in_rates(self.outcome)

    def to_json(self) -> dict[str, Any]:
        """The result as plain JSON values (the earlier tries nested)."""
        doc = asdict(self)
        doc["inventory"] = list(self.inventory)
        doc["earlier"] = [e.to_json() for e in self.earlier]
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> EpisodeResult:
        """The result `to_json` wrote."""
        return cls(
            **{
                **doc,
                "inventory": tuple(doc.get("inventory") or ()),
                "earlier": tuple(cls.from_json(e) for e in doc.get("earlier") or ()),
            }
        )

    @classmethod
    def from_row(
        cls, row: dict[str, Any], reused: bool, inventory: Sequence[str] = ()
    ) -> EpisodeResult:
        return cls(
            episode_id=row["id"],
            reused=reused,
            status=row["status"],
            passed=bool(row["passed"]),
            turns=row["turns"],
            error_kind=row["error_kind"],
            error_detail=row["error_detail"],
            cost_usd=row["cost_usd"] or 0.0,
            reward=row["reward"],
            collateral=bool(row["collateral"]),
            final_changes=json.loads(row.get("final_changes_json") or "{}"),
            inventory=tuple(inventory),
            agent_s=float(json.loads(row.get("timings_json") or "{}").get("agent", 0.0)),
            outcome=row.get("outcome"),
            forgeable=bool(row.get("forgeable")),
            graded_outputs=json.loads(row["graded_outputs_json"])
            if row.get("graded_outputs_json")
            else None,
        )


def run_episode(
    ctx: RunContext,
    task: Task,
    spec: EpisodeSpec,
    *,
    contract: Contract | None = None,
    replay_turns: Sequence[ReplayTurn] | None = None,
    after_agent: AfterAgent | None = None,
    requeued: int = 0,
) -> EpisodeResult:
    """Run (or reuse) one episode and return its result. Never raises for infrastructure.
    `contract` is the task's validated contract (what may change, the test inventory, the
    fault targets), None before `validate` froze one. `requeued` counts the earlier runs of it
    lost with their executor's node."""
    model = ctx.registry.get(spec.agent)
    prompt_name, prompt_text = load_prompt(spec.prompt)
    run_key = spec.run_key(model, prompt_text)
    label = spec.label
    fields = {
        "job_id": ctx.job_id,
        "task_id": task.id,
        "task_hash": task.content_hash,
        "mode": spec.mode,
        "agent": spec.agent,
        "model_id": model.model,
        "cap": spec.cap,
        "budget": spec.budget,
        "attempt": spec.attempt,
        "prompt_name": prompt_name,
        "prompt_text": prompt_text,
        "fault_family": spec.fault,
        "seed": spec.seed(),
        "spec_json": json.dumps(
            {
                **spec.key_material(model, prompt_text),
                "run_key": run_key,
                # What the requests carry (the key holds the base seed; docs/attempts.md).
                "request_seed": for_run(model, task.id, spec.cap, spec.attempt).sampling.seed,
                "replay_of": spec.replay_of,
                # Part of the image's identity, not of the run's key: a stored build error
                # under the other setting is not reused (_other_build).
                "build_proxy": build_proxy.enabled(),
            },
            default=str,
        ),
        "segments_total": len(task.segments),
    }
    deadline = time.monotonic() + BUSY_WAIT_S
    while True:
        claim = queue.claim_episode(
            ctx.store, run_key, ctx.owner, fields, owner_alive=ctx.owner_alive
        )
        if claim.state != "busy":
            break
        if time.monotonic() > deadline or ctx.should_stop():
            raise RuntimeError(f"episode {claim.episode_id} is being run by {claim.owner}")
        time.sleep(BUSY_POLL_S)
    row = ep.get_episode(ctx.store, claim.episode_id) if claim.state == "done" else None
    if claim.state == "done" and (_policy_refusal(row) or _other_build(row)):
        claim = _supersede(ctx, claim.episode_id, run_key, fields)
        row = ep.get_episode(ctx.store, claim.episode_id) if claim.state == "done" else None
    if claim.state == "done" and row is not None:
        ctx.progress(ProgressEvent(task.id, "reused", claim.episode_id, label))
        return EpisodeResult.from_row(row, True, _inventory(ctx.store, claim.episode_id))

    state = EpisodeState(claim.episode_id)
    asked = spec  # what names the run (its key), before the limits below are filled in
    ctx.progress(ProgressEvent(task.id, "start", state.episode_id, label, cap=spec.cap))
    # The stated cap and budget are enforced, not only told (the loop reads them from limits).
    limits = spec.limits.with_model(model.max_total_tokens, model.max_completion_tokens)
    if spec.cap is not None:
        limits = replace(limits, turn_cap=spec.cap)
    if spec.budget is not None:
        limits = replace(limits, command_budget=spec.budget)
    spec = replace(spec, limits=limits)
    work = EpisodeWork(
        task, spec, for_run(model, task.id, spec.cap, spec.attempt), prompt_text,
        state.episode_id, ctx.job_id, ctx.log_dir, contract, replay_turns, after_agent,
    )  # fmt: skip
    recorder = StoreRecorder(ctx.store, state.episode_id, ctx.owner)
    executor = ctx.executor or LOCAL
    body = executor.run(work, recorder, ctx.should_stop, ctx.progress)
    outcome_fields = body.outcome
    if body.lost is not None:
        # Lost with its node: interrupted (never the model's failure) and claimed again.
        recorder.interrupt(f"lost by the {executor.name} executor: {body.lost}")
        ctx.progress(ProgressEvent(task.id, "requeued", state.episode_id, label, detail=body.lost))
        if requeued >= MAX_REQUEUES:
            raise RuntimeError(f"episode lost {requeued + 1} times: {body.lost}")
        return run_episode(
            ctx, task, asked, contract=contract, replay_turns=replay_turns,
            after_agent=after_agent, requeued=requeued + 1,
        )  # fmt: skip
    if outcome_fields is None:  # interrupted
        row = ep.get_episode(ctx.store, state.episode_id)
        ctx.add_cost(row["cost_usd"] or 0.0)
        ctx.progress(ProgressEvent(task.id, "interrupted", state.episode_id, label))
        return EpisodeResult.from_row(row, False)
    outcome_fields["timings_json"] = body.timings
    stored = {
        k: json.dumps(v, default=str) if k.endswith("_json") else v
        for k, v in outcome_fields.items()
    }
    queue.complete_episode(ctx.store, state.episode_id, ctx.owner, stored)
    row = ep.get_episode(ctx.store, state.episode_id)
    ctx.add_cost(row["cost_usd"] or 0.0)
    ctx.progress(
        ProgressEvent(
            task.id,
            "error" if row["outcome"] in (vocab.INFRA_ERROR, vocab.TASK_BROKEN) else "done",
            state.episode_id,
            label,
            detail=vocab.label(row["outcome"], row["error_kind"]),
        )
    )
    return EpisodeResult.from_row(row, False, _inventory(ctx.store, state.episode_id))


class LocalExecutor:
    """Runs the episode's body in the calling thread (a worker of the local pool)."""

    name = "local"

    def run(
        self,
        work: EpisodeWork,
        recorder: Recorder,
        should_stop: Callable[[], str | None],
        progress: Callable[[ProgressEvent], None],
    ) -> EpisodeBody:
        return execute_episode(work, recorder, should_stop, progress)


LOCAL = LocalExecutor()


def execute_episode(
    work: EpisodeWork,
    recorder: Recorder,
    should_stop: Callable[[], str | None],
    progress: Callable[[ProgressEvent], None],
    agent: Agent | None = None,
) -> EpisodeBody:
    """The body of a claimed episode, where it runs: sandbox, oracle, agent, verifier. Every
    record goes to `recorder`; the outcome columns come back (None when interrupted). `agent`
    is one the caller drives itself (engine/rl's external agent); else the registry's."""
    env = EpisodeEnv(work.job_id, work.log_dir, should_stop, progress)
    state = EpisodeState(work.episode_id)
    run = EpisodeRun(env, work.task, work.spec, state, work.contract, recorder)
    try:
        try:
            run.agent = agent or make_agent(work.model, task=work.task, replay=work.replay_turns)
        except (RegistryError, ValueError) as exc:
            outcome_fields = error_fields(run, "model_config", str(exc))
        else:
            outcome_fields = run_body(run, work.prompt_text, work.after_agent)
    finally:
        teardown(run)
    return EpisodeBody(outcome_fields, dict(state.timings))


def _inventory(store: Store, episode_id: int) -> tuple[str, ...]:
    return tuple(r["nodeid"] for r in ep.list_test_results(store, episode_id) if r["in_inventory"])


def _policy_refusal(row: dict[str, Any] | None) -> bool:
    """A run stored by an older depthtui that refused to grade tests running agent code: a
    grading policy, not what the agent did, so a rerun grades it rather than reusing it."""
    return bool(
        row
        and row["error_kind"] == "verifier"
        and (row["error_detail"] or "").startswith("agent_code:")
    )


def _other_build(row: dict[str, Any] | None) -> bool:
    """A run that failed to build its image under the other --build-proxy setting: the proxy's
    CA is part of the image, so the image is another one and is built, not the error reused."""
    if not row or row["error_kind"] != "build":
        return False
    stored = json.loads(row["spec_json"] or "{}").get("build_proxy", False)
    return bool(stored) != build_proxy.enabled()


def _supersede(ctx: RunContext, episode_id: int, run_key: str, fields: dict[str, Any]) -> Any:
    # Kept (its turns too) but no longer the run's record, so the run is claimed afresh.
    ep.supersede_episode(ctx.store, episode_id)
    return queue.claim_episode(ctx.store, run_key, ctx.owner, fields, owner_alive=ctx.owner_alive)
