"""The files of a Harbor trial folder beyond result.json and the trajectory, both ways: what
Harbor's verifier leaves (verifier/reward.txt or reward.json, verifier/ctrf.json), and
depthtui's own record of an episode (depthtui.json) that Harbor has no field for.

Harbor's reward is what the task's test.sh wrote (0/1 for most tasks), combined over steps by
the task's multi-step strategy; depthtui's own partial-credit reward, outcome, fault, collateral,
oracle events, per-test rows and exit codes go to depthtui.json under depthtui's own names, so
`import harbor` reads back what `export harbor` wrote without loss (docs/realtasks.md).
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from engine.verify.rewards import RewardError, combine_steps, parse_rewards

DEPTHTUI_FILE = "depthtui.json"
DEPTHTUI_FORMAT = "depthtui-episode-1"
CTRF_FILE = "ctrf.json"

# CTRF's statuses (ctrf.io) from test_results.outcome, and back.
_TO_CTRF = {"passed": "passed", "failed": "failed", "skipped": "skipped", "error": "failed"}
_FROM_CTRF = {"passed": "passed", "failed": "failed", "skipped": "skipped", "pending": "skipped"}

# Episode columns that belong to the store that holds the row, not to the run.
_LOCAL_COLUMNS = ("id", "job_id", "owner", "container_id", "status")
# Row columns that only link a row to its episode (or are its own id).
_LINK_COLUMNS = ("id", "episode_id")


# --- Harbor's reward -------------------------------------------------------------------------


def harbor_rewards(conn: sqlite3.Connection, episode: dict, segments: list[dict]) -> dict:
    """What Harbor's verifier_result.rewards would hold: the reward file each graded step's
    test.sh wrote, combined over steps by the task's strategy ({} when no step has one)."""
    steps: list[dict[str, float] | None] = []
    for seg in segments:
        rewards = json.loads(seg.get("rewards_json") or "{}")
        steps.append(rewards if rewards and not seg.get("error_kind") else None)
    if len(steps) <= 1:
        return dict(steps[0] or {}) if steps else {}
    strategy = _reward_strategy(conn, episode["task_id"])
    return combine_steps(steps, strategy)


def _reward_strategy(conn: sqlite3.Connection, task_id: str) -> str:
    row = conn.execute("SELECT task_json FROM tasks WHERE id = ?", (task_id,)).fetchone()
    try:
        strategy = json.loads(row[0]).get("reward_strategy") if row else None
    except (TypeError, ValueError, AttributeError):
        strategy = None
    return strategy if strategy in ("mean", "final") else "mean"


def write_reward_files(verifier: Path, rewards: dict[str, float]) -> None:
    """reward.txt for a lone `reward` key (as most test.sh write it), reward.json otherwise."""
    if not rewards:
        return
    if set(rewards) == {"reward"}:
        (verifier / "reward.txt").write_text(f"{rewards['reward']}\n")
    else:
        (verifier / "reward.json").write_text(json.dumps(rewards) + "\n")


def read_reward_files(verifier: Path) -> dict[str, float] | None:
    """The rewards Harbor's verifier would parse from the folder (reward.json wins); None when
    neither file is there or readable."""

    def read(name: str) -> bytes | None:
        try:
            return (verifier / name).read_bytes()
        except OSError:
            return None

    json_bytes, txt_bytes = read("reward.json"), read("reward.txt")
    if json_bytes is None and txt_bytes is None:
        return None
    try:
        return parse_rewards(json_bytes, txt_bytes)
    except RewardError:
        return None


# --- CTRF per-test results -------------------------------------------------------------------


def ctrf_report(tests: list[dict[str, Any]]) -> dict[str, Any]:
    """The per-test rows as a CTRF report (what pytest-json-ctrf writes for `--ctrf`); depthtui's
    own fields of each row ride in the test's `extra`."""
    entries = []
    for t in tests:
        status = _TO_CTRF.get(t["outcome"], "other")
        entry: dict[str, Any] = {
            "name": t["nodeid"],
            "status": status,
            "duration": round((t.get("duration_s") or 0.0) * 1000),
            "extra": {
                "depthtui": {k: v for k, v in t.items() if k not in _LINK_COLUMNS and k != "nodeid"}
            },
        }
        if t.get("message"):
            entry["message"] = t["message"]
        entries.append(entry)
    summary = {s: sum(e["status"] == s for e in entries) for s in _CTRF_STATUSES}
    return {
        "results": {
            "tool": {"name": "pytest"},
            "summary": {"tests": len(entries), **summary, "start": 0, "stop": 0},
            "tests": entries,
        }
    }


_CTRF_STATUSES = ("passed", "failed", "pending", "skipped", "other")


def read_ctrf(path: Path) -> list[dict[str, Any]] | None:
    """test_results rows from a CTRF report (ours or pytest-json-ctrf's); None when absent or
    not a CTRF report. depthtui's own row fields come back from `extra` when there."""
    try:
        doc = json.loads(path.read_bytes())
        tests = doc["results"]["tests"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(tests, list):
        return None
    rows = []
    for t in tests:
        if not isinstance(t, dict) or "name" not in t:
            continue
        own = ((t.get("extra") or {}).get("depthtui")) if isinstance(t.get("extra"), dict) else None
        if isinstance(own, dict):
            rows.append({**own, "nodeid": str(t["name"])})
            continue
        duration = t.get("duration")
        rows.append(
            {
                "nodeid": str(t["name"]),
                "outcome": _FROM_CTRF.get(str(t.get("status")), "error"),
                "duration_s": float(duration) / 1000 if isinstance(duration, int | float) else None,
                "message": str(t.get("message") or ""),
            }
        )
    return rows


# --- depthtui.json ---------------------------------------------------------------------------


def depthtui_record(
    conn: sqlite3.Connection,
    episode: dict[str, Any],
    segments: list[dict[str, Any]],
    turns: list[dict[str, Any]],
    calls: list[dict[str, Any]],
    tests: list[dict[str, Any]],
) -> dict[str, Any]:
    """Everything the store holds of an episode that Harbor's files do not: its columns
    (outcome, partial reward, fault, collateral, timings), segment and test rows, the oracle's
    events, the fault record, and each turn's and call's own fields (exit codes)."""
    eid = episode["id"]

    def strip(row: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in row.items() if k not in _LINK_COLUMNS}

    events = conn.execute(
        "SELECT * FROM oracle_events WHERE episode_id = ? ORDER BY id", (eid,)
    ).fetchall()
    names = [d[0] for d in conn.execute("SELECT * FROM oracle_events LIMIT 0").description]
    fault = conn.execute("SELECT * FROM fault_records WHERE episode_id = ?", (eid,)).fetchone()
    fault_names = [d[0] for d in conn.execute("SELECT * FROM fault_records LIMIT 0").description]
    return {
        "format": DEPTHTUI_FORMAT,
        "episode": {k: v for k, v in episode.items() if k not in _LOCAL_COLUMNS},
        "segments": [strip(s) for s in segments],
        "tests": [strip(t) for t in tests],
        "turns": [
            {k: t[k] for k in ("idx", "counted", "format_error", "finish_reason", "latency_ms")}
            for t in turns
        ],
        "calls": [
            {k: v for k, v in strip(c).items() if k not in ("observation", "command")}
            for c in calls
        ],
        "oracle_events": [strip(dict(zip(names, r, strict=True))) for r in events],
        "fault_record": strip(dict(zip(fault_names, fault, strict=True))) if fault else None,
    }


def read_depthtui_record(trial: Path) -> dict[str, Any] | None:
    """A trial's depthtui.json, or None when it has none. A file that is there but not ours
    is an error naming it (imported half-way it would be a wrong episode)."""
    path = trial / DEPTHTUI_FILE
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("format") != DEPTHTUI_FORMAT:
        got = doc.get("format") if isinstance(doc, dict) else type(doc).__name__
        raise ValueError(f"{path}: format {got!r}; expected {DEPTHTUI_FORMAT!r}")
    for key, kind in (("episode", dict), ("segments", list), ("tests", list), ("calls", list)):
        if not isinstance(doc.get(key), kind):
            raise ValueError(f"{path}: field '{key}' must be a {kind.__name__}")
    return doc


# Columns of a saved episode that the importing store sets itself.
_IMPORT_OWNS = ("id", "run_key", "mode", "task_id", "task_hash", "spec_json", "status")


def restore_record(store: Any, episode_id: int, record: dict[str, Any]) -> dict[str, Any]:
    """Write a depthtui.json's rows into the store under `episode_id` (an episode being
    imported, inside the import's transaction): its segments replace the ones read from the
    trajectory; tests, oracle events and the fault record are added; turns and calls get their
    own fields (exit codes) back by idx. Returns the episode columns to finish it with."""
    from store import episodes as ep

    conn = store.conn

    def known(table: str, row: dict[str, Any], skip: tuple[str, ...] = ()) -> dict[str, Any]:
        columns = set(store.columns(table))
        return {k: v for k, v in row.items() if k in columns and k not in skip}

    conn.execute("DELETE FROM segment_runs WHERE episode_id = ?", (episode_id,))
    for seg in record["segments"]:
        row = known("segment_runs", seg, ("idx", "user_message"))
        ep.add_segment_run(store, episode_id, int(seg["idx"]), str(seg["user_message"]), **row)
    ep.add_test_results(store, episode_id, [known("test_results", t) for t in record["tests"]])
    for table, rows in (("turns", record.get("turns") or []), ("calls", record["calls"])):
        for row in rows:
            fields = known(table, row, ("idx", "turn_idx", "tool_call_id", "command"))
            if not fields:
                continue
            sets = ", ".join(f"{k} = ?" for k in fields)
            conn.execute(
                f"UPDATE {table} SET {sets} WHERE episode_id = ? AND idx = ?",
                (*fields.values(), episode_id, row["idx"]),
            )
    events = [known("oracle_events", e) for e in record.get("oracle_events") or []]
    ep.add_oracle_events(store, episode_id, events)
    if record.get("fault_record"):
        ep.set_fault_record(store, episode_id, **known("fault_records", record["fault_record"]))
    return known("episodes", record["episode"], _IMPORT_OWNS)
