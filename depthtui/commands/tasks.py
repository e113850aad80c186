"""`depthtui tasks ...`: load task folders into the store, list them, show one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from depthtui.commands.common import (
    DbOption,
    JsonOption,
    console,
    err_console,
    fail,
    open_store,
    print_json,
)
from store.db import default_path

tasks_app = typer.Typer(
    help="Load task folders (Harbor, Endless Terminals, depthtui datasets) into the store, list "
    "them and show one.",
    no_args_is_help=True,
)


def _short(path: Path | str) -> str:
    """A path relative to the working directory when it is inside it."""
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("..") else rel


@tasks_app.command(
    "import",
    help="Load task folders into the store. Each PATH is a task folder or a dataset folder (a "
    "folder of task folders, optionally with a dataset.toml). Formats: Harbor (task.toml with "
    "instruction.md, or steps), Endless Terminals (Harbor layout, or task.json + "
    "container.def). Broken folders are listed with the reason and skipped; re-importing a "
    "task replaces it. Exits 1 when no task loaded.",
)
def import_tasks(
    paths: Annotated[
        list[Path],
        typer.Argument(help="Task folders or dataset folders.", show_default=False),
    ],
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    from engine.tasks.harbor import SERVICES_NOTE
    from engine.tasks.importing import import_paths

    store = open_store(db)
    with store:
        imported = import_paths(store, paths)
    tasks, infos, errors = imported.tasks, imported.datasets, imported.errors
    warned = [t for t in tasks if t.warnings]
    needy = [t for t in tasks if t.needs]
    if json_out:
        print_json(
            {
                "store": str(store.path),
                "loaded": [t.id for t in tasks],
                "failed": [
                    {"path": str(e.folder or e.path), "field": e.field, "message": str(e)}
                    for e in errors
                ],
                "warnings": {t.id: list(t.warnings) for t in warned},
                # Loaded, but one offline container cannot give them what they need.
                "needs": {t.id: list(t.needs) for t in needy},
                # Graded beside the services their image's ENTRYPOINT starts.
                "entrypoint_services": [
                    t.id for t in tasks if any(SERVICES_NOTE in w for w in t.warnings)
                ],
            }
        )
    else:
        for error in errors:
            where = _short(error.folder) if error.folder is not None else _short(error.path)
            err_console.print(
                Text.assemble(("✗ ", "bold red"), (where, "bold"), "\n  ", _short_message(error))
            )
        for task in needy:
            err_console.print(
                Text.assemble(
                    ("! ", "bold yellow"),
                    (task.id, "bold"),
                    " cannot be measured here: ",
                    "; ".join(task.needs),
                )
            )
        for task in tasks:
            served = [w for w in task.warnings if SERVICES_NOTE in w]
            if served:
                err_console.print(
                    Text.assemble(("i ", "bold cyan"), (task.id, "bold"), ": ", served[0])
                )
        summary = Text.assemble(
            ("Imported ", ""),
            (f"{len(tasks)} task(s)", "bold green" if tasks else "bold red"),
            f" from {len(infos)} dataset(s); ",
            (f"{len(errors)} failed", "bold red" if errors else ""),
            f"; {len(warned)} with warnings (see `depthtui tasks show ID`).",
        )
        console.print(summary)
        console.print(Text(f"store: {store.path}", style="dim"))
    if not tasks:
        raise typer.Exit(1)


def _short_message(error: Any) -> str:
    text = str(error)
    return text.replace(str(error.path), _short(error.path), 1)


def _reader(db: Path | None) -> Any:
    path = Path(db).expanduser() if db is not None else default_path()
    if not path.exists():
        fail(f"{path}: no store here yet; run `depthtui tasks import PATH` first")
    return open_store(path)


@tasks_app.command(
    "list",
    help="List imported tasks: id, dataset, format, segments, work W (non-blank, non-comment "
    "lines of the reference solution; '?' when there is none), verifier and warnings.",
)
def list_tasks(
    dataset: Annotated[
        str | None,
        typer.Option("--dataset", "-d", help="Only this dataset (its folder name)."),
    ] = None,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    from store import tasks as task_store

    with _reader(db) as store:
        rows = task_store.list_tasks(store, dataset)
        known = task_store.datasets(store)
        errors = task_store.task_errors(store, dataset)
    if dataset is not None and not any(d["name"] == dataset for d in known):
        names = ", ".join(d["name"] for d in known) or "none"
        fail(f"no dataset '{dataset}' in the store (datasets: {names})")
    if json_out:
        print_json(rows)
        return
    if not rows:
        console.print("No tasks yet. Import some with `depthtui tasks import PATH`.")
    else:
        table = Table(box=None, header_style="bold", pad_edge=False)
        table.add_column("id", overflow="fold")
        for name, justify in [
            ("dataset", "left"),
            ("format", "left"),
            ("segments", "right"),
            ("W", "right"),
            ("verifier", "left"),
            ("warnings", "right"),
        ]:
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        for row in rows:
            table.add_row(
                row["id"],
                row["dataset"],
                row["format"],
                str(row["segments"]),
                "?" if row["work"] is None else str(row["work"]),
                row["verifier_kind"],
                str(len(row["warnings"])) if row["warnings"] else "",
            )
        console.print(table)
    groups = {d["name"]: d["group"] for d in known}
    shown = sorted({r["dataset"] for r in rows})
    label = ", ".join(f"{n} ({groups[n]})" if groups.get(n) else n for n in shown)
    console.print(Text(f"{len(rows)} task(s)" + (f" in {label}" if label else ""), style="dim"))
    if errors:
        console.print(
            Text(
                f"{len(errors)} folder(s) failed to load; `depthtui tasks import` on them "
                "says why.",
                style="yellow",
            )
        )


def _seconds(value: float | None) -> str:
    return "none" if value is None else f"{value:g} s"


@tasks_app.command(
    "show",
    help="Show one task: its instruction(s), segments, limits, environment and warnings. ID is "
    "the full id (dataset/folder) or a folder name that only one task has.",
)
def show_task(
    task_id: Annotated[str, typer.Argument(metavar="ID", help="Task id or unique folder name.")],
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    from store import tasks as task_store

    with _reader(db) as store:
        row = task_store.get_task(store, task_id)
        matches = task_store.find_task_ids(store, task_id) if row is None else []
    if row is None:
        if len(matches) > 1:
            fail(f"'{task_id}' names several tasks: {', '.join(matches)}; give the full id")
        fail(f"no task '{task_id}' in the store; `depthtui tasks list` shows the ids")
    if json_out:
        print_json(row)
        return
    console.print(_render(row))


def _in_task(path: str | None, row: dict[str, Any]) -> str:
    """A path inside the task folder, relative to it."""
    if not path:
        return ""
    try:
        return Path(path).relative_to(row["source_path"]).as_posix()
    except ValueError:
        return _short(path)


def _render(row: dict[str, Any]) -> Group:
    task = row["task"]
    env, limits = task["environment"], task["limits"]
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column()
    recipe = (
        f"image {env['image']}"
        if env["image"]
        else "generated Dockerfile (from container.def)"
        if env["dockerfile_text"]
        else f"build {_in_task(env['dockerfile'], row)}"
    )
    if env["image"] and env["dockerfile"]:
        recipe += f" (Dockerfile {_in_task(env['dockerfile'], row)} as a fallback)"
    work = "?" if row["work"] is None else str(row["work"])
    for name, value in [
        ("name", task["name"]),
        ("dataset", row["dataset"]),
        ("format", row["format"]),
        ("source", _short(row["source_path"])),
        ("content hash", row["content_hash"][:16]),
        ("segments", f"{row['segments']} (reward strategy {task['reward_strategy']})"),
        ("work W", work),
        ("verifier", row["verifier_kind"]),
        ("agent", f"{task['agent_user']} (uid {task['agent_uid']}), home {task['home']}"),
        ("workdir", task["workdir"]),
        ("environment", recipe),
        ("private files", ", ".join(env["private_files"]) or "none"),
        ("network", "asked for (runs without)" if env["allow_internet"] else "none"),
        (
            "limits",
            f"{limits['cpus']:g} CPU, {limits['memory_mb']} MB, {limits['pids']} processes, "
            f"agent {_seconds(limits['agent_timeout_sec'])}, "
            f"verifier {_seconds(limits['verifier_timeout_sec'])}, "
            f"build {_seconds(env['build_timeout_sec'])}",
        ),
    ]:
        facts.add_row(name, Text(str(value)))
    if task["description"]:
        facts.add_row("description", Text(task["description"]))
    parts: list[Any] = [Panel(facts, title=Text(row["id"], style="bold"), title_align="left")]
    if row["warnings"]:
        parts.append(
            Panel(
                Text("\n".join(f"• {w}" for w in row["warnings"])),
                title="warnings",
                title_align="left",
                border_style="yellow",
            )
        )
    for segment in row["segment_rows"]:
        lim = segment["limits"]
        info = Text.assemble(
            (f"W {'?' if segment['work'] is None else segment['work']}", "bold"),
            f" · agent {_seconds(lim['agent_timeout_sec'])}"
            f" · verifier {_seconds(lim['verifier_timeout_sec'])}",
            f" · min_reward {lim['min_reward']}" if lim["min_reward"] is not None else "",
            f" · healthcheck `{lim['healthcheck']['command']}`" if lim["healthcheck"] else "",
            f" · workdir files {_in_task(lim['workdir_dir'], row)}/" if lim["workdir_dir"] else "",
            "\ntests: " + (", ".join(sorted(segment["tests"])) or "none"),
            "\n\n",
            Text(segment["instruction"].rstrip()),
        )
        title = f"segment {segment['idx'] + 1}/{row['segments']}: {segment['name']}"
        parts.append(Panel(info, title=title, title_align="left", border_style="blue"))
    return Group(*parts)


def register(app: typer.Typer) -> None:
    app.add_typer(tasks_app, name="tasks")
