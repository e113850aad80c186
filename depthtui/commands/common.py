"""Options and helpers shared by every verb."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from store.db import Store, StoreError, default_path

console = Console()
err_console = Console(stderr=True)

DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db",
        help="The store (SQLite file). Default: $DEPTHTUI_DB, else depthtui.db in your data "
        "directory.",
        envvar="DEPTHTUI_DB",
        show_default=False,
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print one JSON document instead of a table.")
]


def fail(message: str, code: int = 1) -> NoReturn:
    """Print one clear error and exit non-zero."""
    # soft_wrap: a path or command in the message stays whole, to be copied.
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def open_store(db: Path | None) -> Store:
    try:
        return Store(db or default_path())
    except StoreError as exc:
        fail(str(exc))


def print_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
