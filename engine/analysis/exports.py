"""Exports: Harbor-shaped job folders with ATIF trajectories, and training rows as JSONL (the
import of Harbor trial folders made elsewhere is harbor_import.py).

A Harbor job folder as `harbor view` browses it:

    <out>/<job>/config.json, result.json
    <out>/<job>/<task>__<episode>/result.json, agent/trajectory.json,
                                   verifier/reward.txt (or reward.json), verifier/ctrf.json,
                                   verifier/test-stdout.txt, depthtui.json

The reward files and result.json's rewards hold what Harbor would have written (the task's own
reward, 0/1 for most tasks); depthtui's partial-credit reward, outcome, fault and the rest are in
depthtui.json (harbor_files.py). A trial imported from Harbor goes back out with its own
agent_info and per-phase timestamps.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from engine.analysis import atif, harbor_files
from store import episodes as ep
from store.exports import finished_episode_ids


def depthtui_version() -> str:
    try:
        return version("depthtui")
    except PackageNotFoundError:
        return "0"


@dataclass(frozen=True)
class EpisodeBundle:
    """One stored episode with everything an export needs."""

    episode: dict[str, Any]
    segments: list[dict[str, Any]]
    turns: list[dict[str, Any]]
    calls: list[dict[str, Any]]
    tests: list[dict[str, Any]]

    @classmethod
    def load(cls, conn: sqlite3.Connection, episode_id: int) -> EpisodeBundle:
        episode = ep.get_episode(conn, episode_id)
        if episode is None:
            raise ValueError(f"no episode {episode_id} in the store")
        return cls(
            episode,
            ep.list_segment_runs(conn, episode_id),
            ep.list_turns(conn, episode_id),
            ep.list_calls(conn, episode_id),
            ep.list_test_results(conn, episode_id),
        )

    def trajectory(self) -> dict[str, Any]:
        return atif.trajectory(
            self.episode, self.segments, self.turns, self.calls, depthtui_version()
        )


def select_episodes(
    conn: sqlite3.Connection,
    *,
    episode_ids: list[int] | None = None,
    job_id: int | None = None,
    task_ids: list[str] | None = None,
    model: str | None = None,
    mode: str | None = None,
) -> list[int]:
    """Ids of finished episodes matching every given filter, oldest first."""
    return finished_episode_ids(
        conn, episode_ids=episode_ids, job_id=job_id, task_ids=task_ids, agent=model, mode=mode
    )


# --- Harbor-shaped results ---------------------------------------------------------------------


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def _rewards(bundle: EpisodeBundle, harbor: dict[str, float]) -> dict[str, float]:
    """result.json's rewards: Harbor's own, and for a multi-step run each step's as
    `<step>.<key>` (a single step's are the trial's)."""
    rewards = dict(harbor)
    if len(bundle.segments) > 1:
        for seg in bundle.segments:
            for key, value in json.loads(seg.get("rewards_json") or "{}").items():
                if isinstance(value, int | float):
                    rewards.setdefault(f"{seg['name'] or seg['idx']}.{key}", float(value))
    return rewards


def _imported(e: dict[str, Any]) -> dict[str, Any]:
    """What an episode imported from a Harbor trial kept of its result.json (harbor_import.py)."""
    spec = json.loads(e["spec_json"] or "{}")
    harbor = spec.get("harbor") if isinstance(spec, dict) else None
    return harbor if isinstance(harbor, dict) else {}


def trial_result(
    bundle: EpisodeBundle, trial_name: str, job_dir: Path, harbor: dict[str, float]
) -> dict[str, Any]:
    e = bundle.episode
    kept = _imported(e)
    error = None
    if e["error_kind"]:
        error = {
            "exception_type": e["error_kind"],
            "exception_message": e["error_detail"] or "",
            "exception_traceback": "",
            "occurred_at": e["finished_at"],
        }
    return {
        "id": hashlib.sha256(e["run_key"].encode()).hexdigest()[:32],
        "task_name": kept.get("task_name") or e["task_id"],
        "trial_name": trial_name,
        "trial_uri": (job_dir / trial_name).resolve().as_uri(),
        "task_id": {"path": e["task_id"]},
        "source": e["task_id"].split("/", 1)[0],
        "task_checksum": e["task_hash"],
        "config": {
            "task": {"path": e["task_id"]},
            "trial_name": trial_name,
            "agent": {"name": e["agent"], "model_name": e["model_id"] or e["agent"]},
            "depthtui": json.loads(e["spec_json"] or "{}"),
        },
        "agent_info": kept.get("agent_info")
        or {
            "name": AGENT_INFO_NAME,
            "version": depthtui_version(),
            "model_info": {"name": e["model_id"] or e["agent"], "provider": e["agent"]},
        },
        "agent_result": {
            "n_input_tokens": e["prompt_tokens"],
            "n_cache_tokens": sum(t["cached_tokens"] for t in bundle.turns),
            "n_output_tokens": e["completion_tokens"],
            "cost_usd": e["cost_usd"],
            "metadata": {
                "turns": e["turns"],
                "calls": e["calls"],
                "end_reason": e["end_reason"],
                # Graded as Harbor grades it, although the tests ran agent-written code where it
                # could forge the reward (docs/realtasks.md).
                "forgeable_by_agent_code": bool(e.get("forgeable")),
                "forgeable_evidence": e.get("forgeable_evidence"),
            },
        },
        "verifier_result": {"rewards": _rewards(bundle, harbor)} if harbor else None,
        "exception_info": error,
        "started_at": e["started_at"],
        "finished_at": e["finished_at"],
        **{p: kept["phases"][p] for p in sorted(kept.get("phases") or {})},
    }


AGENT_INFO_NAME = "depthtui"


def export_harbor(
    conn: sqlite3.Connection, episode_ids: list[int], out_dir: Path, job_name: str
) -> Path:
    """Write one Harbor job folder holding one trial per episode; returns the job folder."""
    job_dir = out_dir / _safe(job_name)
    job_dir.mkdir(parents=True, exist_ok=True)
    rewards: list[float] = []
    started, finished = [], []
    errors = 0
    forgeable: list[int] = []
    for episode_id in episode_ids:
        bundle = EpisodeBundle.load(conn, episode_id)
        e = bundle.episode
        if e.get("forgeable"):
            forgeable.append(episode_id)
        trial_name = _safe(f"{e['task_id'].split('/')[-1]}__{episode_id}")
        trial = job_dir / trial_name
        (trial / "agent").mkdir(parents=True, exist_ok=True)
        (trial / "verifier").mkdir(parents=True, exist_ok=True)
        _write_json(trial / "agent" / "trajectory.json", bundle.trajectory())
        harbor = harbor_files.harbor_rewards(conn, e, bundle.segments)
        result = trial_result(bundle, trial_name, job_dir, harbor)
        _write_json(trial / "result.json", result)
        _write_json(trial / "config.json", result["config"])
        harbor_files.write_reward_files(trial / "verifier", harbor)
        if "reward" in harbor:
            rewards.append(harbor["reward"])
        if bundle.tests:
            report = harbor_files.ctrf_report(bundle.tests)
            _write_json(trial / "verifier" / harbor_files.CTRF_FILE, report)
        record = harbor_files.depthtui_record(
            conn, e, bundle.segments, bundle.turns, bundle.calls, bundle.tests
        )
        _write_json(trial / harbor_files.DEPTHTUI_FILE, record)
        output = "\n".join(s["verifier_output"] for s in bundle.segments if s["verifier_output"])
        (trial / "verifier" / "test-stdout.txt").write_text(output)
        errors += bool(e["error_kind"])
        started.append(e["started_at"])
        finished.append(e["finished_at"] or e["started_at"])
    _write_json(
        job_dir / "config.json",
        {"job_name": job_name, "episodes": episode_ids, "forgeable_episodes": forgeable},
    )
    _write_json(
        job_dir / "result.json",
        {
            "id": hashlib.sha256(job_name.encode()).hexdigest()[:32],
            "started_at": min(started) if started else None,
            "finished_at": max(finished) if finished else None,
            "n_total_trials": len(episode_ids),
            "stats": {
                "n_trials": len(episode_ids),
                "n_errors": errors,
                "mean_reward": sum(rewards) / len(rewards) if rewards else None,
            },
        },
    )
    return job_dir


def _write_json(path: Path, doc: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    tmp.replace(path)


# --- training rows -----------------------------------------------------------------------------


def training_rows(conn: sqlite3.Connection, episode_ids: list[int]) -> Iterator[dict[str, Any]]:
    """One row per passing segment of an episode without error: the conversation from the
    system prompt through that segment's last turn, as chat messages with tool calls."""
    for episode_id in episode_ids:
        bundle = EpisodeBundle.load(conn, episode_id)
        e = bundle.episode
        if e["error_kind"] or e["agent"] in ("oracle", "nop", "replay"):
            continue
        messages: list[dict[str, Any]] = []
        if e["prompt_text"]:
            messages.append({"role": "system", "content": e["prompt_text"]})
        by_segment: dict[int, list[dict]] = {}
        for turn in bundle.turns:
            by_segment.setdefault(turn["segment_idx"], []).append(turn)
        calls_by_turn: dict[int, list[dict]] = {}
        for call in bundle.calls:
            calls_by_turn.setdefault(call["turn_idx"], []).append(call)
        for seg in bundle.segments:
            messages.append({"role": "user", "content": seg["user_message"]})
            for turn in by_segment.get(seg["idx"], []):
                mine = calls_by_turn.get(turn["idx"], [])
                msg: dict[str, Any] = {"role": "assistant", "content": turn["text"] or ""}
                if mine:
                    msg["tool_calls"] = [
                        {
                            "id": c["tool_call_id"] or f"call_{c['idx']}",
                            "type": "function",
                            "function": {
                                "name": atif.TOOL_NAME,
                                "arguments": json.dumps({"command": c["command"]}),
                            },
                        }
                        for c in mine
                    ]
                messages.append(msg)
                for c in mine:
                    messages.append(
                        {
                            "role": "tool",
                            "tool_call_id": c["tool_call_id"] or f"call_{c['idx']}",
                            "content": c["observation"],
                        }
                    )
            if not seg["passed"]:
                break
            yield {
                "messages": [dict(m) for m in messages],
                "tools": [atif.TOOL_DEFINITION],
                "metadata": {
                    "episode": episode_id,
                    "task": e["task_id"],
                    "segment": seg["idx"],
                    "segment_name": seg["name"],
                    "model": e["agent"],
                    "cap": e["cap"],
                    "mode": e["mode"],
                    "forgeable_by_agent_code": bool(e.get("forgeable")),
                },
            }
