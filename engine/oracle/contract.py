"""A task's frozen contract (what `validate` derives) and the permit rules it implies.

The JSONL shape is the recovery bench's own (docs/safety.md, "Change kinds and the contract"):
{"task_id", "fixture_level", "permitted": {path: [kinds]}, "tests": [...], "fault_targets":
{family: path}, "env_hash", "tests_sha", "harness"}. Unknown keys are kept so a contract read and
written again loses nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from store.vocab import FAULT_FAMILIES

KINDS = (
    "deleted",
    "type_changed",
    "content_changed",
    "mode_changed",
    "owner_changed",
    "link_changed",
)
FIXTURE_LEVELS = ("full", "sibling")

_KNOWN_KEYS = {
    "task_id",
    "fixture_level",
    "permitted",
    "tests",
    "fault_targets",
    "env_hash",
    "tests_sha",
    "tests_hash",
    "harness",
}


class ContractError(ValueError):
    """A contract that cannot be read; the message names where, the field and what was expected."""


class Permits:
    """Which change kinds are allowed where.

    A key is an absolute path in the container. A key ending in `/` permits its kinds for
    everything below that folder (not the folder itself). A path permitted `type_changed` may be
    absent between two calls (a move, then a symlink in the next call), but not at the end.
    """

    def __init__(self, rules: Mapping[str, Iterable[str]] | None = None) -> None:
        self.exact: dict[str, frozenset[str]] = {}
        self.prefixes: dict[str, frozenset[str]] = {}
        for path, kinds in (rules or {}).items():
            self._add(path, kinds)

    def _add(self, path: str, kinds: Iterable[str]) -> None:
        kinds = frozenset(kinds)
        bad = sorted(k for k in kinds if k not in KINDS)
        if bad:
            raise ContractError(
                f"permitted[{path!r}]: unknown change kind(s) {bad}; expected {KINDS}"
            )
        if not path.startswith("/"):
            raise ContractError(f"permitted: path {path!r} must be absolute")
        table = self.prefixes if path.endswith("/") and path != "/" else self.exact
        table[path] = table.get(path, frozenset()) | kinds

    def kinds_for(self, path: str) -> frozenset[str]:
        kinds = self.exact.get(path, frozenset())
        for prefix, more in self.prefixes.items():
            if path.startswith(prefix) and path != prefix:
                kinds = kinds | more
        return kinds

    def allows(self, path: str, kind: str, final: bool) -> bool:
        kinds = self.kinds_for(path)
        if kind in kinds:
            return True
        # Transient absence: the path may be replaced by another type across two calls.
        return kind == "deleted" and not final and "type_changed" in kinds

    def touches(self, path: str) -> bool:
        """Whether any change at all is permitted on `path`."""
        return bool(self.kinds_for(path))

    def merged(self, more: Mapping[str, Iterable[str]]) -> Permits:
        out = Permits(self.to_dict())
        for path, kinds in more.items():
            out._add(path, kinds)
        return out

    def to_dict(self) -> dict[str, list[str]]:
        both = {**self.exact, **self.prefixes}
        return {p: sorted(both[p], key=KINDS.index) for p in sorted(both)}


@dataclass(frozen=True)
class Contract:
    task_id: str
    permitted: dict[str, tuple[str, ...]] = field(default_factory=dict)
    tests: tuple[str, ...] = ()
    fault_targets: dict[str, str] = field(default_factory=dict)
    env_hash: str = ""
    tests_hash: str = ""
    fixture_level: str = "full"
    harness: str = ""
    extra: dict = field(default_factory=dict)

    def permits(self) -> Permits:
        return Permits(self.permitted)

    @classmethod
    def from_dict(cls, doc: object, where: str = "contract") -> Contract:
        if not isinstance(doc, dict):
            raise ContractError(f"{where}: expected a JSON object, got {type(doc).__name__}")

        def need(key: str, kind: type, default=None):
            if key not in doc:
                if default is None:
                    raise ContractError(f"{where}: field '{key}' is missing")
                return default
            value = doc[key]
            if not isinstance(value, kind):
                raise ContractError(
                    f"{where}: field '{key}' must be {kind.__name__}, got {type(value).__name__}"
                )
            return value

        task_id = need("task_id", str)
        permitted_raw = need("permitted", dict, {})
        permitted: dict[str, tuple[str, ...]] = {}
        for path, kinds in permitted_raw.items():
            if not isinstance(kinds, list) or not all(isinstance(k, str) for k in kinds):
                raise ContractError(f"{where}: permitted[{path!r}] must be a list of kinds")
            bad = [k for k in kinds if k not in KINDS]
            if bad:
                raise ContractError(
                    f"{where}: permitted[{path!r}]: unknown kind(s) {bad}; expected one of {KINDS}"
                )
            if not path.startswith("/"):
                raise ContractError(f"{where}: permitted path {path!r} must be absolute")
            permitted[path] = tuple(kinds)
        tests = need("tests", list, [])
        if not all(isinstance(t, str) for t in tests):
            raise ContractError(f"{where}: field 'tests' must be a list of test ids")
        targets = need("fault_targets", dict, {})
        for family, path in targets.items():
            if family not in FAULT_FAMILIES:
                raise ContractError(
                    f"{where}: fault_targets: unknown family {family!r}; "
                    f"expected one of {FAULT_FAMILIES}"
                )
            if not isinstance(path, str) or not path.startswith("/"):
                raise ContractError(f"{where}: fault_targets[{family!r}] must be an absolute path")
        level = need("fixture_level", str, "full")
        if level not in FIXTURE_LEVELS:
            raise ContractError(
                f"{where}: field 'fixture_level' is {level!r}; expected one of {FIXTURE_LEVELS}"
            )
        tests_hash = doc.get("tests_sha", doc.get("tests_hash", ""))
        if not isinstance(tests_hash, str):
            raise ContractError(f"{where}: field 'tests_sha' must be str")
        return cls(
            task_id=task_id,
            permitted=permitted,
            tests=tuple(tests),
            fault_targets=dict(targets),
            env_hash=need("env_hash", str, ""),
            tests_hash=tests_hash,
            fixture_level=level,
            harness=need("harness", str, ""),
            extra={k: v for k, v in doc.items() if k not in _KNOWN_KEYS},
        )

    def to_dict(self) -> dict:
        """The reference shape, key for key."""
        return {
            "task_id": self.task_id,
            "fixture_level": self.fixture_level,
            "permitted": {p: list(k) for p, k in self.permitted.items()},
            "tests": list(self.tests),
            "fault_targets": dict(self.fault_targets),
            "env_hash": self.env_hash,
            "tests_sha": self.tests_hash,
            "harness": self.harness,
            **self.extra,
        }


def loads_contracts(text: str, source: str = "<contracts>") -> list[Contract]:
    """Parse JSONL: one contract per non-blank line."""
    out = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source}:{n}"
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ContractError(
                f"{where}: not valid JSON ({exc.msg} at column {exc.colno})"
            ) from exc
        out.append(Contract.from_dict(doc, where))
    return out


def load_contracts(path: Path | str) -> list[Contract]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ContractError(f"{path}: cannot read ({exc.strerror})") from exc
    except UnicodeDecodeError as exc:
        raise ContractError(f"{path}: not UTF-8 text") from exc
    return loads_contracts(text, str(path))


def dumps_contracts(contracts: Iterable[Contract]) -> str:
    return "".join(json.dumps(c.to_dict(), ensure_ascii=False) + "\n" for c in contracts)


def dump_contracts(contracts: Iterable[Contract], path: Path | str) -> None:
    Path(path).write_text(dumps_contracts(contracts), encoding="utf-8")
