"""`depthtui triage export`: the triage labels and notes as JSON or CSV."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from depthtui.commands.common import DbOption, fail, open_store
from store.db import default_path
from store.triage import export_rows, render_export

triage_app = typer.Typer(
    help="Triage labels given in the TUI (collateral damage, false positives)."
)


@triage_app.command("export")
def export(
    db: DbOption = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Write a JSON list (the default).")
    ] = False,
    csv_out: Annotated[bool, typer.Option("--csv", help="Write CSV with a header row.")] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write to this file instead of standard output.")
    ] = None,
) -> None:
    """Export every triage label with its note, why the episode is in its queue, the collateral
    path, and the episode's task, agent, mode and fault."""
    if json_out and csv_out:
        fail("--json and --csv: choose one format")
    path = db or default_path()
    if not Path(path).exists():
        fail(f"{path}: no store here yet (run `depthtui tasks import` first)")
    store = open_store(path)
    try:
        text = render_export(export_rows(store), "csv" if csv_out else "json")
    finally:
        store.close()
    if out is None:
        typer.echo(text, nl=False)
        return
    try:
        out.write_text(text)
    except OSError as exc:
        fail(f"{out}: cannot write the export ({exc.strerror})")
    typer.echo(f"wrote labels to {out}", err=True)


def register(app: typer.Typer) -> None:
    app.add_typer(triage_app, name="triage")
