"""`depthtui doctor` (is everything a run needs in place?) and `depthtui demo` (the main job on
the bundled demo dataset)."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from depthtui.commands.common import DbOption, JsonOption, console, fail, print_json

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "tasks" / "demo"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


def _docker() -> list[Check]:
    from engine.sandbox.base import SandboxError
    from engine.sandbox.dockerapi import connect, engine_address

    try:
        client = connect(timeout=10)
        version = client.version().get("Version", "?")
    except SandboxError as exc:
        return [
            Check("docker engine", False, exc.detail, "docker/setup.sh (as root)"),
            Check("base image", False, "needs the Docker engine", "docker/setup.sh"),
        ]
    checks = [Check("docker engine", True, f"{version} at {engine_address()}")]
    try:
        image = client.images.get("depthtui/base:bookworm")
        checks.append(Check("base image", True, f"depthtui/base:bookworm {image.short_id}"))
    except Exception:  # docker.errors.ImageNotFound and friends
        checks.append(
            Check("base image", False, "depthtui/base:bookworm is missing", "docker/setup.sh")
        )
    return checks


def _toolchain() -> Check:
    from engine.verify.toolchain import ToolchainError, load_toolchain

    try:
        tc = load_toolchain()
    except ToolchainError as exc:
        return Check("verifier toolchain", False, str(exc), "docker/toolchain.sh")
    return Check("verifier toolchain", True, f"{tc.path} ({tc.sha256[:12]})")


def _store(db: Path | None) -> Check:
    from store.db import Store, StoreError, default_path
    from store.episodes import count_episodes
    from store.tasks import count_tasks

    path = Path(db) if db else default_path()
    if not path.exists():
        return Check(
            "store",
            False,
            f"{path} does not exist yet",
            "depthtui tasks import tasks/demo",
            required=False,
        )
    try:
        with Store(path) as store:
            tasks = count_tasks(store)
            episodes = count_episodes(store)
            version = store.version
    except StoreError as exc:
        return Check("store", False, str(exc), f"move {path} aside, then import tasks again")
    return Check("store", True, f"{path}: schema {version}, {tasks} task(s), {episodes} episode(s)")


def _models(models_file: Path | None) -> list[Check]:
    from engine.agents.registry import RegistryError, load_registry, resolve_models_path

    path, _ = resolve_models_path(models_file)
    try:
        registry = load_registry(models_file)
    except RegistryError as exc:
        return [Check("model registry", False, str(exc), f"fix {path}")]
    chat = [m for m in registry.models.values() if not m.builtin]
    if not chat:
        return [
            Check(
                "model registry",
                False,
                f"no model besides oracle, nop and replay ({path} has none)",
                f"mkdir -p {path.parent} && cp {ROOT / 'models.example.toml'} {path}",
                required=False,
            )
        ]
    checks = [Check("model registry", True, f"{path}: {len(chat)} model(s)")]
    for m in chat:
        if m.api_key_env and not os.environ.get(m.api_key_env):
            checks.append(
                Check(
                    f"model {m.name}",
                    False,
                    f"${m.api_key_env} is not set",
                    f"export {m.api_key_env}=...",
                    required=False,
                )
            )
    return checks


def _extras() -> list[Check]:
    vllm = shutil.which(os.environ.get("DEPTHTUI_VLLM", "vllm"))
    return [
        Check(
            "vllm (optional)",
            vllm is not None,
            vllm or "not installed: `depthtui serve` needs it on a GPU machine",
            "pip install 'depthtui[vllm]'",
            required=False,
        )
    ]


def doctor(
    models: Path | None = typer.Option(None, "--models", help="The model registry to check."),
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Check each prerequisite (Docker engine, base image, verifier toolchain, store, model
    registry) and print what is missing with the command that fixes it."""
    checks = [*_docker(), _toolchain(), _store(db), *_models(models), *_extras()]
    if json_out:
        print_json([c.__dict__ for c in checks])
    else:
        table = Table(title="depthtui doctor", title_justify="left")
        for col in ("", "check", "state", "fix"):
            table.add_column(col)
        for c in checks:
            mark = "[green]✓[/]" if c.ok else ("[red]✗[/]" if c.required else "[yellow]![/]")
            table.add_row(mark, c.name, escape(c.detail), "" if c.ok else escape(c.fix))
        console.print(table)
    if any(c.required and not c.ok for c in checks):
        raise typer.Exit(1)


def demo(
    workers: int = typer.Option(2, "--workers", "-w", min=1, help="Tasks run in parallel."),
    db: DbOption = None,
) -> None:
    """The main job on the bundled demo dataset: import it, check every task (the reference
    passes, doing nothing fails) in real containers, print the report, and say how to open the
    TUI."""
    if not DEMO.is_dir():
        fail(f"{DEMO}: the bundled demo dataset is not here (run from a checkout of depthtui)")
    from depthtui.commands.run import check

    console.print(f"[bold]depthtui demo[/]: checking every task of {DEMO}", highlight=False)
    try:
        check([str(DEMO)], workers=workers, db=db)
    except typer.Exit as exc:
        if exc.exit_code:
            raise
    from depthtui.commands.report import report

    report(db=db)
    where = f" --db {db}" if db else ""
    console.print(
        f"\nOpen the TUI on these runs with [bold]depthtui{where}[/] (or `depthtui tui{where}`); "
        "measure depth with `depthtui ladder tasks/demo --model NAME` once a model is in your "
        "registry (`depthtui models list`).",
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    app.command("doctor", help=" ".join(doctor.__doc__.split()))(doctor)
    app.command("demo", help=" ".join(demo.__doc__.split()))(demo)
