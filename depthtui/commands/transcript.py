"""`depthtui show EPISODE`: one episode read from the shell, as the TUI's replay shows it: what
the agent was told, each reply with its commands and their outputs, what the safety oracle saw,
the per-test results and the verdict. `--task T [--model M]` shows the newest such episode;
`--json` prints the same as one document."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

from depthtui.commands.common import DbOption, JsonOption, console, fail, print_json
from store import vocab

OUTPUT_LINES = 20  # lines of a command's output the text view prints (the JSON holds all stored)

_EPISODE_FIELDS = (
    "id", "task_id", "mode", "agent", "model_id", "cap", "budget", "attempt", "fault_family",
    "fault_target", "seed", "status", "started_at", "finished_at", "turns", "calls", "end_reason",
    "segments_total", "segments_passed", "passed", "complete", "tests_passed", "tests_total",
    "reward", "safe_success", "collateral", "collateral_call", "fault_observed_call",
    "fault_cleared", "error_kind", "error_detail", "end_detail", "prompt_tokens",
    "completion_tokens", "cached_tokens", "cost_usd", "outcome", "job_id", "forgeable",
)  # fmt: skip
_CALL_FIELDS = (
    "idx", "command", "exit_code", "timed_out", "not_run", "shell_restarted", "note",
    "observation", "output_head", "output_tail", "output_bytes", "remaining_budget", "duration_ms",
)  # fmt: skip
_EVENT_FIELDS = ("call_idx", "path", "kind", "permitted", "collateral", "diff", "detail")
_TEST_FIELDS = ("segment_idx", "nodeid", "outcome", "in_inventory", "duration_s", "message")


def _rows(conn: sqlite3.Connection, sql: str, params: tuple) -> list[dict[str, Any]]:
    cur = conn.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]


def latest_episode(conn: sqlite3.Connection, task: str, model: str | None) -> int | None:
    """The newest episode of the task (full id or unique folder name) by the model (its
    registry name, or the model id it sent); None when there is none."""
    from store.tasks import find_task_ids

    ids = find_task_ids(conn, task) or [task]
    if len(ids) > 1:
        fail(f"--task '{task}' names several tasks: {', '.join(ids)}; give the full id")
    sql = "SELECT id FROM episodes WHERE task_id = ? AND status != 'superseded'"
    params: tuple = (ids[0],)
    if model is not None:
        sql += " AND (agent = ? OR model_id = ?)"
        params += (model, model)
    row = conn.execute(sql + " ORDER BY id DESC LIMIT 1", params).fetchone()
    return None if row is None else row[0]


def episode_document(conn: sqlite3.Connection, episode_id: int) -> dict[str, Any] | None:
    """Everything `show` prints about one episode, as plain data."""
    cols = ", ".join(
        "coalesce(e.fault_target, (SELECT f.target FROM fault_records f "
        "WHERE f.episode_id = e.id)) AS fault_target"
        if c == "fault_target"
        else f"e.{c}"
        for c in _EPISODE_FIELDS
    )
    found = _rows(conn, f"SELECT {cols} FROM episodes e WHERE e.id = ?", (episode_id,))
    if not found:
        return None
    ep = found[0]
    ep["label"] = vocab.label(ep["outcome"], ep["error_kind"]) if ep["outcome"] else ep["status"]
    segments = _rows(
        conn,
        "SELECT idx, name, user_message, first_turn, passed, tests_passed, tests_total, "
        "error_kind, error_detail, verifier_output FROM segment_runs WHERE episode_id = ? "
        "ORDER BY idx",
        (episode_id,),
    )
    calls: dict[int, list[dict[str, Any]]] = {}
    for c in _rows(
        conn,
        f"SELECT turn_idx, {', '.join(_CALL_FIELDS)} FROM calls WHERE episode_id = ? ORDER BY idx",
        (episode_id,),
    ):
        calls.setdefault(c.pop("turn_idx"), []).append(c)
    events: dict[int | None, list[dict[str, Any]]] = {}
    for ev in _rows(
        conn,
        f"SELECT {', '.join(_EVENT_FIELDS)} FROM oracle_events WHERE episode_id = ? ORDER BY id",
        (episode_id,),
    ):
        events.setdefault(ev["call_idx"], []).append(ev)
    turns = []
    number = 0
    for t in _rows(
        conn,
        "SELECT idx, segment_idx, text, reasoning, format_error, finish_reason, counted, "
        "cut_by_harness, prompt_tokens, completion_tokens, cached_tokens, latency_ms FROM turns "
        "WHERE episode_id = ? ORDER BY idx",
        (episode_id,),
    ):
        counted = bool(t.pop("counted"))
        t["cut_by_harness"] = bool(t["cut_by_harness"])
        number += counted
        # Which counted turn this reply is; None for a closing reply (docs/work-and-turns.md).
        t["number"] = number if counted else None
        t["calls"] = calls.get(t["idx"], [])
        for c in t["calls"]:
            c["events"] = events.get(c["idx"], [])
        turns.append(t)
    tests = _rows(
        conn,
        f"SELECT {', '.join(_TEST_FIELDS)} FROM test_results WHERE episode_id = ? "
        "ORDER BY segment_idx, id",
        (episode_id,),
    )
    fault = _rows(
        conn,
        "SELECT family, target, spare_path, observed_call, cleared, integrity, "
        "restored_for_grading FROM fault_records WHERE episode_id = ?",
        (episode_id,),
    )
    return {
        "episode": ep,
        "prompt": conn.execute(
            "SELECT prompt_name FROM episodes WHERE id = ?", (episode_id,)
        ).fetchone()[0],
        "segments": segments,
        "turns": turns,
        "final_events": events.get(None, []),
        "tests": tests,
        "fault": fault[0] if fault else None,
    }


def show(
    episode: Annotated[
        int | None, typer.Argument(help="The episode's id (`depthtui episodes`, the TUI).")
    ] = None,
    task: Annotated[
        str | None,
        typer.Option("--task", help="Show the newest episode of this task (id or folder name)."),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", "-m", help="With --task: the newest one by this model."),
    ] = None,
    db: DbOption = None,
    json_out: JsonOption = False,
) -> None:
    """Show one episode: its instructions, replies, commands with their outputs, the safety
    oracle's events, per-test results and the verdict."""
    from store.db import StoreError, default_path, open_reader

    if (episode is None) == (task is None):
        fail("give an EPISODE id, or --task T (with --model M for one model's newest)")
    if model is not None and task is None:
        fail("--model goes with --task")
    path = Path(db).expanduser() if db is not None else default_path()
    try:
        conn = open_reader(path)
    except StoreError as exc:
        fail(str(exc))
    try:
        if episode is None:
            assert task is not None
            episode = latest_episode(conn, task, model)
            if episode is None:
                by = f" by model '{model}'" if model else ""
                fail(f"no episode of task '{task}'{by} in {path}")
        doc = episode_document(conn, episode)
    finally:
        conn.close()
    if doc is None:
        fail(f"no episode {episode} in {path}")
    if json_out:
        print_json(doc)
        return
    for part in render(doc):
        console.print(part, highlight=False, soft_wrap=True)


def _clip(text: str, lines: int = OUTPUT_LINES) -> str:
    rows = text.rstrip("\n").splitlines()
    if len(rows) <= lines:
        return "\n".join(rows)
    return "\n".join([*rows[:lines], f"[... {len(rows) - lines} more line(s)]"])


def _event_line(ev: dict[str, Any]) -> Text:
    style = "red" if ev["collateral"] else "green" if ev["permitted"] else "yellow"
    why = "collateral" if ev["collateral"] else "permitted" if ev["permitted"] else "not permitted"
    line = Text(f"    oracle: {ev['kind']} {ev['path']} ({why})", style=style)
    if ev["detail"]:
        line.append(f": {ev['detail']}", style="dim")
    return line


def _verdict(ep: dict[str, Any]) -> Text:
    style = {"pass": "green", "fail": "red"}.get(ep["outcome"] or "", "yellow")
    out = Text("verdict: ", style="bold")
    out.append(ep["label"], style=f"bold {style}")
    ended = f"ended by {ep['end_reason'] or '-'}"
    if ep["end_detail"] and ep["end_reason"] != "error":
        # In words: the server's message for a full context, the limit that was reached.
        ended += f" ({ep['end_detail']})"
    facts = [ended]
    facts.append(f"segments {ep['segments_passed']}/{ep['segments_total']}")
    if ep["tests_total"] is not None:
        facts.append(f"tests {ep['tests_passed']}/{ep['tests_total']}")
    if ep["reward"] is not None:
        facts.append(f"reward {ep['reward']:g}")
    if ep["collateral"]:
        facts.append(f"collateral damage at call {ep['collateral_call']}")
    if ep["safe_success"] is not None:
        facts.append("safe success" if ep["safe_success"] else "no safe success")
    if ep["forgeable"]:
        facts.append("forgeable by agent code")
    out.append(" · " + " · ".join(facts))
    if ep["error_detail"]:
        out.append(f"\nerror: {ep['error_detail']}", style="yellow")
    return out


def _inert(value: Any) -> Any:
    """Every stored string with its escapes and controls made visible and harmless: what an
    agent or a task printed must not drive the reader's terminal (depthtui/widgets/sanitize.py)."""
    from depthtui.widgets.sanitize import sanitize

    if isinstance(value, str):
        return sanitize(value, keep_sgr=False)
    if isinstance(value, dict):
        return {k: _inert(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_inert(v) for v in value]
    return value


def render(doc: dict[str, Any]) -> list[Text]:
    """The episode as lines for a terminal; every stored string is plain text, never markup,
    and never a terminal escape."""
    doc = _inert(doc)
    ep = doc["episode"]
    head = Text(f"episode {ep['id']}", style="bold")
    head.append(
        f" · {ep['task_id']} · {ep['mode']} · {ep['agent']}"
        + (f" ({ep['model_id']})" if ep["model_id"] and ep["model_id"] != ep["agent"] else "")
        + f" · attempt {ep['attempt']} · seed {ep['seed']}"
        + (f" · cap {ep['cap']}" if ep["cap"] is not None else "")
        + (f" · budget {ep['budget']}" if ep["budget"] is not None else "")
        + (f" · fault {ep['fault_family']}" if ep["fault_family"] != vocab.NO_FAULT else "")
    )
    parts = [head]
    parts.append(
        Text(
            f"{ep['turns']} turn(s), {ep['calls']} command(s), tokens {ep['prompt_tokens']} "
            f"prompt / {ep['completion_tokens']} completion, ${ep['cost_usd']:.4f}, "
            f"{ep['started_at']} -> {ep['finished_at'] or 'running'}",
            style="dim",
        )
    )
    if doc["fault"]:
        f = doc["fault"]
        parts.append(
            Text(
                f"fault {f['family']} on {f['target']}: observed at call "
                f"{f['observed_call'] if f['observed_call'] is not None else '-'}, "
                f"{'cleared' if f['cleared'] else 'not cleared'}",
                style="magenta",
            )
        )
    by_segment: dict[int, list[dict[str, Any]]] = {}
    for t in doc["turns"]:
        by_segment.setdefault(t["segment_idx"], []).append(t)
    segments = doc["segments"] or [
        {"idx": i, "name": "", "user_message": "", "passed": None} for i in sorted(by_segment)
    ]
    for seg in segments:
        title = Text(f"\n── segment {seg['idx'] + 1}", style="bold blue")
        if seg["name"]:
            title.append(f": {seg['name']}", style="bold blue")
        parts.append(title)
        if seg["user_message"]:
            parts.append(Text("task message:", style="bold"))
            parts.append(Text(seg["user_message"].rstrip()))
        for t in by_segment.get(seg["idx"], []):
            parts += _turn(t)
        if seg.get("passed") is not None:
            mark = "passed" if seg["passed"] else "failed"
            style = "green" if seg["passed"] else "red"
            line = Text(f"segment {seg['idx'] + 1} {mark}", style=style)
            if seg.get("tests_total") is not None:
                line.append(f" ({seg['tests_passed']}/{seg['tests_total']} tests)")
            if seg.get("error_kind"):
                line.append(f" · {seg['error_kind']}: {seg.get('error_detail') or ''}", "yellow")
            parts.append(line)
    if doc["final_events"]:
        parts.append(Text("\nfinal check of the safety oracle:", style="bold"))
        parts += [_event_line(ev) for ev in doc["final_events"]]
    if doc["tests"]:
        parts.append(Text("\ntests:", style="bold"))
        for r in doc["tests"]:
            style = {"passed": "green", "failed": "red"}.get(r["outcome"], "yellow")
            line = Text(f"  {r['outcome']:<8}", style=style)
            line.append(f" seg {r['segment_idx'] + 1} {r['nodeid']}")
            if not r["in_inventory"]:
                line.append(" (not in the inventory)", style="dim")
            if r["message"]:
                line.append(f": {r['message'].splitlines()[0]}", style="dim")
            parts.append(line)
    parts.append(Text(""))
    parts.append(_verdict(ep))
    return parts


def _turn(t: dict[str, Any]) -> list[Text]:
    if t["number"] is not None:
        label = f"turn {t['number']}"
    elif t["cut_by_harness"]:
        label = "cut off by the harness (not counted)"
    else:
        label = "closing reply (not counted)"
    head = Text(f"\n{label}", style="bold cyan")
    head.append(
        f" (reply {t['idx']}, {t['completion_tokens']} tokens, finish {t['finish_reason'] or '-'})",
        style="dim",
    )
    out = [head]
    if t["reasoning"]:
        out.append(Text(_clip(t["reasoning"], 8), style="dim italic"))
    if t["text"]:
        out.append(Text(t["text"].rstrip()))
    if t["format_error"]:
        out.append(Text(f"[format error] {t['format_error']}", style="red"))
    for c in t["calls"]:
        out.append(Text(f"$ {c['command']}", style="bold"))
        # Refused (the budget was spent) or never run (a malformed call): what the model was told.
        if c["not_run"] or (c["exit_code"] is None and not c["timed_out"]):
            out.append(Text(f"  not run: {_clip(c['observation'], 4)}", style="yellow"))
            continue
        output = c["output_head"] + (
            f"\n[... {c['output_bytes']} bytes in all ...]\n{c['output_tail']}"
            if c["output_tail"]
            else ""
        )
        if output.strip():
            out.append(Text(_clip(output)))
        status = "timed out" if c["timed_out"] else f"exit {c['exit_code']}"
        line = Text(f"  [{status}, {c['duration_ms']:.0f} ms", style="dim")
        if c["remaining_budget"] is not None:
            line.append(f", {c['remaining_budget']} command(s) left")
        line.append("]")
        if c["note"]:
            line.append(f" {c['note']}")
        out.append(line)
        out += [_event_line(ev) for ev in c["events"]]
    return out


def register(app: typer.Typer) -> None:
    app.command(name="show")(show)
