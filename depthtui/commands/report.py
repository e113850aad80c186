"""`depthtui report`: N, D, W per task and dataset, pass@1 per model, the headline depth figures,
safety and recovery rates with 95% intervals, reward, safe success and collateral per training
step of `rl` rollouts; as tables, one JSON document, files and plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from depthtui.commands.common import DbOption, JsonOption, console, fail, print_json
from engine.analysis.report import cost_text
from engine.analysis.report import figure_text as _fmt
from engine.analysis.report import rate_text as _rate
from engine.analysis.report_rows import Report, RLStepRow, SearchEstimate


def print_report(report: Report, json_out: bool) -> None:
    if json_out:
        print_json(report.to_json())
        return
    measured = [t for t in report.tasks if t.protocol]
    if measured:
        table = Table(title="Depth per task", title_justify="left")
        for col in ("task", "segments", "W", "N", "D", "estimates", "finished"):
            table.add_column(col, justify="right" if col in ("segments", "W", "N", "D") else "left")
        for t in measured:
            table.add_row(
                t.id,
                str(t.segments),
                _fmt(t.W),
                _fmt(t.figures.N),
                t.figures.D_display,
                t.figures.estimates_text(),
                "yes" if t.figures.finished else "[yellow]no[/]",
            )
        console.print(table)
        datasets = Table(title="Per dataset", title_justify="left")
        for col in (
            "dataset",
            "tasks",
            "measured",
            "finished",
            "solved",
            "median D",
            "median W",
            "D<=3",
            ">80",
        ):
            datasets.add_column(col)
        for d in report.datasets:
            datasets.add_row(
                d.dataset,
                str(d.tasks),
                str(d.measured),
                str(d.finished),
                str(d.solved),
                d.median_D_display,
                _fmt(d.median_W, 1),
                _fmt(d.share_D_le_3),
                str(d.above_80),
            )
        console.print(datasets)
        h = report.headline
        console.print(
            f"Solved {h.solved} of {h.measured} measured task(s); "
            f"{h.solved_D_le_3} within 3 turns (share {_fmt(h.share_D_le_3)}); "
            f"median D {h.median_D_display}, median W {_fmt(h.median_W, 1)}; "
            "rank partial correlation of D with pass rate given W: "
            f"{_fmt(h.rank_partial_corr_D_passrate_given_W)} "
            f"(over {h.rank_partial_corr_tasks} task(s)).",
            highlight=False,
        )
        state = "finished" if report.finished else "[yellow]not finished[/] (rerun to resume)"
        console.print(f"Measurement {state}.")
    if report.models:
        models = Table(title="Models (runs without a stated cap)", title_justify="left")
        for col in ("model", "tasks", "runs", "pass@1", "pass rate [95% CI]", "errors", "cost"):
            models.add_column(col)
        for m in report.models:
            models.add_row(
                m.model,
                str(m.tasks),
                str(m.episodes),
                _fmt(m.pass_at_1),
                _rate(m.pass_rate),
                str(m.errors),
                cost_text(m.cost_usd),
            )
        console.print(models)
    if report.spend:
        spend = Table(title="Tokens per model (every finished run)", title_justify="left")
        for col in ("model", "runs", "prompt", "completion", "cached", "cost"):
            spend.add_column(col, justify="left" if col == "model" else "right")
        for r in report.spend:
            spend.add_row(
                r.model,
                str(r.runs),
                f"{r.prompt_tokens:,}",
                f"{r.completion_tokens:,}",
                f"{r.cached_tokens:,}",
                cost_text(r.cost_usd),
            )
        console.print(spend)
    if report.safety:
        safety = Table(title="Safety and recovery (fault episodes)", title_justify="left")
        for col in (
            "model",
            "prompt",
            "fault",
            "runs",
            "safe success",
            "collateral",
            "recovery failure",
            "fault cleared",
            "errors",
        ):
            safety.add_column(col)
        for s in report.safety:
            safety.add_row(
                s.model,
                s.prompt,
                s.fault,
                str(s.episodes),
                _rate(s.safe_success),
                _rate(s.collateral),
                _rate(s.recovery_failure_after_observed),
                _rate(s.fault_cleared),
                str(s.errors),
            )
        console.print(safety)
    if report.rl_by_step:
        print_rl_by_step(report.rl_by_step)
    if report.recovery_depth:
        rec = Table(title="Recovery depth (turns a fault adds)", title_justify="left")
        for col in ("task", "fault", "D clean", "D fault", "added"):
            rec.add_column(col)
        for r in report.recovery_depth:
            rec.add_row(
                r.task,
                r.fault,
                r.D_clean_display,
                r.D_fault_display,
                r.added_turns_display,
            )
        console.print(rec)
    for r in report.repeats:
        why = " (temperature 0: deterministic sampling)" if r.deterministic else ""
        console.print(
            f"Repeated attempts of {r.model}: {r.identical} of {r.repeat_attempts} "
            f"identical to an earlier attempt of the same run, over {r.runs} run(s){why}.",
            highlight=False,
        )
    if report.search_estimates:
        print_search_estimates(report.search_estimates)
    if report.checks:
        good = sum(1 for c in report.checks if c.ok)
        console.print(f"check: {good}/{len(report.checks)} task(s) check out.")
    forge = report.forgeable
    if forge.tasks:
        state = (
            "left out of every figure above (--exclude-forgeable)"
            if forge.excluded
            else "counted above; leave them out with --exclude-forgeable"
        )
        console.print(
            f"Forgeable by agent code: {forge.runs} run(s) on {len(forge.tasks)} task(s) "
            f"whose tests run agent-written code where it could forge the grade "
            f"({', '.join(forge.tasks[:5])}{', ...' if len(forge.tasks) > 5 else ''}); "
            f"{state}.",
            highlight=False,
        )
    if report.verifier:
        print_verifier_audit(report.verifier)
    if not (
        measured
        or report.models
        or report.safety
        or report.checks
        or report.verifier
        or report.rl_by_step
    ):
        console.print("Nothing measured yet: run `depthtui check`, `free`, `ladder` or `episodes`.")


def print_verifier_audit(rows: tuple[Any, ...]) -> None:
    """Per validated task: each graded file's m1-m4 (m1-m3 must be caught), the passing runs
    suspected of being false positives and why, the judges' findings (their words, not ours)."""
    from rich.markup import escape

    from engine.analysis.verifier_audit import mutations_text

    table = Table(title="Verifier audit (validate, triage, review)", title_justify="left")
    for col in ("task", "mutations per graded file", "suspect passes", "judge findings"):
        table.add_column(col)
    for r in rows:
        muts = escape(mutations_text(r.mutations)).replace("ACCEPTED", "[bold red]ACCEPTED[/]")
        why = ", ".join(f"{k} {n}" for k, n in r.suspects_by_reason.items())
        said = ", ".join(f"{k} {n}" for k, n in r.review_findings.items())
        table.add_row(
            escape(r.task),
            muts or "[dim]no graded file[/]",
            f"{r.suspects}" + (f" ({why})" if why else ""),
            (f"the judge says: {said}" if said else "[dim]-[/]"),
        )
    console.print(table)


def print_rl_by_step(rows: tuple[RLStepRow, ...]) -> None:
    """Reward, safe success and collateral per training step of `rl` rollouts, with what each
    figure is over: the rollouts counted and the errors left out (engine/analysis/rl_steps.py)."""
    table = Table(
        title="RL training per step (rollouts; errors: infra/task_broken left out, counted)",
        title_justify="left",
    )
    for col in (
        "model",
        "step",
        "rollouts",
        "tasks",
        "mean reward",
        "safe success",
        "collateral",
        "agent errors",
        "errors",
    ):
        table.add_column(col, justify="left" if col == "model" else "right")
    for r in rows:
        table.add_row(
            r.model,
            "-" if r.step is None else str(r.step),
            str(r.episodes),
            str(r.tasks),
            _fmt(r.mean_reward, 3),
            _rate(r.safe_success),
            _rate(r.collateral),
            str(r.agent_errors),
            f"{r.errors} ({r.infra_errors} infra, {r.task_broken} task_broken)"
            if r.errors
            else "0",
        )
    console.print(table)


def print_search_estimates(rows: tuple[SearchEstimate, ...]) -> None:
    """Other searches' estimates: their own estimator, beside the protocol's D and runs."""
    table = Table(
        title="Depth by another search (its own estimator; not in the figures above)",
        title_justify="left",
    )
    for col in ("task", "estimator", "N", "D", "estimates", "runs", "protocol D", "protocol runs"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r.task,
            r.estimator,
            _fmt(r.figures.N),
            r.figures.D_display,
            r.figures.estimates_text(),
            str(r.figures.runs),
            r.protocol_D_display,
            _fmt(r.protocol_runs),
        )
    console.print(table)


def write_out(report: Report, out: Path, conn: Any) -> list[Path]:
    """summary.json, and one results.jsonl per model with a line per run."""
    from store import reports as q

    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(report.to_json(), indent=2, default=str) + "\n")
    written = [out / "summary.json"]
    ids = {t.id for t in report.tasks}
    by_model: dict[str, list[dict]] = {}
    modes = ("check", "free", "ladder", "audit", "episodes", "validate", "rl")
    for e in q.done_episodes(conn, modes):
        if e["task_id"] in ids:
            by_model.setdefault(e["agent"], []).append(e)
    for model, rows in sorted(by_model.items()):
        folder = out / "".join(c if c.isalnum() or c in "-_." else "_" for c in model)
        folder.mkdir(exist_ok=True)
        path = folder / "results.jsonl"
        with path.open("w") as fh:
            for e in rows:
                e = {k: v for k, v in e.items() if k != "timings_json"}
                fh.write(json.dumps(e, default=str) + "\n")
        written.append(path)
    return written


def report(
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Only this model's runs.")
    ] = None,
    task: Annotated[
        list[str] | None,
        typer.Option("--task", help="Only these tasks (ids or dataset names; repeatable)."),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Also write summary.json and <model>/results.jsonl here."),
    ] = None,
    plots: Annotated[
        Path | None, typer.Option("--plots", help="Also write the figures (PNG and SVG) here.")
    ] = None,
    exclude_forgeable: Annotated[
        bool,
        typer.Option(
            "--exclude-forgeable",
            help="Leave out tasks whose tests run agent-written code where it could forge the "
            "grade (graded as their own harness grades them, and counted apart otherwise).",
        ),
    ] = False,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Report N, D, W per task and dataset, pass@1 per model, the share of solved tasks with
    D <= 3, the rank partial correlation of depth with pass rate given work, and safety and
    recovery rates with task-cluster bootstrap 95% intervals, and reward, safe success and
    collateral per training step of `rl` rollouts. Says whether measurement has finished."""
    from depthtui.commands.common import open_store
    from engine.analysis.plots import write_plots
    from engine.analysis.report import build
    from store import tasks as task_store

    store = open_store(db)
    ids = None
    if task:
        ids = []
        for key in task:
            found = task_store.find_task_ids(store, key) or [
                t["id"] for t in task_store.list_tasks(store, dataset=key)
            ]
            if not found:
                fail(f"--task {key}: no such task or dataset in the store")
            ids += found
    result = build(store.conn, model=model, task_ids=ids, exclude_forgeable=exclude_forgeable)
    print_report(result, json_out)
    target = console if not json_out else None
    if out is not None:
        files = write_out(result, out, store.conn)
        if target:
            target.print(f"wrote {len(files)} file(s) under {out}")
    if plots is not None:
        files = write_plots(result.to_json(), plots)
        if target:
            names = ", ".join(p.name for p in files) or "none (nothing to plot yet)"
            target.print(f"plots: {names} in {plots}")


def register(app: typer.Typer) -> None:
    app.command("report", help=" ".join(report.__doc__.split()))(report)
