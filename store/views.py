"""Read-only queries behind the TUI's screens.

Every function takes a `sqlite3.Connection` (normally one from `store.db.open_reader`) and
returns plain frozen dataclasses, so screens never see SQL or rows. Queries fetch only the columns
a screen shows: a turn's request/response JSON and a call's full output are read on demand.

Not here, on purpose: the figures `depthtui report` prints (N, D, pass rates, pass@1, safe
success) come from engine.analysis.report.build_report, and transcript search from
store/search.py, so the TUI and the command line can never disagree.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from store import vocab

TEXT_LIMIT = 20_000  # characters of a turn's text the replay loads; the rest is counted, not read
BUILTIN_AGENTS = ("oracle", "nop", "replay")


# --------------------------------------------------------------------------- outcomes


def outcome(
    status: str | None,
    run_outcome: str | None,
    end_reason: str | None,
    collateral: int | None = 0,
) -> str:
    """One word for an episode from its stored outcome (store/vocab.py): pass | unsafe | fail |
    cap | error | broken | running | interrupted.

    An infrastructure error is its own word (`error`), a broken task too (`broken`): neither is
    the model's. An agent error is the model failing (`fail`; the episode shows its kind).
    Collateral damage outranks the tests: an episode that latched it is `unsafe` (reward -1).
    """
    if status == "running":
        return "running"
    if run_outcome is None:
        return status or "running"  # interrupted: it is run again
    if run_outcome == vocab.INFRA_ERROR:
        return "error"
    if run_outcome == vocab.TASK_BROKEN:
        return "broken"
    if collateral:
        return "unsafe"
    if run_outcome == vocab.PASS:
        return "pass"
    if end_reason == "turn_cap" and run_outcome == vocab.FAIL:
        return "cap"
    return "fail"


def outcome_class(status: str | None, run_outcome: str | None, collateral: int | None = 0) -> str:
    """Whose outcome an episode is: pass | fail | unsafe | agent_error | infra_error |
    task_broken | running | interrupted, from its stored outcome (store/vocab.py)."""
    if status == "running":
        return "running"
    if run_outcome is None:
        return status or "running"
    if run_outcome in (vocab.INFRA_ERROR, vocab.TASK_BROKEN):
        return run_outcome
    if collateral:
        return "unsafe"
    return run_outcome


def depth_label(d: int | None) -> str:
    if d is None:
        return "–"
    return vocab.ABOVE_LARGEST_CAP_TEXT if d >= vocab.ABOVE_LARGEST_CAP else str(d)


def _loads(text: str | None, default: Any) -> Any:
    if not text:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default


# --------------------------------------------------------------------------- dashboard
# Counts only: every figure `depthtui report` prints (pass@1, D, safe success, ...) comes from
# engine.analysis.report.build_report, which the screens call.


@dataclass(frozen=True)
class DatasetCount:
    dataset: str
    tasks: int
    episodes: int
    errors: int
    running: int


def datasets(conn: sqlite3.Connection) -> list[DatasetCount]:
    rows = conn.execute(
        """
        SELECT t.dataset, count(*) AS tasks, coalesce(sum(e.runs), 0),
               coalesce(sum(e.errors), 0), coalesce(sum(e.running), 0)
        FROM tasks t
        LEFT JOIN (
            SELECT task_id, count(*) AS runs,
                   sum(outcome IN ('infra_error', 'task_broken')) AS errors,
                   sum(status = 'running') AS running
            FROM episodes GROUP BY task_id
        ) e ON e.task_id = t.id
        GROUP BY t.dataset ORDER BY t.dataset
        """
    ).fetchall()
    return [DatasetCount(*tuple(r)) for r in rows]


# --------------------------------------------------------------------------- tasks


@dataclass(frozen=True)
class TaskCounts:
    """What the store counts about a task; its N, D and pass rate are the report's."""

    id: str
    dataset: str
    name: str
    segments: int
    work: int | None
    runs: int
    running: int
    valid: bool | None  # the frozen contract's verdict; None when not validated


def task_counts(conn: sqlite3.Connection) -> list[TaskCounts]:
    rows = conn.execute(
        """
        SELECT t.id, t.dataset, t.name, t.segments, t.work,
               coalesce(r.runs, 0), coalesce(r.running, 0), c.valid
        FROM tasks t
        LEFT JOIN (
            SELECT task_id, count(*) AS runs, sum(status = 'running') AS running
            FROM episodes GROUP BY task_id
        ) r ON r.task_id = t.id
        LEFT JOIN contracts c ON c.task_id = t.id
        ORDER BY t.dataset, t.id
        """
    ).fetchall()
    return [
        TaskCounts(*tuple(r)[:7], None if r[7] is None else bool(r[7]))  # type: ignore[arg-type]
        for r in rows
    ]


@dataclass(frozen=True)
class SegmentInfo:
    idx: int
    name: str
    instruction: str
    solution: str | None
    tests: dict[str, str]
    work: int | None


@dataclass(frozen=True)
class ContractInfo:
    valid: bool
    reasons: list[str]
    permitted: dict[str, list[str]]
    tests: list[str]
    fault_targets: dict[str, str]
    flags: list[str]
    created_at: str


@dataclass(frozen=True)
class EstimateInfo:
    model: str
    protocol: str
    n_turns: int | None
    estimate: int | None
    finished: bool


@dataclass(frozen=True)
class TaskDetail:
    id: str
    dataset: str
    name: str
    format: str
    source_path: str
    verifier_kind: str
    work: int | None
    instruction: str
    warnings: list[str]
    segments: tuple[SegmentInfo, ...]
    contract: ContractInfo | None
    estimates: tuple[EstimateInfo, ...]  # the task's N and D are the report's (build_report)


def task_detail(conn: sqlite3.Connection, task_id: str) -> TaskDetail | None:
    t = conn.execute(
        "SELECT id, dataset, name, format, source_path, verifier_kind, work, instruction, "
        "warnings_json FROM tasks WHERE id = ?",
        (task_id,),
    ).fetchone()
    if t is None:
        return None
    segments = tuple(
        SegmentInfo(r[0], r[1], r[2], r[3], _loads(r[4], {}), r[5])
        for r in conn.execute(
            "SELECT idx, name, instruction, solution, tests_json, work FROM segments "
            "WHERE task_id = ? ORDER BY idx",
            (task_id,),
        )
    )
    c = conn.execute(
        "SELECT valid, reasons_json, permitted_json, tests_json, fault_targets_json, flags_json, "
        "created_at FROM contracts WHERE task_id = ?",
        (task_id,),
    ).fetchone()
    contract = None
    if c is not None:
        contract = ContractInfo(
            bool(c[0]),
            _loads(c[1], []),
            _loads(c[2], {}),
            _loads(c[3], []),
            _loads(c[4], {}),
            _loads(c[5], []),
            c[6],
        )
    estimates = tuple(
        EstimateInfo(r[0], r[1], r[2], r[3], bool(r[4]))
        for r in conn.execute(
            "SELECT model, protocol, n_turns, estimate, finished FROM estimates WHERE task_id = ? "
            "ORDER BY protocol, model",
            (task_id,),
        )
    )
    return TaskDetail(
        t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], _loads(t[8], []), segments, contract,
        estimates,
    )  # fmt: skip


# --------------------------------------------------------------------------- ladder grid


@dataclass(frozen=True)
class LadderRun:
    episode_id: int
    attempt: int
    outcome: str


@dataclass(frozen=True)
class LadderGrid:
    """Runs of the depth protocol for one task: caps (None = uncapped) x models."""

    caps: tuple[int | None, ...]
    models: tuple[str, ...]
    cells: dict[tuple[str, int | None], tuple[LadderRun, ...]]
    estimates: dict[str, EstimateInfo]

    def implied(self, model: str, cap: int | None) -> bool:
        """Caps at or above the first model's N count as passed without runs
        (docs/protocol.md)."""
        est = self.estimates.get(model)
        return (
            cap is not None
            and est is not None
            and est.n_turns is not None
            and cap >= est.n_turns
            and not self.cells.get((model, cap))
        )


def ladder(conn: sqlite3.Connection, task_id: str) -> LadderGrid:
    cells: dict[tuple[str, int | None], list[LadderRun]] = {}
    models: list[str] = []
    # The protocol's uncapped runs may have been made by `free` (the ladder reuses them), so
    # clean uncapped runs of any verb count; they join the rows of models the ladder measured.
    free_runs: list[sqlite3.Row | tuple] = []
    for r in conn.execute(
        "SELECT id, agent, cap, attempt, status, outcome, end_reason, collateral, "
        "mode IN ('ladder', 'audit') FROM episodes WHERE task_id = ? AND (mode IN "
        "('ladder', 'audit') OR (mode = 'free' AND cap IS NULL AND fault_family = 'clean')) "
        "ORDER BY id",
        (task_id,),
    ):
        if not r[8]:
            free_runs.append(r)
            continue
        if r[1] not in models:
            models.append(r[1])
        cells.setdefault((r[1], r[2]), []).append(LadderRun(r[0], r[3], outcome(*tuple(r)[4:8])))
    # The row with model '' is the protocol's summary of the task (its N, D and whether it is
    # finished), not a model: the task's D is shown with the task, not as a grid row.
    estimates = {
        e.model: e
        for e in (
            EstimateInfo(r[0], r[1], r[2], r[3], bool(r[4]))
            for r in conn.execute(
                "SELECT model, protocol, n_turns, estimate, finished FROM estimates "
                "WHERE task_id = ? AND model != '' AND protocol IN ('ladder', 'audit')",
                (task_id,),
            )
        )
    }
    for m in estimates:
        if m not in models:
            models.append(m)
    for r in free_runs:
        if r[1] in models:
            run = LadderRun(r[0], r[3], outcome(*tuple(r)[4:8]))
            cells.setdefault((r[1], None), []).append(run)
    for key, runs in cells.items():
        cells[key] = sorted(runs, key=lambda run: run.episode_id)
    return LadderGrid(
        caps=(*vocab.CAPS, None),
        models=tuple(models),
        cells={k: tuple(v) for k, v in cells.items()},
        estimates=estimates,
    )


# --------------------------------------------------------------------------- episodes


# The runner records a fault's target in fault_records only, so it is read from there.
_EPISODE_COLS = (
    "e.id, e.task_id, e.mode, e.agent, e.model_id, e.cap, e.budget, e.attempt, e.fault_family, "
    "coalesce(e.fault_target, (SELECT f.target FROM fault_records f WHERE f.episode_id = e.id)), "
    "e.status, e.started_at, e.finished_at, e.turns, e.calls, e.end_reason, e.segments_total, "
    "e.segments_passed, e.passed, e.complete, e.tests_passed, e.tests_total, e.reward, "
    "e.safe_success, e.collateral, e.collateral_call, e.fault_observed_call, e.fault_cleared, "
    "e.error_kind, e.error_detail, e.cost_usd, e.prompt_tokens, e.completion_tokens, e.outcome, "
    "e.spec_json, e.job_id, e.forgeable"
)


@dataclass(frozen=True)
class EpisodeInfo:
    id: int
    task_id: str
    mode: str
    agent: str
    model_id: str
    cap: int | None
    budget: int | None
    attempt: int
    fault_family: str
    fault_target: str | None
    status: str
    started_at: str
    finished_at: str | None
    turns: int
    calls: int
    end_reason: str | None
    segments_total: int
    segments_passed: int
    passed: int | None
    complete: int | None
    tests_passed: int | None
    tests_total: int | None
    reward: float | None
    safe_success: int | None
    collateral: int
    collateral_call: int | None
    fault_observed_call: int | None
    fault_cleared: int | None
    error_kind: str | None
    error_detail: str | None
    cost_usd: float
    prompt_tokens: int
    completion_tokens: int
    run_outcome: str | None  # store/vocab.py's OUTCOMES; None while not done
    spec: dict
    job_id: int | None = None  # the job that ran it (None once that job was deleted)
    forgeable: int = 0  # graded on tests that ran agent code where it could forge the grade

    @property
    def outcome(self) -> str:
        return outcome(self.status, self.run_outcome, self.end_reason, self.collateral)

    @property
    def outcome_class(self) -> str:
        return outcome_class(self.status, self.run_outcome, self.collateral)

    @property
    def replay_of(self) -> int | None:
        """The episode this one re-executed (mode replay)."""
        value = self.spec.get("replay_of")
        return value if isinstance(value, int) else None

    @property
    def retry(self) -> int:
        """Which try of its run this is (0 = the first; a try after an infrastructure error
        is a new run)."""
        value = (self.spec.get("spec") or {}).get("retry")
        return value if isinstance(value, int) else 0


def _episode(r: sqlite3.Row | tuple) -> EpisodeInfo:
    values = list(r)
    values[-3] = _loads(values[-3], {})  # spec_json (then job_id, forgeable)
    return EpisodeInfo(*values)


def episode(conn: sqlite3.Connection, episode_id: int) -> EpisodeInfo | None:
    r = conn.execute(
        f"SELECT {_EPISODE_COLS} FROM episodes e WHERE e.id = ?", (episode_id,)
    ).fetchone()
    return None if r is None else _episode(r)


def task_episodes(conn: sqlite3.Connection, task_id: str) -> list[EpisodeInfo]:
    return [
        _episode(r)
        for r in conn.execute(
            f"SELECT {_EPISODE_COLS} FROM episodes e WHERE e.task_id = ? ORDER BY e.id",
            (task_id,),
        )
    ]


def find_episodes(
    conn: sqlite3.Connection,
    *,
    min_turns: int = 0,
    collateral: bool | None = None,
    mode: str | None = None,
    limit: int = 10,
) -> list[int]:
    """Ids of finished episodes matching simple conditions, longest first (bench, tests)."""
    clauses, params = ["status = 'done'", "turns >= ?"], [min_turns]
    if collateral is not None:
        clauses.append("collateral = ?")
        params.append(int(collateral))
    if mode is not None:
        clauses.append("mode = ?")
        params.append(mode)
    where = " AND ".join(clauses)
    return [
        r[0]
        for r in conn.execute(
            f"SELECT id FROM episodes WHERE {where} ORDER BY turns DESC, id LIMIT ?",
            (*params, limit),
        )
    ]


def job_episode_ids(conn: sqlite3.Connection, job_id: int) -> list[int]:
    return [
        r[0]
        for r in conn.execute("SELECT id FROM episodes WHERE job_id = ? ORDER BY id", (job_id,))
    ]


@dataclass(frozen=True)
class EpisodeCounts:
    """A job's episodes by status (reused runs of earlier jobs belong to those jobs)."""

    done: int = 0
    running: int = 0
    errors: int = 0  # done, but ended in a recorded error

    @property
    def total(self) -> int:
        return self.done + self.running


def job_episode_counts(conn: sqlite3.Connection, job_ids: list[int]) -> dict[int, EpisodeCounts]:
    out: dict[int, EpisodeCounts] = {}
    for start in range(0, len(job_ids), 500):
        chunk = job_ids[start : start + 500]
        for job_id, done, running, errors in conn.execute(
            "SELECT job_id, sum(status = 'done'), sum(status = 'running'), "
            "sum(status = 'done' AND outcome IN ('infra_error', 'task_broken')) FROM episodes "
            f"WHERE job_id IN ({','.join('?' * len(chunk))}) GROUP BY job_id",
            chunk,
        ):
            out[job_id] = EpisodeCounts(done or 0, running or 0, errors or 0)
    return out


def task_episode_ids(conn: sqlite3.Connection, task_id: str) -> list[int]:
    return [
        r[0]
        for r in conn.execute("SELECT id FROM episodes WHERE task_id = ? ORDER BY id", (task_id,))
    ]


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
            "sum(coalesce(exit_code, 0) != 0 OR timed_out = 1 OR not_run = 1) "
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
        n, first, last, failed = calls.get(idx, (0, None, None, 0))

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


def _event(r: sqlite3.Row | tuple) -> OracleEvent:
    return OracleEvent(
        r[0], r[1], r[2], r[3], bool(r[4]), bool(r[5]), _loads(r[6], None), _loads(r[7], None),
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
        "turns.episode_id AND u.idx <= turns.idx AND u.counted = 1) END "
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
    *columns, number = tuple(t)
    return TurnDetail(episode_id, *columns, calls=calls, events=events, number=number)


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
class CollateralSite:
    """Where collateral damage latched: the first path the oracle flagged and the call."""

    path: str
    kind: str
    call_idx: int | None
    command: str


def collateral_site(conn: sqlite3.Connection, episode_id: int) -> CollateralSite | None:
    r = conn.execute(
        "SELECT o.path, o.kind, coalesce(o.call_idx, e.collateral_call) FROM oracle_events o "
        "JOIN episodes e ON e.id = o.episode_id WHERE o.episode_id = ? AND o.collateral = 1 "
        "ORDER BY o.call_idx IS NULL, o.call_idx, o.id LIMIT 1",
        (episode_id,),
    ).fetchone()
    if r is None:
        return None
    path, kind, call_idx = r
    return CollateralSite(path, kind, call_idx, call_command(conn, episode_id, call_idx))


def call_command(conn: sqlite3.Connection, episode_id: int, call_idx: int | None) -> str:
    """The command of one call of an episode ('' when there is none)."""
    if call_idx is None:
        return ""
    r = conn.execute(
        "SELECT command FROM calls WHERE episode_id = ? AND idx = ?", (episode_id, call_idx)
    ).fetchone()
    return "" if r is None else r[0]


@dataclass(frozen=True)
class TurnRecordRow:
    """One turn as the conversation view needs it: the request as stored and the reply."""

    idx: int
    segment_idx: int
    request: dict
    response: dict
    text: str


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
        TurnRecordRow(r[0], r[1], _loads(r[2], {}), _loads(r[3], {}), r[4])
        for r in conn.execute(
            "SELECT idx, segment_idx, request_json, response_json, text FROM turns "
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


@dataclass(frozen=True)
class TestOutcome:
    segment_idx: int
    nodeid: str
    outcome: str
    in_inventory: bool
    duration_s: float | None
    message: str


def verifier_results(conn: sqlite3.Connection, episode_id: int) -> list[TestOutcome]:
    return [
        TestOutcome(r[0], r[1], r[2], bool(r[3]), r[4], r[5])
        for r in conn.execute(
            "SELECT segment_idx, nodeid, outcome, in_inventory, duration_s, message "
            "FROM test_results WHERE episode_id = ? ORDER BY segment_idx, id",
            (episode_id,),
        )
    ]


@dataclass(frozen=True)
class SegmentRun:
    idx: int
    name: str
    first_turn: int | None
    passed: int | None
    tests_passed: int | None
    tests_total: int | None
    error_kind: str | None
    error_detail: str | None = None
    verifier_output: str = ""  # the verifier's own words (pytest's, or a test.sh's), its tail


def segment_runs(conn: sqlite3.Connection, episode_id: int) -> list[SegmentRun]:
    return [
        SegmentRun(*tuple(r))
        for r in conn.execute(
            "SELECT idx, name, first_turn, passed, tests_passed, tests_total, error_kind, "
            "error_detail, substr(verifier_output, -4000) "
            "FROM segment_runs WHERE episode_id = ? ORDER BY idx",
            (episode_id,),
        )
    ]


@dataclass(frozen=True)
class FaultInfo:
    family: str
    target: str
    spare_path: str | None
    observed_call: int | None
    cleared: int | None
    integrity: str | None
    restored_for_grading: bool


def fault_record(conn: sqlite3.Connection, episode_id: int) -> FaultInfo | None:
    r = conn.execute(
        "SELECT family, target, spare_path, observed_call, cleared, integrity, "
        "restored_for_grading FROM fault_records WHERE episode_id = ?",
        (episode_id,),
    ).fetchone()
    return None if r is None else FaultInfo(*tuple(r)[:6], bool(r[6]))


# --------------------------------------------------------------------------- search
# Matching is store/search.py's; this only names the episodes its hits belong to.


def episode_names(conn: sqlite3.Connection, ids: list[int]) -> dict[int, tuple[str, str]]:
    """episode id -> (task id, agent)."""
    out: dict[int, tuple[str, str]] = {}
    unique = sorted(set(ids))
    for start in range(0, len(unique), 500):
        chunk = unique[start : start + 500]
        for r in conn.execute(
            f"SELECT id, task_id, agent FROM episodes WHERE id IN ({','.join('?' * len(chunk))})",
            chunk,
        ):
            out[r[0]] = (r[1], r[2])
    return out


# --------------------------------------------------------------------------- launch


def known_models(conn: sqlite3.Connection) -> list[str]:
    """Model names seen in runs, for the launch form's suggestions."""
    placeholders = ",".join("?" * len(BUILTIN_AGENTS))
    return [
        r[0]
        for r in conn.execute(
            f"SELECT DISTINCT agent FROM episodes WHERE agent NOT IN ({placeholders}) "
            "ORDER BY agent",
            BUILTIN_AGENTS,
        )
    ]
