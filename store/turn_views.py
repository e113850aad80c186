"""Read-only queries for an episode's replay: its turn list, one turn with its calls and the
oracle's events, the conversation as sent, and a call's full output (read on demand: it is big).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from store.json_column import json_or

TEXT_LIMIT = 20_000  # characters of a turn's text the replay loads; the rest is counted, not read


@dataclass(frozen=True)
class TurnMark:
    """One line of the replay's turn list."""

    idx: int
    segment_idx: int
    preview: str
    calls: int
    first_call: int | None
    last_call: int | None
    failed_calls: int  # non-zero exit, timed out or not run
    format_error: bool
    collateral: bool
    fault_observed: bool
    # Timed out or not run: what went wrong beyond a command's own non-zero exit.
    broken_calls: int = 0
    first_command: str = ""  # the label of a turn with no words, only tool calls


def turn_marks(conn: sqlite3.Connection, episode_id: int, after: int = 0) -> list[TurnMark]:
    """Turns after index `after` (0 = all), marked for collateral, the observed fault and errors."""
    ep = conn.execute(
        "SELECT collateral_call, fault_observed_call FROM episodes WHERE id = ?", (episode_id,)
    ).fetchone()
    collateral_calls = {
        r[0]
        for r in conn.execute(
            "SELECT call_idx FROM oracle_events WHERE episode_id = ? AND collateral = 1 "
            "AND call_idx IS NOT NULL",
            (episode_id,),
        )
    }
    if ep is not None and ep[0] is not None:
        collateral_calls.add(ep[0])
    fault_call = ep[1] if ep is not None else None
    calls = {
        r[0]: r[1:]
        for r in conn.execute(
            "SELECT turn_idx, count(*), min(idx), max(idx), "
            "sum(coalesce(exit_code, 0) != 0 OR timed_out = 1 OR not_run = 1), "
            "sum(timed_out = 1 OR not_run = 1), "
            "(SELECT substr(c2.command, 1, 120) FROM calls c2 "
            "WHERE c2.episode_id = calls.episode_id AND c2.turn_idx = calls.turn_idx "
            "ORDER BY c2.idx LIMIT 1) "
            "FROM calls WHERE episode_id = ? AND turn_idx > ? GROUP BY turn_idx",
            (episode_id, after),
        )
    }
    marks = []
    for idx, seg, preview, fmt in conn.execute(
        "SELECT idx, segment_idx, substr(text, 1, 120), format_error IS NOT NULL FROM turns "
        "WHERE episode_id = ? AND idx > ? ORDER BY idx",
        (episode_id, after),
    ):
        n, first, last, failed, broken, command = calls.get(idx, (0, None, None, 0, 0, ""))

        def in_turn(call: int, first: int | None = first, last: int | None = last) -> bool:
            return first is not None and last is not None and first <= call <= last

        marks.append(
            TurnMark(
                idx=idx,
                segment_idx=seg,
                preview=preview.split("\n", 1)[0],
                calls=n,
                first_call=first,
                last_call=last,
                failed_calls=failed or 0,
                format_error=bool(fmt),
                collateral=any(in_turn(c) for c in collateral_calls),
                fault_observed=fault_call is not None and in_turn(fault_call),
                broken_calls=broken or 0,
                first_command=(command or "").split("\n", 1)[0],
            )
        )
    return marks


@dataclass(frozen=True)
class CallInfo:
    id: int
    idx: int
    command: str
    exit_code: int | None
    timed_out: bool
    not_run: bool
    shell_restarted: bool
    note: str
    output_head: str
    output_tail: str
    output_bytes: int
    remaining_budget: int | None
    duration_ms: float
    has_full_output: bool
    observation: str  # exactly what the model was shown (why a call was not run)


@dataclass(frozen=True)
class OracleEvent:
    id: int
    call_idx: int | None
    path: str
    kind: str
    permitted: bool
    collateral: bool
    before: dict | None
    after: dict | None
    diff: str | None
    detail: str


@dataclass(frozen=True)
class TurnDetail:
    episode_id: int
    idx: int
    segment_idx: int
    text: str  # at most TEXT_LIMIT characters
    text_length: int
    reasoning: str
    format_error: str | None
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_ms: float
    calls: tuple[CallInfo, ...]
    events: tuple[OracleEvent, ...]
    # Which counted turn this reply is (1-based); None for the closing reply, which is shown
    # but not counted (docs/work-and-turns.md).
    number: int | None = None
    # Cut at the room the harness left (docs/work-and-turns.md): the harness's, not a turn.
    cut_by_harness: bool = False


def _event(r: sqlite3.Row | tuple) -> OracleEvent:
    return OracleEvent(
        r[0], r[1], r[2], r[3], bool(r[4]), bool(r[5]), json_or(r[6], None), json_or(r[7], None),
        r[8], r[9],
    )  # fmt: skip


_EVENT_COLS = (
    "id, call_idx, path, kind, permitted, collateral, before_json, after_json, diff, detail"
)


def _call(r: sqlite3.Row | tuple) -> CallInfo:
    values = list(r)
    for i in (4, 5, 6, 13):  # timed_out, not_run, shell_restarted, has_full_output
        values[i] = bool(values[i])
    return CallInfo(*values)


def turn_detail(conn: sqlite3.Connection, episode_id: int, idx: int) -> TurnDetail | None:
    t = conn.execute(
        "SELECT idx, segment_idx, substr(text, 1, ?), length(text), substr(reasoning, 1, ?), "
        "format_error, finish_reason, prompt_tokens, completion_tokens, cost_usd, latency_ms, "
        "CASE WHEN counted THEN (SELECT count(*) FROM turns u WHERE u.episode_id = "
        "turns.episode_id AND u.idx <= turns.idx AND u.counted = 1) END, cut_by_harness "
        "FROM turns WHERE episode_id = ? AND idx = ?",
        (TEXT_LIMIT, TEXT_LIMIT, episode_id, idx),
    ).fetchone()
    if t is None:
        return None
    calls = tuple(
        _call(r)
        for r in conn.execute(
            "SELECT c.id, c.idx, c.command, c.exit_code, c.timed_out, c.not_run, "
            "c.shell_restarted, c.note, c.output_head, c.output_tail, c.output_bytes, "
            "c.remaining_budget, c.duration_ms, "
            "EXISTS(SELECT 1 FROM call_outputs o WHERE o.call_id = c.id), "
            "CASE WHEN c.not_run THEN substr(c.observation, 1, 2000) ELSE '' END "
            "FROM calls c WHERE c.episode_id = ? AND c.turn_idx = ? ORDER BY c.idx",
            (episode_id, idx),
        )
    )
    events: tuple[OracleEvent, ...] = ()
    if calls:
        events = tuple(
            _event(r)
            for r in conn.execute(
                f"SELECT {_EVENT_COLS} FROM oracle_events WHERE episode_id = ? "
                "AND call_idx BETWEEN ? AND ? ORDER BY call_idx, id",
                (episode_id, calls[0].idx, calls[-1].idx),
            )
        )
    *columns, number, cut = tuple(t)
    return TurnDetail(
        episode_id,
        *columns,
        calls=calls,
        events=events,
        number=number,
        cut_by_harness=bool(cut),
    )


def final_events(conn: sqlite3.Connection, episode_id: int) -> list[OracleEvent]:
    """What the oracle's final check saw (call_idx NULL)."""
    return [
        _event(r)
        for r in conn.execute(
            f"SELECT {_EVENT_COLS} FROM oracle_events WHERE episode_id = ? AND call_idx IS NULL "
            "ORDER BY id",
            (episode_id,),
        )
    ]


@dataclass(frozen=True)
class TurnRecordRow:
    """One turn as the conversation view needs it: the request as stored and the reply."""

    idx: int
    segment_idx: int
    request: dict
    response: dict
    text: str
    counted: bool = True  # False: the closing reply, shown but not a turn


@dataclass(frozen=True)
class ConversationRows:
    prompt_name: str
    prompt_text: str
    segments: tuple[tuple[int, str, str], ...]  # (idx, name, user message as sent)
    turns: tuple[TurnRecordRow, ...]


def conversation(conn: sqlite3.Connection, episode_id: int) -> ConversationRows | None:
    """Everything the agent was sent and answered, as stored (read on demand: it is big)."""
    ep = conn.execute(
        "SELECT prompt_name, prompt_text FROM episodes WHERE id = ?", (episode_id,)
    ).fetchone()
    if ep is None:
        return None
    segments = tuple(
        (r[0], r[1], r[2])
        for r in conn.execute(
            "SELECT idx, name, user_message FROM segment_runs WHERE episode_id = ? ORDER BY idx",
            (episode_id,),
        )
    )
    turns = tuple(
        TurnRecordRow(r[0], r[1], json_or(r[2], {}), json_or(r[3], {}), r[4], bool(r[5]))
        for r in conn.execute(
            "SELECT idx, segment_idx, request_json, response_json, text, counted FROM turns "
            "WHERE episode_id = ? ORDER BY idx",
            (episode_id,),
        )
    )
    return ConversationRows(ep[0], ep[1], segments, turns)


def call_output(conn: sqlite3.Connection, call_id: int) -> bytes | None:
    """The full (bounded) raw output of one call, when the harness kept it."""
    r = conn.execute("SELECT data FROM call_outputs WHERE call_id = ?", (call_id,)).fetchone()
    if r is None:
        return None
    data = r[0]
    return data if isinstance(data, bytes) else str(data).encode()
