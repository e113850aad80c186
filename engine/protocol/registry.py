"""The job kinds that exist, by name. Each kind's module exposes `KIND: JobKind`."""

from __future__ import annotations

import importlib

from engine.protocol.kinds import JobKind

KIND_MODULES = {
    "check": "engine.protocol.check",
    "validate": "engine.protocol.validate",
    "free": "engine.protocol.free",
    "ladder": "engine.protocol.measure",
    "audit": "engine.protocol.measure",
    "episodes": "engine.protocol.faulted",
    "replay": "engine.protocol.replay",
}


def get_kind(name: str) -> JobKind:
    """The JobKind called `name`; ValueError naming the known kinds otherwise."""
    module = KIND_MODULES.get(name)
    if module is None:
        known = ", ".join(sorted(KIND_MODULES))
        raise ValueError(f"unknown job kind '{name}' (known: {known})")
    mod = importlib.import_module(module)
    kinds = getattr(mod, "KINDS", None) or {mod.KIND.name: mod.KIND}
    return kinds[name]
