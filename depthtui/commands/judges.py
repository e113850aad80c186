"""`depthtui review` and `depthtui analyze`: judge models over tasks and episodes
(engine/judges/). What they print is the judge's word, said as the judge's."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from depthtui.commands.common import DbOption, JsonOption, console, fail, open_store, print_json

JudgeOpt = Annotated[
    str, typer.Option("--model", "-m", help="The judge: a model from the registry.")
]
ModelsOpt = Annotated[
    Path | None,
    typer.Option("--models", help="The model registry (models.toml).", envvar="DEPTHTUI_MODELS"),
]
MaxCostOpt = Annotated[
    float | None,
    typer.Option("--max-cost", min=0, help="Start no judge call once this many USD are spent."),
]


def _registry(models: Path | None):
    from engine.agents.registry import RegistryError, load_registry

    try:
        return load_registry(models)
    except RegistryError as exc:
        fail(str(exc))


def _check_judge(registry, judge: str) -> None:
    from engine.agents.registry import RegistryError

    try:
        config = registry.get(judge)
    except RegistryError as exc:
        fail(str(exc))
    if config.builtin:
        fail(f"-m {judge}: a built-in agent, not a model that can judge")


def review(
    tasks: Annotated[list[str], typer.Argument(help="Task folders, dataset folders or task ids.")],
    judge: JudgeOpt,
    models: ModelsOpt = None,
    max_cost: MaxCostOpt = None,
    json_out: JsonOption = False,
    db: DbOption = None,
) -> None:
    """A judge model reads each task's instruction, tests, solution and environment files and
    reports findings (unstated_requirement, contradiction, answer_exposed, presence_only_tests,
    needs_live_service, hardcoded_solution), each citing file:line; a finding whose line does
    not exist is dropped, saying why. Stored per task version, judge and prompt hash: a rerun
    reuses it. Exits 1 when the judge's endpoint failed (an infrastructure error)."""
    from engine.judges.run import Budget, review_tasks
    from engine.protocol.common import resolve_tasks

    registry = _registry(models)
    _check_judge(registry, judge)
    store = open_store(db)
    try:
        resolved = resolve_tasks(store, tasks)
        for error in resolved.errors:
            console.print(f"[red]✗[/] {escape(str(error))}", highlight=False)
        if not resolved.task_ids:
            fail("no task to review")
        rows = review_tasks(store, registry, judge, resolved.task_ids, Budget(max_cost))
    finally:
        store.close()
    _print(rows, "task", json_out)


def analyze(
    episodes: Annotated[
        list[str] | None,
        typer.Argument(help="Episode ids (or use --task / --passing).", show_default=False),
    ] = None,
    judge: JudgeOpt = "",
    task: Annotated[
        list[str] | None, typer.Option("--task", help="Every finished episode of this task.")
    ] = None,
    passing: Annotated[
        bool, typer.Option("--passing", help="Only passing episodes (of --task, or all).")
    ] = False,
    models: ModelsOpt = None,
    max_cost: MaxCostOpt = None,
    json_out: JsonOption = False,
    db: DbOption = None,
) -> None:
    """A judge model reads each episode's transcript and the safety oracle's events and says
    whether the agent gamed the grader (tests_read, tests_changed, reward_written,
    solution_read, hardcoded_output), citing turns; a finding citing a turn that does not
    exist is dropped, saying why. Stored per episode, judge and prompt hash (a rerun reuses
    it); episodes with findings join the false-positive triage queue (reason judge_analyze)."""
    from engine.judges.run import Budget, analyze_episodes

    if not judge:
        fail("--model/-m: name the judge (a model from the registry)")
    registry = _registry(models)
    _check_judge(registry, judge)
    store = open_store(db)
    try:
        ids = _episode_ids(store, episodes or [], task or [], passing)
        if not ids:
            fail("no episode to analyze")
        rows = analyze_episodes(store, registry, judge, ids, Budget(max_cost))
    finally:
        store.close()
    _print(rows, "episode", json_out)


def _episode_ids(store, episodes: list[str], tasks: list[str], passing: bool) -> list[int]:
    ids: list[int] = []
    for e in episodes:
        if not e.isdigit():
            fail(f"episode {e!r}: expected an episode id (a number)")
        ids.append(int(e))
    if tasks or (passing and not episodes):
        sql = "SELECT id FROM episodes WHERE status = 'done' AND mode != 'validate'"
        args: list[Any] = []
        if tasks:
            sql += f" AND task_id IN ({','.join('?' * len(tasks))})"
            args += tasks
        if passing:
            sql += " AND outcome = 'pass'"
        ids += [r[0] for r in store.conn.execute(sql + " ORDER BY id", args)]
    elif passing:
        ok = {r[0] for r in store.conn.execute("SELECT id FROM episodes WHERE outcome = 'pass'")}
        ids = [i for i in ids if i in ok]
    return list(dict.fromkeys(ids))


def _print(rows: list[dict[str, Any]], what: str, json_out: bool) -> None:
    infra = any(r.get("status") == "infra_error" for r in rows)
    if json_out:
        print_json(rows)
    else:
        table = Table(title=f"judge findings per {what} (the judge's words)", title_justify="left")
        for col in (what, "judge", "status", "findings (the judge says)", "dropped", "cost"):
            table.add_column(col)
        for r in rows:
            said = "\n".join(_finding_text(f) for f in r.get("findings") or []) or "[dim]none[/]"
            dropped = "\n".join(escape(d.get("dropped", "")) for d in r.get("dropped") or [])
            status = r.get("status", "")
            if r.get("error"):
                status += f": {escape(str(r['error'])[:200])}"
            if r.get("reused"):
                status += " (reused)"
            table.add_row(
                str(r.get(what)),
                str(r.get("judge") or ""),
                status,
                said,
                dropped,
                f"${(r.get('cost_usd') or 0):.4f}",
            )
        console.print(table)
        spent = sum(r.get("cost_usd") or 0 for r in rows if not r.get("reused"))
        console.print(f"Judge cost of this run: ${spent:.4f}.", highlight=False)
    if infra:
        raise typer.Exit(1)


def _finding_text(f: dict[str, Any]) -> str:
    where = f"{f['file']}:{f['line']}" if "file" in f else f"turn {f.get('turn')}"
    return f"{escape(f['category'])} at {escape(where)}: {escape(f.get('says') or '')}"


def register(app: typer.Typer) -> None:
    app.command("review")(review)
    app.command("analyze")(analyze)
