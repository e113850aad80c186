"""`depthtui import harbor`: trial folders as Harbor (0.26) writes them, into the store.

A trial folder holds `result.json` (its TrialResult: task, agent, rewards, exception, timings)
and, for agents that record one, `agent/trajectory.json` (ATIF 1.2 to 1.7). Harbor's oracle,
nop and installed agents write no trajectory: such a trial is imported with its result,
reward, timings and verifier output, and no turns. A job folder holds trial folders beside its
own `result.json` and `config.json` (which are not trials).

The reward is Harbor's (verifier_result.rewards, else verifier/reward.json or reward.txt); per-test
rows come from verifier/ctrf.json where the task's tests wrote one. A trial that depthtui exported
carries depthtui.json beside them: its outcome, partial reward, fault, per-test rows, oracle
events and exit codes come back from it as they were (harbor_files.py). A Harbor trial keeps its
agent_info and per-phase timestamps, so it goes back out as it came in.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.analysis import atif, harbor_files
from engine.tasks.model import Environment, Limits, Segment, Task
from store import episodes as ep
from store.db import Store
from store.exports import task_content_hash
from store.tasks import upsert_task

# The phases a TrialResult times, in the order they run (each {started_at, finished_at}).
TIMED_PHASES = ("environment_setup", "agent_setup", "agent_execution", "verifier")
# Harbor's own result keys of a trial (a job's result.json has none of them).
_TRIAL_KEYS = ("trial_name", "task_name", "verifier_result", "agent_result", "agent_info")
OUTPUT_LIMIT = 8000


@dataclass
class ImportReport:
    imported: list[int] = field(default_factory=list)
    reused: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def is_trial(folder: Path) -> bool:
    """A trial folder: it has an ATIF trajectory, or a result.json that is a trial's."""
    if (folder / "agent" / "trajectory.json").is_file():
        return True
    doc = _read_json(folder / "result.json", quiet=True)
    return isinstance(doc, dict) and any(k in doc for k in _TRIAL_KEYS)


def find_trials(path: Path) -> list[Path]:
    """Trial folders under `path` (a trial folder, a job folder, or a folder of jobs)."""
    if is_trial(path):
        return [path]
    found = {p.parent.parent for p in path.rglob("agent/trajectory.json")}
    found |= {p.parent for p in path.rglob("result.json") if is_trial(p.parent)}
    return sorted(found)


def import_harbor(store: Store, path: Path, dataset: str = "imported") -> ImportReport:
    """Import Harbor trial folders so they can be browsed and reported. Idempotent: a trial
    already imported is reused, not duplicated."""
    report = ImportReport()
    trials = find_trials(path)
    if not trials:
        report.errors.append(
            f"{path}: no trial folder (a result.json of a Harbor trial, or agent/trajectory.json) "
            "found"
        )
    for trial in trials:
        try:
            _import_trial(store, trial, dataset, report)
        except (atif.AtifError, ValueError, OSError) as exc:
            report.errors.append(f"{trial}: {exc}")
    return report


def _read_json(path: Path, quiet: bool = False) -> Any:
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        if quiet:
            return None
        raise ValueError(f"{path}: not JSON ({exc})") from exc


_NO_TRAJECTORY: dict[str, Any] = {
    "session_id": "",
    "agent_name": "",
    "model": "",
    "agent": "",
    "system": "",
    "segments": [],
    "turns": [],
}


def _import_trial(store: Store, trial: Path, dataset: str, report: ImportReport) -> None:
    traj_path = trial / "agent" / "trajectory.json"
    raw = traj_path.read_bytes() if traj_path.is_file() else b""
    parsed = dict(_NO_TRAJECTORY)
    if raw:
        try:
            doc = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise atif.AtifError(f"{traj_path}: not JSON ({exc})") from exc
        parsed = atif.parse(doc, str(traj_path))
    result_path = trial / "result.json"
    result_raw = result_path.read_bytes() if result_path.is_file() else b""
    result = _read_json(result_path) or {}
    if not isinstance(result, dict):
        raise ValueError(f"{result_path}: expected a JSON object (Harbor's TrialResult)")
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

    record = harbor_files.read_depthtui_record(trial)
    rewards = _rewards(result) or harbor_files.read_reward_files(trial / "verifier") or {}
    info = result.get("agent_info") or {}
    spec: dict[str, Any] = {}
    if record is not None:
        saved = record["episode"].get("spec_json")
        spec = json.loads(saved) if isinstance(saved, str) and saved.startswith("{") else {}
        spec["exported_mode"] = record["episode"].get("mode")
    else:
        # What depthtui has no column for, kept so an export writes the trial back as it was.
        spec["harbor"] = {
            "task_name": result.get("task_name"),
            "agent_info": info or None,
            "phases": {p: result[p] for p in TIMED_PHASES if isinstance(result.get(p), dict)},
        }
    spec["trajectory"] = bool(raw)
    with store.tx():
        episode_id = _write_trial(
            store, trial, run_key, task_id, task_hash, parsed, result, record, spec, rewards
        )
    report.imported.append(episode_id)


def _write_trial(
    store: Store,
    trial: Path,
    run_key: str,
    task_id: str,
    task_hash: str,
    parsed: dict[str, Any],
    result: dict[str, Any],
    record: dict[str, Any] | None,
    spec: dict[str, Any],
    rewards: dict[str, float],
) -> int:
    reward = rewards.get("reward")
    exception = result.get("exception_info") or None
    info = result.get("agent_info") or {}
    model = parsed["model"] or (info.get("model_info") or {}).get("name", "") or ""
    agent_name = parsed["agent"] or model or parsed["agent_name"] or info.get("name") or ""
    usage = result.get("agent_result") or {}
    episode_id = ep.create_episode(
        store,
        run_key=run_key,
        task_id=task_id,
        task_hash=task_hash,
        mode="imported",
        agent=str(agent_name or "imported"),
        model_id=str(model),
        prompt_name="imported",
        prompt_text=parsed["system"],
        spec_json={
            **spec,
            "imported_from": str(trial),
            "session_id": parsed["session_id"],
        },
        segments_total=max(len(parsed["segments"]), 1),
        started_at=result.get("started_at") or datetime.now(UTC).isoformat(),
    )
    segments = parsed["segments"] or [{"user_message": "", "first_turn": None}]
    passed = None if reward is None else reward >= 1.0
    output = _verifier_output(trial)
    for idx, seg in enumerate(segments):
        ep.add_segment_run(
            store,
            episode_id,
            idx,
            seg["user_message"],
            name=f"segment-{idx}",
            first_turn=seg["first_turn"],
        )
    last = len(segments) - 1
    tests = harbor_files.read_ctrf(trial / "verifier" / harbor_files.CTRF_FILE) or []
    counts: dict[str, Any] = {}
    if tests:
        n_passed = sum(t.get("outcome") == "passed" for t in tests)
        counts = {"tests_passed": n_passed, "tests_total": len(tests)}
    ep.finish_segment_run(
        store,
        episode_id,
        last,
        passed=passed,
        rewards_json=rewards,
        verifier_output=output,
        **counts,
    )
    for n, turn in enumerate(parsed["turns"], 1):
        _record_turn(store, episode_id, n, turn)  # each adds its tokens and cost
    if record is not None:
        columns = harbor_files.restore_record(store, episode_id, record)
        ep.finish_episode(store, episode_id, **columns)
        return episode_id
    ep.add_test_results(store, episode_id, tests, segment_idx=last)
    totals: dict[str, Any] = {}
    if not parsed["turns"]:  # no trajectory: the result's own totals
        totals = {
            "prompt_tokens": int(usage.get("n_input_tokens") or 0),
            "completion_tokens": int(usage.get("n_output_tokens") or 0),
            "cost_usd": float(usage.get("cost_usd") or 0.0),
        }
    ep.finish_episode(
        store,
        episode_id,
        passed=passed,
        reward=reward,
        **totals,
        segments_passed=len(segments) if passed else 0,
        **counts,
        error_kind="imported_error" if exception else None,
        error_detail=_exception_text(exception) if exception else None,
        timings_json=_timings(result),
        finished_at=result.get("finished_at") or datetime.now(UTC).isoformat(),
        end_reason="imported",
    )
    return episode_id


def _record_turn(store: Store, episode_id: int, n: int, turn: dict[str, Any]) -> None:
    ep.record_turn(
        store,
        episode_id,
        {
            "idx": n,
            # An imported step with no call is a closing reply (docs/work-and-turns.md).
            "counted": int(bool(turn["calls"])),
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


def _rewards(result: dict[str, Any]) -> dict[str, float]:
    rewards = (result.get("verifier_result") or {}).get("rewards") or {}
    if not isinstance(rewards, dict):
        return {}
    return {str(k): float(v) for k, v in rewards.items() if isinstance(v, int | float)}


def _verifier_output(trial: Path) -> str:
    try:
        text = (trial / "verifier" / "test-stdout.txt").read_text(errors="replace")
    except OSError:
        return ""
    return text if len(text) <= OUTPUT_LIMIT else "[...]" + text[-OUTPUT_LIMIT:]


def _exception_text(exception: Any) -> str:
    if not isinstance(exception, dict):
        return str(exception)
    kind = exception.get("exception_type") or "error"
    return f"{kind}: {exception.get('exception_message') or ''}".strip()


def _timings(result: dict[str, Any]) -> dict[str, float]:
    """Seconds per phase, from each phase's started_at and finished_at."""
    out: dict[str, float] = {}
    phases = {"trial": result, **{p: result.get(p) for p in TIMED_PHASES}}
    for phase, timing in phases.items():
        if not isinstance(timing, dict):
            continue
        start, end = _when(timing.get("started_at")), _when(timing.get("finished_at"))
        if start is not None and end is not None and end >= start:
            out[phase] = round((end - start).total_seconds(), 3)
    if "agent_execution" in out:
        out["agent"] = out["agent_execution"]  # what depthtui calls the agent's own time
    return out


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


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
