"""`depthtui export harbor|training` and `depthtui import harbor`: stored runs out as Harbor job
folders (ATIF trajectories, so Harbor's viewer opens them) or training rows, and Harbor trial
folders made elsewhere into the store, so they can be browsed and reported."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from depthtui.commands.common import (
    DbOption,
    JsonOption,
    console,
    err_console,
    fail,
    open_store,
    print_json,
)
from store.db import Store

export_app = typer.Typer(
    help="Write stored runs out: Harbor-shaped job folders with ATIF trajectories, or training "
    "rows (passing segments as chat messages with tool calls) as JSONL.",
    no_args_is_help=True,
)
import_app = typer.Typer(
    help="Load runs made elsewhere into the store (Harbor trial folders with ATIF trajectories).",
    no_args_is_help=True,
)

JobOpt = Annotated[int | None, typer.Option("--job", help="Only the episodes of this job.")]
TaskOpt = Annotated[
    list[str] | None,
    typer.Option("--task", help="Only these tasks (ids, folder names or datasets; repeatable)."),
]
ModelOpt = Annotated[
    str | None, typer.Option("--model", "-m", help="Only this agent's runs (a registry name).")
]
ModeOpt = Annotated[
    str | None,
    typer.Option(
        "--mode", help="Only runs of this mode: check, validate, free, ladder, audit, episodes."
    ),
]
EpisodeOpt = Annotated[
    list[int] | None, typer.Option("--episode", help="Only these episodes (repeatable).")
]


def _task_ids(store: Store, keys: list[str] | None) -> list[str] | None:
    from store import tasks as task_store

    if not keys:
        return None
    ids: list[str] = []
    for key in keys:
        found = task_store.find_task_ids(store, key) or [
            t["id"] for t in task_store.list_tasks(store, dataset=key)
        ]
        if not found:
            fail(f"--task {key}: no such task or dataset in the store")
        ids += found
    return ids


def _select(
    store: Store,
    job: int | None,
    task: list[str] | None,
    model: str | None,
    mode: str | None,
    episode: list[int] | None,
) -> list[int]:
    from engine.analysis.exports import select_episodes
    from store.jobs import get_job

    if job is not None and get_job(store, job) is None:
        fail(f"--job {job}: no such job in {store.path}")
    ids = select_episodes(
        store.conn,
        episode_ids=episode or None,
        job_id=job,
        task_ids=_task_ids(store, task),
        model=model,
        mode=mode,
    )
    if not ids:
        asked = _describe_filters(job, task, model, mode, episode)
        fail(f"no finished episode in {store.path} matches {asked}")
    return ids


def _describe_filters(
    job: int | None,
    task: list[str] | None,
    model: str | None,
    mode: str | None,
    episode: list[int] | None,
) -> str:
    parts = []
    if job is not None:
        parts.append(f"--job {job}")
    parts += [f"--task {t}" for t in task or []]
    if model:
        parts.append(f"--model {model}")
    if mode:
        parts.append(f"--mode {mode}")
    parts += [f"--episode {e}" for e in episode or []]
    return " ".join(parts) or "(no filter)"


@export_app.command(
    "harbor",
    help="Write one Harbor job folder (OUT/NAME/) with one trial folder per finished episode: "
    "result.json, config.json, agent/trajectory.json (ATIF v1.4), verifier/reward.txt (or "
    "reward.json) with the task's own reward as Harbor would have read it, verifier/ctrf.json "
    "(per-test results), verifier/test-stdout.txt, and depthtui.json (depthtui's own record: "
    "partial-credit reward, outcome, fault, oracle events, exit codes), which `import harbor` "
    "reads back. Filters combine; with none, every finished episode is written.",
)
def export_harbor(
    out: Annotated[Path, typer.Option("--out", help="The folder to write the job folder in.")],
    name: Annotated[
        str | None,
        typer.Option("--name", help="The job folder's name (default: job-<id> or depthtui)."),
    ] = None,
    job: JobOpt = None,
    task: TaskOpt = None,
    model: ModelOpt = None,
    mode: ModeOpt = None,
    episode: EpisodeOpt = None,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    from engine.analysis.exports import export_harbor as write_job
    from store.episodes import forgeable_ids

    store = open_store(db)
    ids = _select(store, job, task, model, mode, episode)
    job_name = name or (f"job-{job}" if job is not None else "depthtui")
    if out.exists() and not out.is_dir():
        fail(f"--out {out}: exists and is not a folder")
    try:
        job_dir = write_job(store.conn, ids, out, job_name)
    except OSError as exc:
        fail(f"cannot write under {out}: {exc}")
    forgeable = forgeable_ids(store, ids)
    if json_out:
        print_json(
            {"job_dir": str(job_dir), "trials": len(ids), "episodes": ids, "forgeable": forgeable}
        )
        return
    apart = f" ({len(forgeable)} forgeable by agent code)" if forgeable else ""
    console.print(f"wrote {len(ids)} trial(s) to {job_dir}{apart}", highlight=False)


@export_app.command(
    "training",
    help="Write training rows as JSONL: one row per passing segment of a chat model's episode "
    "without error (the conversation from the system prompt through that segment's last "
    "turn, as chat messages with tool calls). Filters as for `export harbor`.",
)
def export_training(
    out: Annotated[Path, typer.Option("--out", help="The JSONL file to write (replaced).")],
    job: JobOpt = None,
    task: TaskOpt = None,
    model: ModelOpt = None,
    mode: ModeOpt = None,
    episode: EpisodeOpt = None,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    import json

    from engine.analysis.exports import training_rows

    store = open_store(db)
    ids = _select(store, job, task, model, mode, episode)
    if out.is_dir():
        fail(f"--out {out}: is a folder; expected a .jsonl file path")
    count = 0
    episodes: set[int] = set()
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        with tmp.open("w") as fh:
            for row in training_rows(store.conn, ids):
                fh.write(json.dumps(row, default=str) + "\n")
                count += 1
                episodes.add(row["metadata"]["episode"])
        tmp.replace(out)
    except OSError as exc:
        fail(f"cannot write {out}: {exc}")
    if json_out:
        print_json({"file": str(out), "rows": count, "episodes": sorted(episodes)})
        return
    console.print(
        f"wrote {count} row(s) from {len(episodes)} of {len(ids)} episode(s) to {out}",
        highlight=False,
    )


@import_app.command(
    "harbor",
    help="Import Harbor trial folders (result.json, and agent/trajectory.json in ATIF 1.2 to "
    "1.7 where the agent wrote one) into the store. Each PATH is a trial folder, a job folder "
    "or a folder of jobs, as Harbor 0.26 writes them; a trial without a trajectory (oracle, "
    "nop, installed agents) comes in with its result, reward, timings and verifier output, and "
    "no turns; verifier/ctrf.json gives per-test rows. A trial `export harbor` wrote comes "
    "back from its depthtui.json as it was (outcome, reward, fault, tests, exit codes). "
    "Importing the same trial again reuses it. Exits 1 when any trial could not be read.",
)
def import_harbor(
    paths: Annotated[
        list[Path], typer.Argument(help="Trial, job or jobs folders.", show_default=False)
    ],
    dataset: Annotated[
        str,
        typer.Option("--dataset", help="Dataset for tasks the store does not know yet."),
    ] = "imported",
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    from engine.analysis.harbor_import import import_harbor as read_trials

    store = open_store(db)
    imported: list[int] = []
    reused: list[int] = []
    errors: list[str] = []
    for path in paths:
        if not path.is_dir():
            errors.append(f"{path}: no such folder")
            continue
        report = read_trials(store, path, dataset)
        imported += report.imported
        reused += report.reused
        errors += report.errors
    if json_out:
        print_json({"imported": imported, "reused": reused, "errors": errors})
    else:
        for error in errors:
            err_console.print(f"[bold red]✗[/] {error}", highlight=False)
        console.print(
            f"imported {len(imported)} episode(s), {len(reused)} already in the store"
            + (f", {len(errors)} error(s)" if errors else ""),
            highlight=False,
        )
    if errors:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(export_app, name="export")
    app.add_typer(import_app, name="import")
