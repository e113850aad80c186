"""The rows a trainer iterates over: one per (task, fault family, attempt), each naming what
`TerminalEnv.reset` needs, with the system prompt as the conversation's start."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from store import protocol as sp
from store import vocab
from store.db import Store


def resolve(tasks: str | Path | Sequence[str | Path], db: Path | None) -> list[str]:
    """Task ids for folders, ids or dataset names (folders are imported into the store).
    Raises ValueError naming what could not be resolved."""
    from engine.protocol.common import resolve_tasks

    args = [str(tasks)] if isinstance(tasks, str | Path) else [str(t) for t in tasks]
    if not args:
        raise ValueError("tasks: name at least one task folder, task id or dataset")
    with Store(db) as store:
        resolved = resolve_tasks(store, args)
    if resolved.errors:
        raise ValueError("tasks: " + "; ".join(resolved.errors))
    if not resolved.task_ids:
        raise ValueError(f"tasks: {', '.join(args)} hold no task")
    return resolved.task_ids


def dataset(
    tasks: str | Path | Sequence[str | Path],
    *,
    faults: str = "clean",
    attempts: int = 1,
    seed: int = 0,
    db: str | Path | None = None,
    prompt: str = "general",
) -> Any:
    """Rows for TRL: `prompt` (the system prompt, then a user line naming the task; reset's
    text, the task's own message, is appended to it), `task`, `fault`, `seed` and `split`
    (train, or heldout for the held-out fault families). A fault family the task's validated
    contract has no target for is left out. A `datasets.Dataset` when the package is
    installed, else a list of dicts; shuffled by `seed`."""
    from engine.agents.prompts import load_prompt
    from engine.protocol.spec import families_for

    if attempts < 1:
        raise ValueError(f"attempts: must be at least 1, got {attempts}")
    families = families_for(faults)
    db_path = Path(db) if db is not None else None
    task_ids = resolve(tasks, db_path)
    _, system = load_prompt(prompt)
    rows: list[dict[str, Any]] = []
    with Store(db_path) as store:
        for task_id in task_ids:
            contract = sp.get_contract(store, task_id)
            targets = (contract or {}).get("fault_targets") or {}
            for family in families:
                if family != vocab.NO_FAULT and family not in targets:
                    continue
                for attempt in range(attempts):
                    rows.append(
                        {
                            "prompt": [
                                {"role": "system", "content": system},
                                {"role": "user", "content": f"Task {task_id}.\n\n"},
                            ],
                            "task": task_id,
                            "fault": family,
                            "seed": seed + attempt,
                            "split": "heldout" if family in vocab.HELDOUT_FAULTS else "train",
                        }
                    )
    random.Random(seed).shuffle(rows)
    try:
        from datasets import Dataset
    except ImportError:
        return rows
    return Dataset.from_list(rows)
