"""`depthtui env serve TASKS`: the RL environment over OpenEnv's HTTP and WebSocket contract
(docs/rl.md). Every session's episodes are stored episodes (mode `rl`)."""

from __future__ import annotations

import signal
import time
from typing import Annotated

import typer

from depthtui.commands.common import DbOption, console, fail

env_app = typer.Typer(help="The RL environment (docs/rl.md).", no_args_is_help=True)


@env_app.command("serve")
def serve(
    tasks: Annotated[
        list[str], typer.Argument(help="Task or dataset folders, task ids or dataset names.")
    ],
    port: Annotated[int, typer.Option(help="Port to serve on.")] = 8000,
    host: Annotated[str, typer.Option(help="Address to bind (0.0.0.0 for other machines).")] = (
        "127.0.0.1"
    ),
    faults: Annotated[
        str, typer.Option(help="Fault family for resets that name none (or clean).")
    ] = "clean",
    budget: Annotated[int | None, typer.Option(help="Stated command budget.", min=1)] = None,
    cap: Annotated[int | None, typer.Option(help="Stated turn cap.", min=1)] = None,
    prompt: Annotated[str, typer.Option(help="System prompt name (prompts/).")] = "general",
    planted: Annotated[str, typer.Option(help="Planted files: none | sibling | full.")] = "full",
    db: DbOption = None,
) -> None:
    """Serve TASKS as an OpenEnv environment until Ctrl-C: POST /reset, POST /step, GET /state,
    /health, /schema and the /ws session OpenEnv's client speaks."""
    import os

    from engine.rl import environment_factory
    from engine.rl.server import serve as start

    try:
        factory = environment_factory(
            tasks,
            db=db or os.environ.get("DEPTHTUI_DB") or None,  # None: the default store
            faults=faults,
            budget=budget,
            cap=cap,
            prompt=prompt,
            planted=planted,
        )
    except ValueError as exc:
        fail(str(exc))
    try:
        server = start(factory, host, port)
    except OSError as exc:
        fail(f"cannot listen on {host}:{port}: {exc}")
    # SIGTERM (a supervisor, a test) stops it as Ctrl-C does: sessions end, containers go.
    signal.signal(signal.SIGTERM, _interrupt)
    ids = ", ".join(factory.config.task_ids)  # type: ignore[attr-defined]
    console.print(f"serving {ids} on http://{host}:{server.server_port} (Ctrl-C stops)")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def register(app: typer.Typer) -> None:
    app.add_typer(env_app, name="env")
