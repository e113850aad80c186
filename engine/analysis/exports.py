"""Exports and imports: Harbor-shaped job folders with ATIF trajectories, training rows as
JSONL, and the import of Harbor trial folders made elsewhere.

A Harbor job folder as `harbor view` browses it:

    <out>/<job>/config.json, result.json
    <out>/<job>/<task>__<episode>/result.json, agent/trajectory.json,
                                   verifier/reward.txt, verifier/test-stdout.txt
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from engine.analysis import atif
from engine.tasks.model import Environment, Limits, Segment, Task
from store import episodes as ep
from store.db import Store
from store.exports import finished_episode_ids, task_content_hash
from store.tasks import upsert_task


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


def _rewards(bundle: EpisodeBundle) -> dict[str, float]:
    e = bundle.episode
    rewards: dict[str, float] = {}
    if e["reward"] is not None:
        rewards["reward"] = float(e["reward"])
    elif e["passed"] is not None:
        rewards["reward"] = 1.0 if e["passed"] else 0.0
    for seg in bundle.segments:
        for key, value in json.loads(seg.get("rewards_json") or "{}").items():
            if isinstance(value, int | float):
                rewards.setdefault(f"{seg['name'] or seg['idx']}.{key}", float(value))
    return rewards


def trial_result(bundle: EpisodeBundle, trial_name: str, job_dir: Path) -> dict[str, Any]:
    e = bundle.episode
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
        "task_name": e["task_id"],
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
        "agent_info": {
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
        "verifier_result": {"rewards": _rewards(bundle)},
        "exception_info": error,
        "started_at": e["started_at"],
        "finished_at": e["finished_at"],
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
        result = trial_result(bundle, trial_name, job_dir)
        _write_json(trial / "result.json", result)
        _write_json(trial / "config.json", result["config"])
        reward = result["verifier_result"]["rewards"].get("reward")
        if reward is not None:
            (trial / "verifier" / "reward.txt").write_text(f"{reward}\n")
            rewards.append(reward)
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


# --- import ------------------------------------------------------------------------------------


@dataclass
class ImportReport:
    imported: list[int] = field(default_factory=list)
    reused: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def find_trials(path: Path) -> list[Path]:
    """Trial folders under `path` (a job folder, a trial folder, or a folder of jobs)."""
    if (path / "agent" / "trajectory.json").is_file():
        return [path]
    return sorted(p.parent.parent for p in path.rglob("agent/trajectory.json"))


def import_harbor(store: Store, path: Path, dataset: str = "imported") -> ImportReport:
    """Import Harbor trial folders with ATIF trajectories so they can be browsed and reported.
    Idempotent: a trial already imported is reused, not duplicated."""
    report = ImportReport()
    trials = find_trials(path)
    if not trials:
        report.errors.append(f"{path}: no trial folder (agent/trajectory.json) found")
    for trial in trials:
        try:
            _import_trial(store, trial, dataset, report)
        except (atif.AtifError, ValueError, OSError) as exc:
            report.errors.append(f"{trial}: {exc}")
    return report


def _import_trial(store: Store, trial: Path, dataset: str, report: ImportReport) -> None:
    traj_path = trial / "agent" / "trajectory.json"
    raw = traj_path.read_bytes()
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise atif.AtifError(f"{traj_path}: not JSON ({exc})") from exc
    parsed = atif.parse(doc, str(traj_path))
    result: dict[str, Any] = {}
    result_path = trial / "result.json"
    result_raw = b""
    if result_path.is_file():
        result_raw = result_path.read_bytes()
        try:
            result = json.loads(result_raw)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{result_path}: not JSON ({exc})") from exc
    run_key = "import:" + hashlib.sha256(raw + b"\0" + result_raw).hexdigest()
    done = ep.find_done(store, run_key)
    if done is not None:
        report.reused.append(done["id"])
        return

    task_name = str(result.get("task_name") or trial.name.split("__")[0])
    task_id = task_name if "/" in task_name else f"{dataset}/{task_name}"
    task_hash = task_content_hash(store, task_id)
    if task_hash is None:
        task_hash = "imported:" + hashlib.sha256(task_id.encode()).hexdigest()[:16]
        first = parsed["segments"][0]["user_message"] if parsed["segments"] else ""
        upsert_task(store, _placeholder_task(task_id, dataset, trial, task_hash, first))

    rewards = (result.get("verifier_result") or {}).get("rewards") or {}
    reward = rewards.get("reward")
    reward = float(reward) if isinstance(reward, int | float) else None
    exception = result.get("exception_info") or None
    model = parsed["model"] or ((result.get("agent_info") or {}).get("model_info") or {}).get(
        "name", ""
    )
    episode_id = ep.create_episode(
        store,
        run_key=run_key,
        task_id=task_id,
        task_hash=task_hash,
        mode="imported",
        agent=parsed["agent"] or model or parsed["agent_name"] or "imported",
        model_id=model,
        prompt_name="imported",
        prompt_text=parsed["system"],
        spec_json={"imported_from": str(trial), "session_id": parsed["session_id"]},
        segments_total=max(len(parsed["segments"]), 1),
        started_at=result.get("started_at") or datetime.now(UTC).isoformat(),
    )
    segments = parsed["segments"] or [{"user_message": "", "first_turn": 1}]
    for idx, seg in enumerate(segments):
        ep.add_segment_run(
            store,
            episode_id,
            idx,
            seg["user_message"],
            name=f"segment-{idx}",
            first_turn=seg["first_turn"],
        )
    for n, turn in enumerate(parsed["turns"], 1):
        ep.record_turn(
            store,
            episode_id,
            {
                "idx": n,
                "segment_idx": turn["segment_idx"],
                "text": turn["text"],
                "reasoning": turn["reasoning"],
                "prompt_tokens": turn["prompt_tokens"],
                "completion_tokens": turn["completion_tokens"],
                "cached_tokens": turn["cached_tokens"],
                "cost_usd": turn["cost_usd"],
                **({"created_at": turn["timestamp"]} if turn["timestamp"] else {}),
            },
            [
                {
                    "idx": c["idx"],
                    "tool_call_id": c["tool_call_id"],
                    "command": c["command"],
                    "observation": c["observation"],
                }
                for c in turn["calls"]
            ],
            {c["idx"]: c["observation"].encode() for c in turn["calls"]},
        )
    passed = None if reward is None else reward >= 1.0
    ep.finish_episode(
        store,
        episode_id,
        passed=passed,
        reward=reward,
        segments_passed=len(segments) if passed else 0,
        error_kind="imported_error" if exception else None,
        error_detail=(exception or {}).get("exception_message") if exception else None,
        finished_at=result.get("finished_at") or datetime.now(UTC).isoformat(),
        end_reason="imported",
    )
    report.imported.append(episode_id)


def _placeholder_task(
    task_id: str, dataset: str, trial: Path, content_hash: str, instruction: str
) -> Task:
    """A task known only from its runs: enough to browse and report them."""
    return Task(
        id=task_id,
        dataset=task_id.split("/", 1)[0] if "/" in task_id else dataset,
        format="harbor",
        source_path=trial,
        content_hash=content_hash,
        segments=(
            Segment(
                name="main",
                instruction=instruction,
                tests={},
                solution_script=None,
                solution_dir=None,
            ),
        ),
        environment=Environment(context_dir=None, dockerfile=None),
        limits=Limits(),
        verifier_kind="harbor",
        name=task_id,
        warnings=("imported from Harbor results: the task folder itself is not in the store",),
    )
