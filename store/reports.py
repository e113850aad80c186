"""Read-only queries that reports and exports are built from. They take any connection, so a
report can be printed from a read-only viewer connection while the engine writes."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable


def _rows(conn: sqlite3.Connection, sql: str, params: Iterable = ()) -> list[dict]:
    cur = conn.execute(sql, tuple(params))
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def tasks(conn: sqlite3.Connection, task_ids: list[str] | None = None) -> list[dict]:
    # The dataset's group (dataset.toml's `group`) is what the plots' reference lines are over.
    sql = (
        "SELECT t.id, t.dataset, t.name, t.format, t.segments, t.work, t.content_hash, "
        "t.task_json, d.group_name AS dataset_group "
        "FROM tasks t LEFT JOIN datasets d ON d.name = t.dataset"
    )
    rows = _rows(conn, sql + " ORDER BY t.dataset, t.id")
    for row in rows:
        record = json.loads(row.pop("task_json") or "{}")
        row["metadata"] = record.get("metadata", {})
        row["needs"] = record.get("needs", [])  # what one offline container cannot give
    if task_ids is not None:
        wanted = set(task_ids)
        rows = [r for r in rows if r["id"] in wanted]
    return rows


def estimates(conn: sqlite3.Connection, protocol: str) -> list[dict]:
    rows = _rows(
        conn,
        "SELECT task_id, task_hash, protocol, model, n_turns, estimate, finished, detail_json "
        "FROM estimates WHERE protocol = ?",
        (protocol,),
    )
    for row in rows:
        row["detail"] = json.loads(row.pop("detail_json") or "{}")
    return rows


def estimator_names(conn: sqlite3.Connection) -> list[str]:
    """Every estimator that has estimates ("ladder", "ladder+moved_input", "ladder/bisect")."""
    return [r[0] for r in conn.execute("SELECT DISTINCT protocol FROM estimates ORDER BY 1")]


def fault_protocols(conn: sqlite3.Connection) -> list[str]:
    """Protocols measured under a fault (recovery depth): "ladder+<family>", "audit+<family>"."""
    return [
        row[0]
        for row in conn.execute(
            "SELECT DISTINCT protocol FROM estimates WHERE protocol LIKE '%+%' ORDER BY protocol"
        )
    ]


def done_episodes(
    conn: sqlite3.Connection,
    modes: tuple[str, ...] | None,
    model: str | None = None,
) -> list[dict]:
    """Finished episodes of the given modes (None: every mode; newest task content only), one
    row each."""
    marks = ",".join("?" for _ in modes or ())
    sql = (
        "SELECT e.id, e.task_id, e.task_hash, e.mode, e.agent, e.cap, e.budget, e.attempt, "
        "e.prompt_name, e.fault_family, e.turns, e.calls, e.passed, e.complete, e.tests_passed, "
        "e.tests_total, e.reward, e.safe_success, e.collateral, e.fault_observed_call, "
        "e.fault_cleared, e.error_kind, e.end_reason, e.cost_usd, e.segments_total, "
        "e.segments_passed, e.timings_json, e.outcome, e.forgeable, e.oracle_way, "
        "e.prompt_tokens, e.completion_tokens, e.cached_tokens, e.priced "
        "FROM episodes e JOIN tasks t ON t.id = e.task_id AND t.content_hash = e.task_hash "
        "WHERE e.status = 'done'" + (f" AND e.mode IN ({marks})" if modes is not None else "")
    )
    params: list = list(modes or ())
    if model is not None:
        sql += " AND e.agent = ?"
        params.append(model)
    return _rows(conn, sql + " ORDER BY e.id", params)


def forgeable_counts(conn: sqlite3.Connection) -> dict[str, int]:
    """Per task (newest content only): finished runs graded on tests that ran agent code where
    it could forge the grade."""
    sql = (
        "SELECT e.task_id, count(*) FROM episodes e "
        "JOIN tasks t ON t.id = e.task_id AND t.content_hash = e.task_hash "
        "WHERE e.status = 'done' AND e.forgeable = 1 GROUP BY e.task_id"
    )
    return {row[0]: row[1] for row in conn.execute(sql)}


def repeat_runs(conn: sqlite3.Connection, modes: tuple[str, ...]) -> list[dict]:
    """Finished model runs of these modes (newest task content), each with the temperature it
    was configured with and a digest of its transcript (every turn's words and reasoning, every
    command and what it showed), so that repeated attempts can be compared."""
    import hashlib

    marks = ",".join("?" for _ in modes)
    rows = _rows(
        conn,
        "SELECT e.id, e.task_id, e.agent, e.cap, e.budget, e.fault_family, e.prompt_name, "
        "e.mode, e.attempt, "
        "json_extract(e.spec_json, '$.model.sampling.temperature') AS temperature "
        "FROM episodes e JOIN tasks t ON t.id = e.task_id AND t.content_hash = e.task_hash "
        "WHERE e.status = 'done' AND e.outcome IN ('pass', 'fail', 'agent_error') "
        f"AND e.mode IN ({marks}) "
        "AND json_extract(e.spec_json, '$.model.kind') = 'chat' ORDER BY e.id",
        modes,
    )
    digests = {r["id"]: hashlib.sha256() for r in rows}
    if digests:
        ids = ",".join(str(i) for i in digests)
        for eid, idx, text, reasoning in conn.execute(
            f"SELECT episode_id, idx, text, reasoning FROM turns WHERE episode_id IN ({ids}) "
            "ORDER BY episode_id, idx"
        ):
            digests[eid].update(f"turn {idx}\0{text}\0{reasoning}\0".encode())
        for eid, idx, command, observation in conn.execute(
            f"SELECT episode_id, idx, command, observation FROM calls WHERE episode_id IN ({ids}) "
            "ORDER BY episode_id, idx"
        ):
            digests[eid].update(f"call {idx}\0{command}\0{observation}\0".encode())
    for row in rows:
        row["transcript"] = digests[row["id"]].hexdigest()
    return rows


def rl_rollouts(conn: sqlite3.Connection, model: str | None = None) -> list[dict]:
    """Finished `rl` episodes (newest task content), each with the trainer's step and group
    index from its spec (`spec.rollout`, engine/rl); None where the trainer gave none."""
    sql = (
        "SELECT e.id, e.task_id, e.agent, e.outcome, e.reward, e.safe_success, e.collateral, "
        "json_extract(e.spec_json, '$.spec.rollout.step') AS step, "
        "json_extract(e.spec_json, '$.spec.rollout.group') AS rollout_group "
        "FROM episodes e JOIN tasks t ON t.id = e.task_id AND t.content_hash = e.task_hash "
        "WHERE e.status = 'done' AND e.mode = 'rl'"
    )
    params: list = []
    if model is not None:
        sql += " AND e.agent = ?"
        params.append(model)
    return _rows(conn, sql + " ORDER BY e.id", params)
