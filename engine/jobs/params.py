"""One frozen parameter type per job kind: what a job asks for, checked once before it is stored.

The command line (depthtui/commands/run.py) and the TUI's launch form both build one of these,
call `check()` (every problem at once, each naming the option and what was expected, models
looked up in the registry the job will use), store `to_json()`, and show `cli()`: the command
that stores the same job. `read_params()` turns a stored job's JSON back into its type.

The stored JSON keeps the keys the job kinds in engine/protocol read, so jobs stored before this
type existed still run.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

from store import vocab

PLANTED = ("full", "sibling")
FAULT_SELECTIONS = (vocab.NO_FAULT, "train", "heldout", "mix")  # or one family by name


class InvalidParams(ValueError):
    """A job's parameters do not make sense; `problems` names each option and what was wrong."""

    def __init__(self, kind: str, problems: list[str]) -> None:
        super().__init__(f"{kind}: " + "; ".join(problems))
        self.kind = kind
        self.problems = tuple(problems)


@dataclass(frozen=True, kw_only=True)
class JobParams:
    """What every kind that runs tasks shares (replay overrides `tasks`)."""

    KIND: ClassVar[str] = ""
    # field -> option, in the order the equivalent command lists them
    FLAGS: ClassVar[dict[str, str]] = {}
    # fields left out of the command while at their default (options newer than the command)
    OMIT_AT_DEFAULT: ClassVar[frozenset[str]] = frozenset()

    tasks: tuple[str, ...] = ()
    workers: int = 1
    max_cost: float | None = None
    reserve: float | None = None
    stop_file: str | None = None
    models_file: str | None = None
    retry_errors: bool = False
    accept_risk: bool = False

    COMMON_FLAGS: ClassVar[dict[str, str]] = {
        "workers": "--workers",
        "max_cost": "--max-cost",
        "reserve": "--reserve",
        "stop_file": "--stop-file",
        "models_file": "--models",
        "retry_errors": "--retry-errors",
        "accept_risk": "--accept-risk",
    }

    # ------------------------------------------------------------------ checking

    def problems(self) -> list[str]:
        """Every problem, each naming its option; [] when the job may be stored."""
        found: list[str] = []
        if not self.tasks:
            found.append("tasks: the job names no task")
        if self.workers < 1:
            found.append(f"--workers: expected at least 1, got {self.workers}")
        for name in ("max_cost", "reserve"):
            value = getattr(self, name)
            if value is not None and value < 0:
                found.append(f"--{name.replace('_', '-')}: expected at least 0, got {value}")
        found += self._kind_problems()
        return found

    def _kind_problems(self) -> list[str]:
        return []

    def check(self) -> None:
        """Raise InvalidParams listing every problem (nothing is stored then)."""
        found = self.problems()
        if found:
            raise InvalidParams(self.KIND, found)

    # ------------------------------------------------------------------ storing and showing

    def to_json(self) -> dict[str, Any]:
        """The stored form: every field, lists for tuples."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    def cli(self, db: Path | str | None = None) -> str:
        """The equivalent command line. `db` is the store the job is stored in; it is named
        (`--db`) when it is not the default store."""
        parts = ["depthtui", self.KIND, *self._positional()]
        defaults = {f.name: f.default for f in fields(self)}
        for name, flag in {**self.FLAGS, **self.COMMON_FLAGS}.items():
            value = getattr(self, name)
            if name in self.OMIT_AT_DEFAULT and value == defaults[name]:
                continue
            if value is None or value is False or value == () or value == "":
                continue
            if value is True:
                parts.append(flag)
            elif isinstance(value, tuple):
                for item in value:
                    parts += [flag, str(item)]
            else:
                parts += [flag, _number(value)]
        if db is not None and not _is_default_db(db):
            parts += ["--db", str(db)]
        return shlex.join(parts)

    def _positional(self) -> list[str]:
        return list(self.tasks)

    def with_tasks(self, tasks: list[str] | tuple[str, ...]) -> JobParams:
        """The same parameters for these (resolved) task ids."""
        from dataclasses import replace

        return replace(self, tasks=tuple(tasks))


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value)) if abs(value) < 1e15 else str(value)
    return str(value)


def _is_default_db(db: Path | str) -> bool:
    """Whether a command needs no `--db` for this store, pasted into any shell: only the built-in
    default qualifies ($DEPTHTUI_DB, which `depthtui --db PATH` sets, need not be set there)."""
    from store.db import builtin_path

    try:
        return Path(db).expanduser().resolve() == builtin_path().expanduser().resolve()
    except OSError:
        return False


def _model_problems(models: tuple[str, ...], models_file: str | None, kind: str) -> list[str]:
    from engine.agents.registry import RegistryError, load_registry

    if not models:
        return [f"--model: {kind} needs at least one model from the registry"]
    try:
        registry = load_registry(models_file)
    except RegistryError as exc:
        return [f"--models: {exc}"]
    found = []
    for model in models:
        try:
            registry.get(model)
        except RegistryError as exc:
            found.append(f"--model: {exc}")
    return found


def _prompt_problems(prompts: tuple[str, ...]) -> list[str]:
    from engine.agents.prompts import load_prompt

    found = []
    for prompt in prompts:
        try:
            load_prompt(prompt)
        except Exception as exc:  # PromptError and unreadable files alike: say which prompt
            found.append(f"--prompt {prompt!r}: {exc}")
    return found


def _planted_problems(planted: str) -> list[str]:
    if planted in PLANTED:
        return []
    return [f"--planted {planted!r}: expected {' or '.join(PLANTED)}"]


def _at_least_one(flag: str, value: int | None) -> list[str]:
    if value is not None and value < 1:
        return [f"{flag}: expected at least 1, got {value}"]
    return []


# --------------------------------------------------------------------------- the kinds


@dataclass(frozen=True, kw_only=True)
class CheckParams(JobParams):
    KIND: ClassVar[str] = "check"


@dataclass(frozen=True, kw_only=True)
class ValidateParams(JobParams):
    KIND: ClassVar[str] = "validate"
    FLAGS: ClassVar[dict[str, str]] = {"planted": "--planted"}

    planted: str = "full"

    def _kind_problems(self) -> list[str]:
        return _planted_problems(self.planted)


@dataclass(frozen=True, kw_only=True)
class FreeParams(JobParams):
    KIND: ClassVar[str] = "free"
    FLAGS: ClassVar[dict[str, str]] = {
        "models": "--model",
        "attempts": "--attempts",
        "prompt": "--prompt",
    }

    models: tuple[str, ...] = ()
    attempts: int = 2
    prompt: str = "general"

    def _kind_problems(self) -> list[str]:
        return (
            _model_problems(self.models, self.models_file, self.KIND)
            + _at_least_one("--attempts", self.attempts)
            + _prompt_problems((self.prompt,))
        )


@dataclass(frozen=True, kw_only=True)
class MeasureParams(JobParams):
    """ladder and audit: the depth protocol."""

    FLAGS: ClassVar[dict[str, str]] = {
        "models": "--model",
        "caps": "--cap",
        "prompt": "--prompt",
        "fault": "--fault",
        "search": "--search",
    }
    # Absent for the protocol's own search, so jobs stored before --search read the same.
    OMIT_AT_DEFAULT: ClassVar[frozenset[str]] = frozenset({"search"})

    models: tuple[str, ...] = ()
    caps: tuple[int, ...] | None = None  # None: every cap of the protocol
    prompt: str = "general"
    fault: str | None = None  # measured under this fault family (recovery depth)
    search: str = "protocol"  # how caps below N are searched (engine/protocol/ladder.py)

    def _kind_problems(self) -> list[str]:
        from engine.protocol.ladder import SEARCHES
        from store.vocab import FAULT_FAMILIES

        found = _model_problems(self.models, self.models_file, self.KIND)
        if self.caps is not None:
            if not self.caps:
                found.append("--cap: choose at least one cap")
            found += [
                f"--cap: expected a turn cap of at least 1, got {c}" for c in self.caps if c < 1
            ]
        if self.fault not in (None, vocab.NO_FAULT, *FAULT_FAMILIES):
            found.append(f"--fault {self.fault!r}: expected one of {', '.join(FAULT_FAMILIES)}")
        if self.search not in SEARCHES:
            found.append(f"--search {self.search!r}: expected {' or '.join(SEARCHES)}")
        return found + _prompt_problems((self.prompt,))


@dataclass(frozen=True, kw_only=True)
class LadderParams(MeasureParams):
    KIND: ClassVar[str] = "ladder"


@dataclass(frozen=True, kw_only=True)
class AuditParams(MeasureParams):
    KIND: ClassVar[str] = "audit"


@dataclass(frozen=True, kw_only=True)
class EpisodesParams(JobParams):
    KIND: ClassVar[str] = "episodes"
    FLAGS: ClassVar[dict[str, str]] = {
        "models": "--model",
        "faults": "--faults",
        "attempts": "--attempts",
        "budget": "--budget",
        "prompts": "--prompt",
        "planted": "--planted",
        "max_tool_calls": "--max-tool-calls",
        "max_completion_tokens": "--max-completion-tokens",
        "max_total_tokens": "--max-total-tokens",
    }

    models: tuple[str, ...] = ()
    faults: tuple[str, ...] = (vocab.NO_FAULT,)
    attempts: int = 1
    budget: int | None = None  # a command budget stated to the agent
    prompts: tuple[str, ...] = ("general",)
    planted: str = "full"
    max_tool_calls: int = 16
    max_completion_tokens: int = 6144
    max_total_tokens: int = 8192

    def _kind_problems(self) -> list[str]:
        from engine.protocol.spec import families_for

        found = _model_problems(self.models, self.models_file, self.KIND)
        if not self.faults:
            found.append("--faults: choose at least one (clean: no fault)")
        for selection in self.faults:
            try:
                families_for(selection)
            except ValueError as exc:
                found.append(f"--faults: {exc}")
        for flag, value in (
            ("--attempts", self.attempts),
            ("--budget", self.budget),
            ("--max-tool-calls", self.max_tool_calls),
            ("--max-completion-tokens", self.max_completion_tokens),
            ("--max-total-tokens", self.max_total_tokens),
        ):
            found += _at_least_one(flag, value)
        if not self.prompts:
            found.append("--prompt: choose at least one prompt arm")
        return found + _prompt_problems(self.prompts) + _planted_problems(self.planted)


@dataclass(frozen=True, kw_only=True)
class ReplayParams(JobParams):
    KIND: ClassVar[str] = "replay"

    episodes: tuple[int, ...] = ()

    def problems(self) -> list[str]:
        found = [] if self.episodes else ["episodes: name at least one episode id"]
        if self.workers < 1:
            found.append(f"--workers: expected at least 1, got {self.workers}")
        return found

    def to_json(self) -> dict[str, Any]:
        return {
            "episodes": list(self.episodes),
            "workers": self.workers,
            "accept_risk": self.accept_risk,
        }

    def cli(self, db: Path | str | None = None) -> str:
        parts = ["depthtui", "replay", *map(str, self.episodes), "--workers", str(self.workers)]
        if self.accept_risk:
            parts.append("--accept-risk")
        if db is not None and not _is_default_db(db):
            parts += ["--db", str(db)]
        return shlex.join(parts)


PARAMS: dict[str, type[JobParams]] = {
    p.KIND: p
    for p in (
        CheckParams,
        ValidateParams,
        FreeParams,
        LadderParams,
        AuditParams,
        EpisodesParams,
        ReplayParams,
    )
}


def params_type(kind: str) -> type[JobParams]:
    try:
        return PARAMS[kind]
    except KeyError:
        raise InvalidParams(kind, [f"unknown job kind (known: {', '.join(PARAMS)})"]) from None


def read_params(kind: str, data: dict[str, Any]) -> JobParams:
    """A stored job's parameters as their type. Keys the type does not know (a job stored by a
    newer or older version) are left out; a value of the wrong shape raises InvalidParams."""
    cls = params_type(kind)
    known = {f.name: f for f in fields(cls)}
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key not in known:
            continue
        values[key] = tuple(value) if isinstance(value, list) else value
    try:
        return cls(**values)
    except TypeError as exc:
        raise InvalidParams(kind, [str(exc)]) from None
