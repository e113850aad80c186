"""`depthtui` with no command, and `depthtui tui --db PATH`: open the terminal UI."""

from __future__ import annotations

from pathlib import Path

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

    DepthApp(path).run()


def register(app: typer.Typer) -> None:
    @app.command("tui")
    def tui(db: DbOption = None) -> None:
        """Open the terminal UI: browse tasks and ladders, replay episodes, triage, launch jobs."""
        open_tui(db)
