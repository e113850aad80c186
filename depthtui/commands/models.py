"""`depthtui models ...`: the model registry (models.toml)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from depthtui.commands.common import JsonOption, console, err_console, fail, print_json

models_app = typer.Typer(help="The model registry: list the models you can run, check one.")

ModelsOption = Annotated[
    Path | None,
    typer.Option(
        "--models",
        help="The models file. Default: $DEPTHTUI_MODELS, else models.toml in your config "
        "directory.",
        show_default=False,
    ),
]


def _load(models: Path | None):
    from engine.agents.registry import RegistryError, load_registry

    try:
        return load_registry(models)
    except RegistryError as exc:
        fail(str(exc))


@models_app.command("list")
def list_models(models: ModelsOption = None, json_out: JsonOption = False) -> None:
    """List the models and built-in agents, and whether each one's key is set."""
    import os

    from engine.agents.registry import resolve_models_path

    registry = _load(models)
    rows = []
    for cfg in registry.models.values():
        key_state = (
            "-"
            if not cfg.api_key_env
            else ("set" if os.environ.get(cfg.api_key_env) else "missing")
        )
        rows.append(
            {
                "name": cfg.name,
                "kind": cfg.kind,
                "model": cfg.model,
                "base_url": cfg.base_url,
                "action_format": cfg.action_format if not cfg.builtin else "",
                "api_key_env": cfg.api_key_env,
                "key": key_state,
                "provider_order": list(cfg.provider.order) if cfg.provider else [],
                "priced": cfg.price is not None,
                "description": cfg.description,
            }
        )
    path, _ = resolve_models_path(models)
    source = str(registry.path) if registry.path else None
    if json_out:
        print_json({"file": source, "looked_for": str(path), "models": rows})
        return
    table = Table(title=f"models from {source}" if source else "models (built-in only)")
    table.add_column("name", no_wrap=True)
    table.add_column("kind", no_wrap=True)
    for col in ("model", "endpoint"):
        table.add_column(col, overflow="fold")
    table.add_column("format", no_wrap=True)
    table.add_column("key", overflow="fold")
    for r in rows:
        key = r["key"] if r["key"] == "-" else f"{r['api_key_env']} ({r['key']})"
        table.add_row(r["name"], r["kind"], r["model"], r["base_url"], r["action_format"], key)
    console.print(table)
    if source is None:
        err_console.print(
            f"No models file at {path}; copy models.example.toml there, or pass --models."
        )


@models_app.command("check")
def check(
    name: Annotated[str, typer.Argument(help="The model's name in the registry.")],
    models: ModelsOption = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            min=1.0,
            help="Seconds one try may wait for the reply (a CPU-served model can take minutes).",
        ),
    ] = 60.0,
    tries: Annotated[
        int,
        typer.Option(
            "--tries", min=1, help="Tries before giving up; the check stops at the first answer."
        ),
    ] = 1,
    json_out: JsonOption = False,
) -> None:
    """Send one real request to the model's endpoint, show what it answered, and say whether it
    works (and, when it does not, whether the server is slow or not there at all)."""
    from engine.agents.model_check import check_model
    from engine.agents.registry import RegistryError

    registry = _load(models)
    try:
        cfg = registry.get(name)
    except RegistryError as exc:
        fail(str(exc))
    if cfg.builtin:
        fail(f"'{name}' is a built-in agent; there is no endpoint to check")
    result = check_model(cfg, timeout_s=timeout, tries=tries)
    if json_out:
        print_json(
            {
                "name": name,
                "ok": result.ok,
                "state": result.state,
                "detail": result.detail,
                "latency_ms": round(result.latency_ms, 1),
                "issued_command": result.tool_call,
                "commands": list(result.commands),
                "reply": result.text,
                "tries": [
                    {"state": t.state, "detail": t.detail, "latency_ms": round(t.latency_ms, 1)}
                    for t in result.tries
                ],
            }
        )
        if not result.ok:
            raise typer.Exit(1)
        return
    if not result.ok:
        fail(result.detail)
    console.print(
        f"[green]ok[/]: {escape(name)} ({escape(cfg.model)} at {escape(cfg.base_url)}) answered "
        f"in {result.latency_ms:.0f} ms; {escape(result.detail)}",
        highlight=False,
    )
    # What the model said, as plain text: its words may look like markup.
    lines = result.reply_lines()
    if lines:
        console.print("it said:", highlight=False)
        for line in lines:
            console.print(f"  {line}", highlight=False, markup=False)
    for command in result.commands:
        console.print(f"  $ {command}", highlight=False, markup=False)


def register(app: typer.Typer) -> None:
    app.add_typer(models_app, name="models")
