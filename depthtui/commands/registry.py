"""Which verb groups exist. One line per group; each module exposes `register(app)`."""

from __future__ import annotations

import importlib

import typer

GROUPS = [
    "depthtui.commands.tasks",
    "depthtui.commands.bench",
    "depthtui.commands.models",
    "depthtui.commands.serve",
    "depthtui.commands.engine",
    "depthtui.commands.jobs",
    "depthtui.commands.tui",
    "depthtui.commands.triage",
    "depthtui.commands.run",
    "depthtui.commands.report",
    "depthtui.commands.exports",
    "depthtui.commands.doctor",
    "depthtui.commands.sandbox",
    "depthtui.commands.transcript",
    "depthtui.commands.judges",
    "depthtui.commands.env",
]


def register(app: typer.Typer) -> None:
    for name in GROUPS:
        importlib.import_module(name).register(app)
