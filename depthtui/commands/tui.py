"""`depthtui` with no command, and `depthtui tui --db PATH`: open the terminal UI; with `--web`,
serve the same app to a browser."""

from __future__ import annotations

import shlex
import sys
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


def web_command(path: Path) -> str:
    """The command each browser session runs: this Python's `depthtui tui` on the same store."""
    return shlex.join([sys.executable, "-m", "depthtui", "tui", "--db", str(path)])


def serve_web(db: Path | None, host: str, port: int) -> None:
    """Serve the TUI to browsers with textual-serve: each page load runs its own `depthtui tui`
    on the store, its screen drawn in the page. Exits with a message if it cannot."""
    path = (Path(db).expanduser() if db is not None else default_path()).resolve()
    try:
        check_store(path)
    except StoreError as exc:
        fail(str(exc))
    try:
        from textual_serve.server import Server
    except ImportError:
        fail("`--web` needs textual-serve: pip install 'depthtui[web]' (or textual-serve)")
    Server(web_command(path), host=host, port=port, title=f"depthtui · {path.name}").serve()


def register(app: typer.Typer) -> None:
    @app.command("tui")
    def tui(
        web: Annotated[
            bool,
            typer.Option(
                "--web",
                help="Serve the TUI to a browser (textual-serve) at http://HOST:PORT instead.",
            ),
        ] = False,
        port: Annotated[int, typer.Option("--port", min=1, max=65535, help="--web: the port.")] = (
            8000
        ),
        host: Annotated[
            str,
            typer.Option(
                "--host",
                help="--web: the address to listen on. The default, 127.0.0.1, is this machine "
                "only; 0.0.0.0 exposes it to the network, and anyone who reaches the port "
                "drives the TUI with your rights (reads every transcript, launches jobs). "
                "Prefer an SSH tunnel: ssh -L 8000:127.0.0.1:8000 HOST.",
            ),
        ] = "127.0.0.1",
        db: DbOption = None,
    ) -> None:
        """Open the terminal UI: browse tasks and ladders, replay episodes, triage, launch jobs."""
        if web:
            serve_web(db, host, port)
        else:
            open_tui(db)
