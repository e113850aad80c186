"""Printing what a finished job found: one table per verb, or one JSON document."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from depthtui.commands.common import console, print_json
from engine.sandbox.build_errors import CAUSE, NOT_RETRIED
from store import vocab
from store.db import Store


def _job_tasks(store: Store, job_id: int) -> list[str]:
    from store.jobs import get_job

    job = get_job(store, job_id)
    return list(job.params.get("tasks", [])) if job else []


def check_rows(store: Store, task_ids: list[str]) -> list[dict[str, Any]]:
    """Per task: W, segments, whether the reference passed and doing nothing failed, and why
    not, from the newest check episodes of the task's current content."""
    from store import reports

    tasks = {t["id"]: t for t in reports.tasks(store.conn, task_ids)}
    latest: dict[tuple[str, str], dict] = {}
    for e in reports.done_episodes(store.conn, ("check",)):
        if e["task_id"] in tasks:
            latest[(e["task_id"], e["agent"])] = e
    rows = []
    for task_id in task_ids:
        task = tasks.get(task_id)
        if task is None:
            continue
        # A task without a reference solution (W unknown) has no reference run to judge.
        oracle = latest.get((task_id, "oracle")) if task["work"] is not None else None
        nop = latest.get((task_id, "nop"))
        problems = [] if task["work"] is not None else [NO_REFERENCE]
        # A GUI, a sidecar service, the network...: never "ok" here, whatever the runs say.
        problems += task["needs"]
        runs = [("no-op", nop)] if task["work"] is None else [("reference", oracle), ("no-op", nop)]
        errors: dict[str, list[str]] = {}
        for name, e in runs:
            if e is None:
                problems.append(f"{name} run missing")
            elif e["outcome"] != vocab.PASS and e["error_kind"]:
                line = f"{_error_line(store, e)} ({_whose(store, e)})"
                errors.setdefault(line, []).append(name)
        # Both runs usually meet the same error (the image would not build): say it once.
        problems += [
            f"{' and '.join(names)} run{'s' if len(names) > 1 else ''}: {line}"
            for line, names in errors.items()
        ]
        reference_passed = _counted(oracle, vocab.PASS)
        noop_failed = None if _counted(nop, vocab.PASS) is None else not _counted(nop, vocab.PASS)
        if reference_passed is False and not (oracle or {}).get("error_kind"):
            problems.append("the reference solution does not pass")
        if noop_failed is False:
            problems.append("doing nothing passes")
        rows.append(
            {
                "task": task_id,
                "dataset": task["dataset"],
                "segments": task["segments"],
                "W": task["work"],
                # None where the run did not give the model's kind of outcome (an error).
                "reference_passed": reference_passed,
                "noop_failed": noop_failed,
                "reference_outcome": None if oracle is None else oracle["outcome"],
                "noop_outcome": None if nop is None else nop["outcome"],
                "reference_error": _run_error(store, oracle),
                "noop_error": _run_error(store, nop),
                "ok": not problems,
                "problems": problems,
                "episodes": [e["id"] for e in (oracle, nop) if e],
                # Graded although the tests run agent code that could forge the grade.
                "forgeable": any(bool(e["forgeable"]) for e in (oracle, nop) if e),
            }
        )
    return rows


def _counted(episode: dict | None, outcome: str) -> bool | None:
    """Whether a check run had `outcome`; None when there is no run or it errored outside the
    agent (infrastructure, a broken task): then it says nothing about the task's verdicts."""
    if episode is None or not vocab.in_rates(episode["outcome"]):
        return None
    return episode["outcome"] == outcome


def _run_error(store: Store, episode: dict | None) -> str | None:
    if episode is None or not episode["error_kind"]:
        return None
    return f"{vocab.label(episode['outcome'])}: {_error_line(store, episode)}"


# Whose an error is, as the check table says it (docs/outcomes.md).
WHOSE = {
    vocab.AGENT_ERROR: "the agent's",
    vocab.INFRA_ERROR: "infrastructure: retried",
    vocab.TASK_BROKEN: "task broken: not retried",
}


def _whose(store: Store, episode: dict) -> str:
    from store.episodes import get_episode

    detail = (get_episode(store.conn, episode["id"]) or {}).get("error_detail") or ""
    if NOT_RETRIED in detail:  # a build that fails the same way (docs/builds.md)
        return "infrastructure: not retried, it fails the same way"
    return WHOSE.get(episode["outcome"], episode["outcome"])


NO_REFERENCE = "no reference solution (solve.sh is missing), so it cannot be checked"
DETAIL_LIMIT = 300


def _error_line(store: Store, episode: dict) -> str:
    """An errored run in one line: its kind, and the first and last lines of the detail (a
    build error ends with the build log's tail, whose last line says what failed)."""
    from store.episodes import get_episode

    kind = episode["error_kind"]
    detail = (get_episode(store.conn, episode["id"]) or {}).get("error_detail") or ""
    lines = [line.strip() for line in detail.splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return f"{kind} error"
    first = lines[0].removeprefix(f"{kind}: ")
    # A build error names its cause on a line of its own (engine/sandbox/build_errors.py).
    cause = next((line for line in lines[1:] if line.startswith(CAUSE)), None)
    last = cause or lines[-1]
    text = first if len(lines) == 1 else f"{first} ... {last}"
    limit = DETAIL_LIMIT if cause is None else 2 * DETAIL_LIMIT  # a cause has its remedy
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{kind} error: {text}"


def print_check_results(store: Store, job_id: int, json_out: bool) -> list[dict[str, Any]]:
    """Print the job's check table (or JSON) and return its rows."""
    rows = check_rows(store, _job_tasks(store, job_id))
    if json_out:
        print_json(rows)
        return rows
    table = Table(title=f"check (job {job_id})", title_justify="left")
    for col in ("task", "segments", "W", "reference", "no-op", "verdict"):
        table.add_column(col, justify="right" if col in ("segments", "W") else "left")
    for r in rows:
        table.add_row(
            r["task"],
            str(r["segments"]),
            "?" if r["W"] is None else str(r["W"]),
            _run_mark(r["reference_passed"], r["reference_outcome"], "passes", "fails"),
            _run_mark(r["noop_failed"], r["noop_outcome"], "fails", "PASSES"),
            ("[green]ok[/]" if r["ok"] else "[red]" + "; ".join(r["problems"]) + "[/]")
            + (" [yellow](forgeable by agent code)[/]" if r["forgeable"] else ""),
        )
    console.print(table)
    good = sum(r["ok"] for r in rows)
    console.print(f"{good}/{len(rows)} task(s) check out.", highlight=False)
    return rows


def _run_mark(value: bool | None, outcome: str | None, yes: str, no: str) -> str:
    """A check run's cell: its verdict, or its error where it gave none."""
    if value is None and outcome is not None:
        return f"[yellow]{vocab.label(outcome)}[/]"
    if value is False and outcome == vocab.AGENT_ERROR:
        return f"[red]{no} (error)[/]"
    return _mark(value, yes, no)


def _mark(value: bool | None, yes: str, no: str) -> str:
    if value is None:
        return "[dim]-[/]"
    return f"[green]{yes}[/]" if value else f"[red]{no}[/]"


def validate_rows(store: Store, task_ids: list[str]) -> list[dict[str, Any]]:
    from engine.analysis.verifier_audit import mutation_cells
    from engine.protocol.validate import NO_REFERENCE as NOT_VALIDATED
    from store import judgements, reports
    from store import protocol as sp

    tasks = {t["id"]: t for t in reports.tasks(store.conn, task_ids)}
    rows = []
    for task_id in task_ids:
        contract = sp.get_contract(store, task_id)
        # What judge models said of the task (`depthtui review`): their words.
        review = [
            {"judge": r["judge"], "findings": r["findings"], "dropped": len(r["dropped"])}
            for r in judgements.reviews(store, task_id)
            if r["status"] == "done"
        ]
        if contract is None:
            no_reference = task_id in tasks and tasks[task_id]["work"] is None
            why = NOT_VALIDATED if no_reference else "not validated (the run stopped)"
            rows.append(
                {
                    "task": task_id,
                    "valid": None,
                    "reasons": [why],
                    "fault_families": [],
                    "flags": [],
                    "review": review,
                }
            )
            continue
        rows.append(
            {
                "task": task_id,
                "valid": contract["valid"],
                "reasons": contract["reasons"],
                "fault_families": sorted(contract["fault_targets"]),
                "fault_targets": contract["fault_targets"],
                "flags": contract["flags"],
                # Said of the task beside its verdict: a planted-file fallback.
                "notes": (contract["detail"] or {}).get("notes", []),
                "tests": len(contract["tests"]),
                "permitted": contract["permitted"],
                "families_detail": contract["detail"].get("fault_families", {}),
                # Per graded file, what m1-m4 did (m1-m3 must be caught; docs/verifier.md).
                "mutations": mutation_cells(contract["detail"]),
                # Per graded file, the expected-differences rule differential grading uses.
                "graded_outputs": {
                    p: o.get("rule")
                    for p, o in (contract["detail"].get("graded_outputs") or {}).items()
                },
                "review": review,
            }
        )
    return rows


def print_validate_results(store: Store, job_id: int, json_out: bool) -> list[dict[str, Any]]:
    """Print the job's validate rows (a table, or JSON) and return them."""
    from engine.analysis.verifier_audit import mutations_text

    rows = validate_rows(store, _job_tasks(store, job_id))
    if json_out:
        print_json(rows)
        return rows
    table = Table(title=f"validate (job {job_id})", title_justify="left")
    for col in ("task", "valid", "tests", "fault families", "mutations", "reasons"):
        table.add_column(col)
    for r in rows:
        valid = (
            "[dim]-[/]"
            if r["valid"] is None
            else "[green]valid[/]"
            if r["valid"]
            else "[red]invalid[/]"
        )
        tests = str(r.get("tests", ""))
        if "no_per_test_results" in r["flags"]:
            tests = "[dim]reward only[/]"  # a test.sh that runs no pytest: nothing to count
        table.add_row(
            r["task"],
            valid,
            tests,
            _families_cell(r),
            escape(mutations_text(r.get("mutations") or {})).replace(
                "ACCEPTED", "[bold red]ACCEPTED[/]"
            ),
            "; ".join([*r["reasons"], *(f"[yellow]note:[/] {n}" for n in r.get("notes", []))])
            + _review_note(r),
        )
    console.print(table)
    good = sum(1 for r in rows if r["valid"])
    console.print(f"{good}/{len(rows)} task(s) valid.", highlight=False)
    return rows


def _review_note(row: dict[str, Any]) -> str:
    """The judges' findings, said as theirs (`depthtui review`)."""
    said = [
        f"{f['category']} at {f['file']}:{f['line']}"
        for r in row.get("review") or []
        for f in r["findings"]
    ]
    if not said:
        return ""
    return "\n[dim]the judge says: " + escape("; ".join(said[:5])) + "[/]"


def _families_cell(row: dict[str, Any]) -> str:
    """The usable fault families, then each unusable one with its reason."""
    usable = ", ".join(row["fault_families"])
    why = row.get("families_detail") or {}
    unusable = [f"{family}: {reason}" for family, reason in sorted(why.items())]
    if not usable and not unusable:
        return "[dim]none[/]"
    return "\n".join([usable or "[dim]none usable[/]", *(f"[dim]{u}[/]" for u in unusable)])


def print_report_for_job(store: Store, job_id: int, json_out: bool) -> None:
    from depthtui.commands.report import print_report
    from engine.analysis.report import build

    tasks = _job_tasks(store, job_id)
    report = build(store.conn, task_ids=tasks)
    print_report(report, json_out)


def replay_rows(store: Store, job_id: int) -> list[dict[str, Any]]:
    from store.episodes import latest_replay, same_outputs
    from store.jobs import get_job

    job = get_job(store, job_id)
    rows = []
    for original in job.params.get("episodes", []) if job else []:
        r = latest_replay(store, original)
        if r is None:
            rows.append({"episode": original, "replay": None})
            continue
        same = same_outputs(store, r["id"], original)
        rows.append(
            {
                "episode": original,
                "task": r["task_id"],
                "replay": r["id"],
                "original_passed": bool(r["original_passed"]),
                "replay_passed": bool(r["passed"]),
                "agree": r["outcome"] == r["original_outcome"] and vocab.in_rates(r["outcome"]),
                "same_outputs": same,
                "error": r["error_kind"],
            }
        )
    return rows


def print_replay_results(store: Store, job_id: int, json_out: bool) -> None:
    rows = replay_rows(store, job_id)
    if json_out:
        print_json(rows)
        return
    table = Table(title=f"replay (job {job_id})", title_justify="left")
    for col in ("episode", "task", "replay", "original", "replayed", "verdict", "same outputs"):
        table.add_column(col)
    for r in rows:
        if r["replay"] is None:
            table.add_row(str(r["episode"]), "", "-", "", "", "[red]not replayed[/]", "")
            continue
        table.add_row(
            str(r["episode"]),
            r["task"],
            str(r["replay"]),
            _mark(r["original_passed"], "passed", "failed"),
            _mark(r["replay_passed"], "passed", "failed"),
            "[green]agrees[/]" if r["agree"] else "[red]disagrees[/]",
            str(r["same_outputs"]),
        )
    console.print(table)
