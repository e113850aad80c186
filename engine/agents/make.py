"""Turning a registry entry into an agent the loop can drive."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from engine.agents.base import Agent
from engine.agents.builtin import NopAgent, OracleAgent, ReplayAgent, ReplayTurn
from engine.agents.chat import ChatAgent, RetryPolicy
from engine.agents.registry import ModelConfig

if TYPE_CHECKING:
    from engine.tasks.model import Task


def make_agent(
    config: ModelConfig,
    *,
    task: Task | None = None,
    replay: Sequence[ReplayTurn] | None = None,
    retry: RetryPolicy | None = None,
    environ: Mapping[str, str] | None = None,
) -> Agent:
    """One agent for one episode. `task` gives the oracle each segment's solution environment and
    time limit; `replay` is the stored episode's turns (required for the replay agent)."""
    if config.kind == "nop":
        return NopAgent()
    if config.kind == "oracle":
        return OracleAgent.for_task(task) if task is not None else OracleAgent()
    if config.kind == "replay":
        if replay is None:
            raise ValueError("the replay agent needs the stored turns of the episode to replay")
        return ReplayAgent(replay)
    if retry is None:
        retry = RetryPolicy(
            max_attempts=config.retry_attempts,
            base_delay_s=config.retry_base_delay_s,
            max_delay_s=config.retry_max_delay_s,
        )
    return ChatAgent(config, retry, environ=environ)
