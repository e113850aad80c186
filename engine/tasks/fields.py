"""Typed reads from a parsed TOML (or JSON) table, failing with the file, the field and what was
expected. Every loader reads outside input through here, so the messages stay alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.tasks.model import Healthcheck, TaskError


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Fields:
    """One table of a config file. `prefix` is the dotted name of the table ("" for the top)."""

    def __init__(self, data: Any, path: Path, prefix: str = "") -> None:
        if not isinstance(data, dict):
            raise TaskError(path, f"expected a table, got {_show(data)}", prefix or None)
        self.data = data
        self.path = path
        self.prefix = prefix

    def name(self, key: str) -> str:
        return f"{self.prefix}.{key}" if self.prefix else key

    def error(self, key: str, expected: str, value: Any) -> TaskError:
        return TaskError(self.path, f"expected {expected}, got {_show(value)}", self.name(key))

    def has(self, key: str) -> bool:
        return key in self.data

    def table(self, key: str) -> Fields:
        """A nested table; an absent one reads as empty."""
        value = self.data.get(key, {})
        if not isinstance(value, dict):
            raise self.error(key, "a table", value)
        return Fields(value, self.path, self.name(key))

    def number(self, key: str, default: float | None, *, positive: bool = True) -> float | None:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(key, "a number", value)
        if positive and value <= 0:
            raise self.error(key, "a number above 0", value)
        return float(value)

    def integer(self, key: str, default: int | None, *, minimum: int = 0) -> int | None:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, "a whole number", value)
        if value < minimum:
            raise self.error(key, f"a whole number of at least {minimum}", value)
        return value

    def text(self, key: str, default: str | None = None, *, required: bool = False) -> str | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise TaskError(self.path, "missing: expected a string", self.name(key))
            return default
        if not isinstance(value, str):
            raise self.error(key, "a string", value)
        if required and not value.strip():
            raise self.error(key, "a non-empty string", value)
        return value

    def flag(self, key: str, default: bool | None) -> bool | None:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, "true or false", value)
        return value

    def str_map(self, key: str) -> dict[str, str]:
        """A table of environment variables; numbers and booleans are accepted as their text."""
        value = self.data.get(key, {})
        if not isinstance(value, dict):
            raise self.error(key, 'a table of NAME = "value"', value)
        out: dict[str, str] = {}
        for name, item in value.items():
            if isinstance(item, bool):
                out[name] = "true" if item else "false"
            elif isinstance(item, str | int | float):
                out[name] = str(item)
            else:
                raise TaskError(
                    self.path, f"expected a string, got {_show(item)}", f"{self.name(key)}.{name}"
                )
        return out

    def str_list(self, key: str) -> list[str]:
        value = self.data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self.error(key, "a list of strings", value)
        return list(value)

    def user(self, key: str) -> str | int | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise self.error(key, "a user name or uid", value)
        if isinstance(value, str) and not value.strip():
            raise self.error(key, "a user name or uid", value)
        return value

    def min_reward(self, key: str) -> float | dict[str, float] | None:
        """Harbor's gate: a number gates the 'reward' key; a table gates each key it names."""
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, dict):
            out: dict[str, float] = {}
            for name, item in value.items():
                if isinstance(item, bool) or not isinstance(item, int | float):
                    raise TaskError(
                        self.path,
                        f"expected a number, got {_show(item)}",
                        f"{self.name(key)}.{name}",
                    )
                out[name] = float(item)
            return out
        raise self.error(key, "a number or a table of key = number", value)

    def healthcheck(self, key: str) -> Healthcheck | None:
        if key not in self.data:
            return None
        table = self.table(key)
        return Healthcheck(
            command=table.text("command", required=True) or "",
            interval_sec=table.number("interval_sec", 5.0, positive=False) or 0.0,
            timeout_sec=table.number("timeout_sec", 30.0) or 30.0,
            retries=table.integer("retries", 3) or 0,
        )


def unknown_keys(data: dict, known: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted names of keys that `known` does not list. `known` maps a key to None (a value or a
    free-form table) or to a nested `known` (a table whose keys are checked too); a list of tables
    (`[[steps]]`) is checked entry by entry."""
    found: list[str] = []
    for key, value in data.items():
        name = f"{prefix}.{key}" if prefix else key
        if key not in known:
            found.append(name)
            continue
        inner = known[key]
        if inner is None:
            continue
        if isinstance(value, dict):
            found += unknown_keys(value, inner, name)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    found += unknown_keys(item, inner, f"{name}[{i}]")
    return found
