"""`depthtui` with no command, and `depthtui tui --db PATH`: open the terminal UI (`--web`: serve
it to browsers)."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Annotated

import typer

from depthtui.commands.common import DbOption, fail
from store.db import SCHEMA_VERSION, Store, StoreError, default_path, schema_and_tables


def check_store(path: Path) -> None:
    """Fail with one clear message unless `path` is a store the TUI can read (upgrading an older
    depthtui store in place first)."""
    version, tables = schema_and_tables(path)  # StoreError: missing, not a database, newer
    if version == 0 and tables:
        raise StoreError(
            f"{path}: an SQLite file, but not a depthtui store (it has tables "
            f"{', '.join(sorted(tables)[:5])} and no depthtui schema version)"
        )
    if version < SCHEMA_VERSION:
        Store(path).close()  # runs the missing migrations


def open_tui(db: Path | None) -> None:
    """Open the TUI on `db` (default: the default store). Exits with a message if it cannot."""
    path = Path(db).expanduser() if db is not None else default_path()
    try:
        check_store(path)
    except StoreError as exc:
        fail(str(exc))
    from depthtui.app import DepthApp  # Textual is imported only when the TUI is opened

    DepthApp(path, prewarm=True).run()
    # The terminal is back and the store closed (DepthApp.on_unmount); what is left is the
    # interpreter's exit, whose last garbage collection walked every widget, style and cached
    # row the session built: 0.7-2.3 s between the app returning and the process ending at
    # load 10 on the synthetic store. Those objects die with the process anyway; frozen, the
    # collection skips them (atexit handlers and finalizers still run).
    gc.freeze()


def serve_tui(db: Path | None, host: str, port: int, public_url: str | None) -> None:
    """`--web`: check the store here (errors show in this terminal, not in a browser), then
    serve the TUI on it until interrupted."""
    from depthtui import web

    path = Path(db).expanduser().resolve() if db is not None else default_path()
    try:
        check_store(path)
        web.serve(path, host, port, public_url)
    except (StoreError, web.WebError) as exc:
        fail(str(exc))


def register(app: typer.Typer) -> None:
    from depthtui.web import DEFAULT_HOST, DEFAULT_PORT

    @app.command("tui")
    def tui(
        db: DbOption = None,
        web: Annotated[
            bool,
            typer.Option(
                "--web",
                help="Serve the TUI to web browsers (textual-serve) instead of this terminal. "
                "Whoever reaches the port controls the TUI and can launch jobs: see docs/tui.md.",
            ),
        ] = False,
        host: Annotated[
            str, typer.Option("--host", help="With --web: the address to listen on.")
        ] = DEFAULT_HOST,
        port: Annotated[
            int, typer.Option("--port", min=1, max=65535, help="With --web: the port.")
        ] = DEFAULT_PORT,
        public_url: Annotated[
            str | None,
            typer.Option(
                "--public-url",
                help="With --web: the URL browsers reach the server by (behind a proxy or a "
                "tunnel). Default: http://HOST:PORT.",
                show_default=False,
            ),
        ] = None,
    ) -> None:
        """Open the terminal UI: browse tasks and ladders, replay episodes, triage, launch jobs."""
        if web:
            serve_tui(db, host, port, public_url)
        elif (host, port, public_url) != (DEFAULT_HOST, DEFAULT_PORT, None):
            fail("--host, --port and --public-url go with --web")
        else:
            open_tui(db)
