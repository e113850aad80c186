"""`depthtui sandbox ...`: housekeeping of the Docker sandboxes."""

from __future__ import annotations

from typing import Annotated

import typer

from depthtui.commands.common import JsonOption, console, fail, print_json

sandbox_app = typer.Typer(help="Housekeeping of the Docker sandboxes.", no_args_is_help=True)


@sandbox_app.command(
    "gc",
    help="Remove the containers and snapshot images that depthtui processes left behind when "
    "they died (their owner label names a process that no longer runs). With --all, remove "
    "every depthtui container and snapshot, also those of processes still running. Task "
    "images are a build cache and stay.",
)
def gc_command(
    everything: Annotated[
        bool,
        typer.Option("--all", help="Also remove those of running depthtui processes."),
    ] = False,
    json_out: JsonOption = False,
) -> None:
    from engine.sandbox.base import SandboxError
    from engine.sandbox.gc import gc

    try:
        result = gc(everything=everything)
    except SandboxError as exc:
        fail(str(exc))
    if json_out:
        print_json({"containers": result.containers, "images": result.images})
        return
    console.print(
        f"removed {len(result.containers)} container(s) and {len(result.images)} snapshot image(s)"
    )
    for cid in result.containers:
        console.print(f"  container {cid[:12]}")
    for image_id in result.images:
        console.print(f"  image {image_id.removeprefix('sha256:')[:12]}")


def register(app: typer.Typer) -> None:
    app.add_typer(sandbox_app, name="sandbox")
