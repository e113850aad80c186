"""`depthtui triage export`: the triage labels and notes as JSON or CSV."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from depthtui.commands.common import DbOption, fail, open_store
from store.db import default_path
from store.triage import list_labels

triage_app = typer.Typer(
    help="Triage labels given in the TUI (collateral damage, false positives)."
)

FIELDS = (
    "episode_id",
    "queue",
    "label",
    "note",
    "task_id",
    "agent",
    "mode",
    "created_at",
    "updated_at",
)


def render(labels: list, fmt: str) -> str:
    rows = [{k: asdict(label)[k] for k in FIELDS} for label in labels]
    if fmt == "json":
        return json.dumps(rows, indent=2) + "\n"
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


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
    """Export every triage label with its note, episode, task, agent and mode."""
    if json_out and csv_out:
        fail("--json and --csv: choose one format")
    path = db or default_path()
    if not Path(path).exists():
        fail(f"{path}: no store here yet (run `depthtui tasks import` first)")
    store = open_store(path)
    try:
        text = render(list_labels(store), "csv" if csv_out else "json")
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
