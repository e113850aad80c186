"""TerminalEnv: one task's episode as a trainer sees it (TRL's `environment_factory` contract).

`reset(**row)` starts an episode of the row's task through the one episode path (setup,
segments, seal, finish; engine/protocol/episode.py) in a background thread, driven by the
external agent (engine/rl/agent.py); `bash(command)` is one turn with one call and returns what
the model would have been shown; `get_reward()` sends the closing reply, waits for the seal and
the grade, and returns the stored reward. Every rollout is an episode in the store (mode `rl`).

TRL turns every public method other than `reset` and `get_reward` into a tool, so everything
else here is private: the only tool is `bash`.
"""

from __future__ import annotations

import atexit
import queue
import threading
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.agents.loop import EpisodeLimits
from engine.agents.registry import ModelConfig, Registry
from engine.oracle.contract import Contract
from engine.protocol.episode import EpisodeResult, RunContext, run_episode
from engine.protocol.spec import EpisodeSpec
from engine.rl.agent import Event, ExternalAgent, ExternalExecutor
from engine.tasks.model import Task
from store import protocol as sp
from store import tasks as task_store
from store import vocab
from store.db import Store

MODE = "rl"
# How long a reset or a call may wait for the episode (an image build may take minutes).
WAIT_S = 3600.0
OVER = "[episode over: {why}]"


@dataclass(frozen=True)
class EnvConfig:
    """What every environment of one factory shares."""

    db: Path | None
    task_ids: tuple[str, ...]
    fault: str = vocab.NO_FAULT  # the family for rows that name none
    budget: int | None = None
    cap: int | None = None
    prompt: str = "general"
    planted: str = "none"
    agent: str = "policy"  # the agent's name in the store
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)


@dataclass
class _Rollout:
    """One reset's episode as the driver follows it."""

    agent: ExternalAgent
    events: queue.Queue[Event]
    thread: threading.Thread | None = None
    result: EpisodeResult | None = None
    failure: str | None = None  # why there is no episode to grade (a failed reset)
    over: str | None = None  # why the episode takes no more commands
    reward: float | None = None


class TerminalEnv:
    """A terminal task as a training environment. Pooled and reused by trainers: each `reset`
    ends the previous episode (its container goes) before starting the next."""

    def __init__(self, config: EnvConfig) -> None:
        self._config = config
        self._store: Store | None = None
        self._rollout: _Rollout | None = None
        self._lock = threading.Lock()
        _LIVE.add(self)

    # --- the trainer's contract -----------------------------------------------------------

    def reset(self, **row: Any) -> str:
        """Start an episode of the row's task (`task`, `fault`, `seed`; a trainer's `step` and
        `group` are stored in the episode's spec). Never raises: a reset that fails ends the
        episode as an error scoring 0 and says why."""
        self._end()
        agent_events: queue.Queue[Event] = queue.Queue()
        rollout = _Rollout(ExternalAgent(self._config.agent, agent_events), agent_events)
        self._rollout = rollout
        try:
            task, spec, contract = self._prepare(row)
        except Exception as exc:  # a bad row or a task that will not load: no episode to run
            rollout.failure = f"{type(exc).__name__}: {exc}"
            rollout.over = rollout.failure
            rollout.reward = 0.0
            return f"The episode could not start: {rollout.failure}"
        rollout.thread = threading.Thread(
            target=self._run, args=(rollout, task, spec, contract), daemon=True, name="rl-episode"
        )
        rollout.thread.start()
        text = self._collect(rollout)
        if rollout.over is not None and not text:
            return f"The episode could not start: {rollout.over}"
        return text

    def bash(self, command: str) -> str:
        """Run a command in the task's persistent bash shell (working directory and variables
        carry over between calls; no standard input; 30 s per command; long output is cut).

        Args:
            command: The shell command to run. An empty command says the current part of the
                task is done: its grade follows, and the next part's instructions come back
                when it passed.

        Returns:
            What the command printed (stdout and stderr), then its exit code.
        """
        rollout = self._rollout
        if rollout is None:
            return OVER.format(why="no episode: call reset first")
        if rollout.over is not None:
            return OVER.format(why=rollout.over)
        closing = isinstance(command, str) and not command.strip()
        # Anything else goes as the model's call: a non-string is a format error there too.
        rollout.agent.send(None if closing else command)
        return self._collect(rollout)

    def get_reward(self) -> float:
        """The episode's reward (1 solved, 0 not, -1 collateral damage), graded once: the
        closing reply, the host-side stop, the snapshot and the trusted verifier. Later calls
        return the same value."""
        rollout = self._rollout
        if rollout is None:
            return 0.0
        if rollout.reward is None:
            self._finish(rollout)
            result = rollout.result
            rollout.reward = float(result.reward or 0.0) if result is not None else 0.0
        return rollout.reward

    # --- the rest is not a tool -------------------------------------------------------------

    def _prepare(self, row: dict[str, Any]) -> tuple[Task, EpisodeSpec, Contract | None]:
        from engine.protocol.common import load_unit_task

        cfg = self._config
        store = self._open()
        name = str(row.get("task") or (cfg.task_ids[0] if len(cfg.task_ids) == 1 else ""))
        if not name:
            raise ValueError("the row names no task (a `task` column) and the factory has several")
        found = task_store.find_task_ids(store, name)
        if len(found) != 1:
            raise ValueError(f"task {name!r}: {'no such task' if not found else 'ambiguous'}")
        task = load_unit_task(store, found[0])
        fault = str(row.get("fault") or cfg.fault)
        if fault not in (vocab.NO_FAULT, *vocab.FAULT_FAMILIES):
            raise ValueError(f"fault {fault!r}: not a fault family")
        seed = int(row.get("seed") or 0)
        contract = None
        stored = sp.get_contract(store, task.id)
        if stored is not None and stored["task_hash"] == task.content_hash and stored["valid"]:
            contract = Contract.from_dict(stored, f"the stored contract of {task.id}")
        if fault != vocab.NO_FAULT and (contract is None or fault not in contract.fault_targets):
            raise ValueError(f"{task.id}: no validated {fault} target; run `depthtui validate`")
        rollout = {k: row[k] for k in ("step", "group") if row.get(k) is not None}
        rollout["id"] = uuid.uuid4().hex[:12]  # every rollout is its own run
        spec = EpisodeSpec(
            task_id=task.id,
            task_hash=task.content_hash,
            mode=MODE,
            agent=cfg.agent,
            cap=cfg.cap,
            budget=cfg.budget,
            attempt=seed,
            prompt=cfg.prompt,
            fault=fault,
            planted=cfg.planted,
            limits=cfg.limits,
            rollout=rollout,
        )
        return task, spec, contract

    def _run(
        self, rollout: _Rollout, task: Task, spec: EpisodeSpec, contract: Contract | None
    ) -> None:
        from engine.cache import build_log_dir

        try:
            model = ModelConfig(name=self._config.agent, kind="external", model=self._config.agent)
            ctx = RunContext(
                store=self._open(),
                registry=Registry({self._config.agent: model}),
                owner=f"rl-{uuid.uuid4().hex[:8]}",
                log_dir=build_log_dir(),
                executor=ExternalExecutor(rollout.agent),
            )
            rollout.result = run_episode(ctx, task, spec, contract=contract)
            why = rollout.result.error_detail or rollout.result.outcome or "finished"
        except Exception as exc:  # our bug: the rollout scores 0 and says why
            why = f"{type(exc).__name__}: {exc}"
            rollout.failure = why
        rollout.events.put(Event("done", why))

    def _collect(self, rollout: _Rollout) -> str:
        """What the model is shown until the agent waits for its next command or the episode
        ends: the turn's observations and any segment that opened meanwhile."""
        parts: list[str] = []
        while True:
            try:
                event = rollout.events.get(timeout=WAIT_S)
            except queue.Empty:
                rollout.over = "the episode stopped answering"
                rollout.agent.close()
                break
            if event.kind in ("turn", "segment"):
                if event.text:
                    parts.append(event.text)
            elif event.kind == "ready":
                break
            elif event.kind == "done":
                rollout.over = event.text or "finished"
                parts.append(OVER.format(why=rollout.over))
                break
        return "\n\n".join(parts)

    def _finish(self, rollout: _Rollout) -> None:
        """Close every segment and wait for the grade (and the container's removal)."""
        rollout.agent.close()
        if rollout.thread is not None:
            rollout.thread.join()
        if rollout.over is None:
            rollout.over = "graded"

    def _end(self) -> None:
        """The current episode ended and graded, so its container is gone."""
        with self._lock:
            rollout, self._rollout = self._rollout, None
        if rollout is not None and rollout.reward is None:
            self._finish(rollout)

    def _close(self) -> None:
        self._end()
        if self._store is not None:
            self._store.close()
            self._store = None

    def _open(self) -> Store:
        if self._store is None:
            self._store = Store(self._config.db)
        return self._store

    def _over(self) -> bool:
        """No episode, or one that takes no more commands."""
        rollout = self._rollout
        return rollout is None or rollout.over is not None

    def _remaining_budget(self) -> int | None:
        """Commands left of the stated budget (None without one), as the store counts them."""
        budget = self._config.budget
        eid = self._episode_id()
        if budget is None or eid is None:
            return budget
        # Asked between turns (the episode waits for a command), so no write is in flight.
        query = "SELECT COUNT(*) FROM calls WHERE episode_id = ? AND not_run = 0"
        (used,) = self._open().conn.execute(query, (eid,)).fetchone()
        return max(budget - used, 0)

    def _episode_id(self) -> int | None:
        rollout = self._rollout
        return rollout.agent.episode_id if rollout else None


# Environments not yet closed: their episodes are ended (containers removed) at exit.
_LIVE: weakref.WeakSet[TerminalEnv] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for env in list(_LIVE):
        env._close()
