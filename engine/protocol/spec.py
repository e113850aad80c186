"""EpisodeSpec: everything that makes one run the run it is, and the run key derived from it.

Two specs with the same run key are the same run: once one is done, a rerun reuses it. The key
covers the task's content hash (an edited task is a new task), the model as configured (id,
endpoint, sampling; never its key), the stated cap and budget, the attempt number, the prompt's
text, the fault family, the planted-file level and every limit.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

from engine.agents.loop import EpisodeLimits
from engine.agents.registry import ModelConfig
from store import vocab
from store.vocab import FAULT_FAMILIES, HELDOUT_FAULTS, TRAIN_FAULTS

PLANTED_LEVELS = ("none", "sibling", "full")


@dataclass(frozen=True)
class EpisodeSpec:
    task_id: str
    task_hash: str
    mode: str  # check | validate | free | ladder | audit | episodes | replay | rl
    agent: str  # a registry name: a model, or oracle | nop | replay
    cap: int | None = None  # stated turn cap
    budget: int | None = None  # stated command budget
    attempt: int = 0
    prompt: str = "general"
    fault: str = vocab.NO_FAULT
    planted: str = "none"
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)
    network: bool = False
    accept_risk: bool = False
    replay_of: int | None = None
    # Free-form distinctions that must make two runs different (e.g. a validate probe's name).
    variant: str = ""
    # Which try of this run after infrastructure errors (0 = the first).
    retry: int = 0
    # The reference solution is at /solution (the oracle agent always has it; validation probes
    # and replays of oracle runs ask for it).
    solution: bool = False
    # A trainer's rollout (engine/rl): where it came from, e.g. {"step": 3, "group": 1, "id":
    # ...}. Left out of the key when None, so the keys of every other run stay as they were.
    rollout: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        parts = [self.agent]
        if self.cap is not None:
            parts.append(f"cap {self.cap}")
        if self.budget is not None:
            parts.append(f"budget {self.budget}")
        if self.fault != vocab.NO_FAULT:
            parts.append(self.fault)
        if self.variant:
            parts.append(self.variant)
        parts.append(f"#{self.attempt + 1}")
        return " ".join(parts)

    def seed(self) -> int:
        """The episode's seed (fault folder names and the like): a hash of what names the run."""
        text = f"{self.task_id}|{self.agent}|{self.cap}|{self.budget}|{self.attempt}|{self.fault}"
        return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")

    def key_material(self, model: ModelConfig, prompt_text: str) -> dict[str, Any]:
        spec = asdict(self)
        spec.pop("accept_risk")  # grading policy, not what the agent did
        # The verb that asked is a label: `free`'s uncapped runs are the ladder's first runs.
        spec.pop("mode")
        if spec.get("rollout") is None:
            spec.pop("rollout", None)
        return {
            "spec": spec,
            "model": model_fingerprint(model),
            "prompt_sha256": hashlib.sha256(prompt_text.encode()).hexdigest(),
        }

    def run_key(self, model: ModelConfig, prompt_text: str) -> str:
        material = json.dumps(self.key_material(model, prompt_text), sort_keys=True, default=str)
        return hashlib.sha256(material.encode()).hexdigest()


def model_fingerprint(model: ModelConfig) -> dict[str, Any]:
    """What about a model makes its runs differ; never the key or where the file lives."""
    return {
        "kind": model.kind,
        "base_url": model.base_url,
        "model": model.model,
        "action_format": model.action_format,
        "sampling": asdict(model.sampling),
        "provider": asdict(model.provider) if model.provider else None,
        "extra_body": dict(model.extra_body),
        "max_total_tokens": model.max_total_tokens,
        "max_completion_tokens": model.max_completion_tokens,
    }


def families_for(selection: str) -> tuple[str, ...]:
    """Fault families for `--faults clean|train|heldout|mix` (or one family by name)."""
    table = {
        vocab.NO_FAULT: (vocab.NO_FAULT,),
        "train": TRAIN_FAULTS,
        "heldout": HELDOUT_FAULTS,
        "mix": (vocab.NO_FAULT, *TRAIN_FAULTS, *HELDOUT_FAULTS),
    }
    if selection in table:
        return table[selection]
    if selection in FAULT_FAMILIES:
        return (selection,)
    known = ", ".join([*table, *FAULT_FAMILIES])
    raise ValueError(f"unknown fault selection '{selection}' (expected one of: {known})")
