"""The RL environment (docs/rl.md): depthtui's episodes as a trainer's environment.

`environment_factory(tasks, ...)` gives TRL's `environment_factory` (a zero-argument callable
returning a `TerminalEnv`), `dataset(tasks, ...)` the rows it trains on. Every rollout is an
episode of the one episode path, stored with mode `rl`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from engine.agents.loop import EpisodeLimits
from engine.rl.env import MODE, EnvConfig, TerminalEnv
from engine.rl.rows import dataset, resolve

__all__ = ["MODE", "EnvConfig", "TerminalEnv", "dataset", "environment_factory"]


def environment_factory(
    tasks: str | Path | Sequence[str | Path],
    *,
    db: str | Path | None = None,
    faults: str = "clean",
    budget: int | None = None,
    cap: int | None = None,
    prompt: str = "general",
    planted: str = "full",
    agent: str = "policy",
    limits: EpisodeLimits | None = None,
) -> Callable[[], TerminalEnv]:
    """A zero-argument factory of TerminalEnv over `tasks` (folders, task ids or dataset names;
    folders are imported into the store `db`, the default store when None). `faults` is the
    family for rows that name none (one family, or clean); `budget` and `cap` are stated and
    enforced as in every episode; `planted` is the planted-file level (none, sibling, full)."""
    from engine.protocol.spec import PLANTED_LEVELS
    from store import vocab

    if faults not in (vocab.NO_FAULT, *vocab.FAULT_FAMILIES):
        known = ", ".join((vocab.NO_FAULT, *vocab.FAULT_FAMILIES))
        raise ValueError(f"faults: unknown family {faults!r} (expected one of: {known})")
    if planted not in PLANTED_LEVELS:
        raise ValueError(f"planted: {planted!r} is not one of {', '.join(PLANTED_LEVELS)}")
    for name, value in (("budget", budget), ("cap", cap)):
        if value is not None and value < 1:
            raise ValueError(f"{name}: must be at least 1, got {value}")
    from engine.agents.prompts import load_prompt

    load_prompt(prompt)  # a missing prompt fails here, naming the folder and what exists
    db_path = Path(db) if db is not None else None
    config = EnvConfig(
        db=db_path,
        task_ids=tuple(resolve(tasks, db_path)),
        fault=faults,
        budget=budget,
        cap=cap,
        prompt=prompt,
        planted=planted,
        agent=agent,
        limits=limits or EpisodeLimits(),
    )

    def factory() -> TerminalEnv:
        return TerminalEnv(config)

    factory.config = config  # type: ignore[attr-defined]  # for the OpenEnv server and tests
    return factory
