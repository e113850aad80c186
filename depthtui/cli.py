"""The `depthtui` command. Each verb group lives in depthtui/commands/<group>.py and is
registered here, so this file stays a table of contents."""

from __future__ import annotations

from pathlib import Path

import typer

from depthtui.commands import common

app = typer.Typer(
    name="depthtui",
    help="Measure how deep terminal tasks are and whether agents are correct, safe and able to "
    "recover; inspect every run in a terminal UI. With no command, opens the TUI.",
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback(invoke_without_command=True)
def root(ctx: typer.Context, db: common.DbOption = None) -> None:
    """Open the TUI when no command is given."""
    if db is not None:
        import os

        os.environ["DEPTHTUI_DB"] = str(Path(db).expanduser())
    if ctx.invoked_subcommand is None:
        from depthtui.commands.tui import open_tui

        open_tui(db)


def _register() -> None:
    # Imported here, not at module top, so `depthtui --help` stays fast and a broken optional
    # part (say, vllm) cannot stop the other verbs from working.
    from depthtui.commands import registry

    registry.register(app)


def main() -> None:
    _register()
    app()
