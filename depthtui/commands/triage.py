"""`depthtui triage export`: the triage labels and notes as JSON or CSV."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from depthtui.commands.common import DbOption, fail, open_store
from store.db import default_path
from store.triage import QUEUES, export_rows, queue_items, render_export

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


@triage_app.command("list")
def list_queue(
    queue: Annotated[
        str, typer.Option("--queue", help=f"Which queue: {' | '.join(QUEUES)}.")
    ] = "false_positive",
    reason: Annotated[
        str | None,
        typer.Option("--reason", help="Only episodes with a reason containing this text."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Write a JSON list.")] = False,
    db: DbOption = None,
) -> None:
    """Print one triage queue: each episode with every reason it is there and its label."""
    import json
    from dataclasses import asdict

    if queue not in QUEUES:
        fail(f"--queue {queue!r}: expected one of {', '.join(QUEUES)}")
    path = db or default_path()
    if not Path(path).exists():
        fail(f"{path}: no store here yet (run `depthtui tasks import` first)")
    store = open_store(path)
    try:
        items = queue_items(store.conn, queue)
    finally:
        store.close()
    if reason:
        needle = reason.lower()
        items = [i for i in items if any(needle in r.lower() for r in i.reasons)]
    if json_out:
        typer.echo(json.dumps([{**asdict(i), "reasons": list(i.reasons)} for i in items], indent=2))
        return
    if not items:
        typer.echo(f"the {queue} queue is empty")
        return
    for i in items:
        label = i.label or "unlabelled"
        typer.echo(f"episode {i.episode_id}  {i.task_id}  {i.agent}  {i.outcome}  [{label}]")
        for r in i.reasons:
            typer.echo(f"    - {r}")


def register(app: typer.Typer) -> None:
    app.add_typer(triage_app, name="triage")
