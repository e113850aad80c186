"""The `depthtui` command. Each verb group lives in depthtui/commands/<group>.py and is
registered here, so this file stays a table of contents."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

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
def root(
    ctx: typer.Context,
    db: common.DbOption = None,
    build_proxy: Annotated[
        bool,
        typer.Option(
            "--build-proxy",
            help="Give task image builds the host's CA bundle and proxy settings (for machines "
            "that reach package registries through a proxy; same as DEPTHTUI_BUILD_PROXY=1). "
            "See docs/builds.md.",
        ),
    ] = False,
) -> None:
    """Open the TUI when no command is given."""
    import os

    if db is not None:
        os.environ["DEPTHTUI_DB"] = str(Path(db).expanduser())
    if build_proxy:
        # An environment variable, so a background engine started from here inherits it.
        os.environ["DEPTHTUI_BUILD_PROXY"] = "1"
    if ctx.invoked_subcommand is None:
        from depthtui.commands.tui import open_tui

        open_tui(db)


def _register() -> None:
    # Imported here, not at module top, so `depthtui --help` stays fast and a broken optional
    # part (say, vllm) cannot stop the other verbs from working.
    from depthtui.commands import registry

    registry.register(app)


ROOT_FLAGS = ("--build-proxy",)  # the root's options (see `root`), without and with a value
ROOT_VALUED = ("--db",)


def opens_tui(args: list[str]) -> bool:
    """Whether a command line holds only the root's options, so it opens the TUI and names no
    verb: then no verb group needs importing (a third of the TUI's start-up went there)."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ROOT_FLAGS or any(arg.startswith(f"{o}=") for o in ROOT_VALUED):
            i += 1
        elif arg in ROOT_VALUED and i + 1 < len(args):
            i += 2
        else:
            return False
    return True


def main() -> None:
    if not opens_tui(sys.argv[1:]):
        _register()
    app()
