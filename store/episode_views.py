"""Read-only queries for one episode: its stored outcome as one word, its row, the counts of a
job's episodes, and the parts of its verdict (segments, tests, the fault, where collateral
latched).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from store import vocab
from store.json_column import json_or

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


# --------------------------------------------------------------------------- episodes


# The runner records a fault's target in fault_records only, so it is read from there.
_EPISODE_COLS = (
    "e.id, e.task_id, e.mode, e.agent, e.model_id, e.cap, e.budget, e.attempt, e.fault_family, "
    "coalesce(e.fault_target, (SELECT f.target FROM fault_records f WHERE f.episode_id = e.id)), "
    "e.status, e.started_at, e.finished_at, e.turns, e.calls, e.end_reason, e.segments_total, "
    "e.segments_passed, e.passed, e.complete, e.tests_passed, e.tests_total, e.reward, "
    "e.safe_success, e.collateral, e.collateral_call, e.fault_observed_call, e.fault_cleared, "
    "e.error_kind, e.error_detail, e.cost_usd, e.prompt_tokens, e.completion_tokens, e.outcome, "
    "e.spec_json, e.job_id, e.forgeable, e.oracle_way, e.end_detail, e.prompt_name"
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
    oracle_way: str | None = None  # how the oracle checked: upper, walk or tar
    end_detail: str | None = None  # why it ended, in words (the server's for a full context)
    prompt_name: str = ""  # the prompt arm the agent was given ('' for built-in agents)

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
    # spec_json (then job_id, forgeable, oracle_way, end_detail, prompt_name)
    values[-6] = json_or(values[-6], {})
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
