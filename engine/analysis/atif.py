"""ATIF (Agent Trajectory Interchange Format, v1.4) trajectories: from a stored episode, and back.

One trajectory per episode. Steps, in conversation order: the system prompt (source "system"),
then for each segment its user message (source "user") followed by one step per model turn
(source "agent") holding the model's words, its reasoning, its tool calls and, as the
observation, exactly what each call returned to the model. depthtui-specific facts (exit codes,
the segment, format errors) go in each step's `extra`, which ATIF reserves for that.
"""

from __future__ import annotations

import json
from typing import Any

SCHEMA_VERSION = "ATIF-v1.4"
AGENT_NAME = "depthtui"
TOOL_NAME = "bash"
TOOL_DEFINITION = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Run a bash command in a persistent shell and return its output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}


class AtifError(ValueError):
    """An ATIF document that cannot be read; the message names the field."""


def trajectory(
    episode: dict[str, Any],
    segment_runs: list[dict[str, Any]],
    turns: list[dict[str, Any]],
    calls: list[dict[str, Any]],
    version: str,
) -> dict[str, Any]:
    """The ATIF document of one stored episode (rows as store.episodes returns them)."""
    model = episode.get("model_id") or episode["agent"]
    calls_by_turn: dict[int, list[dict]] = {}
    for call in calls:
        calls_by_turn.setdefault(call["turn_idx"], []).append(call)
    opening = {s["first_turn"]: s for s in segment_runs if s.get("first_turn") is not None}

    steps: list[dict[str, Any]] = []

    def add(step: dict[str, Any]) -> None:
        steps.append({"step_id": len(steps) + 1, **step})

    if episode.get("prompt_text"):
        add({"source": "system", "message": episode["prompt_text"]})
    opened: set[int] = set()
    for turn in turns:
        segment = opening.get(turn["idx"])
        if segment is None and turn["segment_idx"] not in opened:
            segment = next((s for s in segment_runs if s["idx"] == turn["segment_idx"]), None)
        if segment is not None and segment["idx"] not in opened:
            opened.add(segment["idx"])
            add(
                {
                    "source": "user",
                    "message": segment["user_message"],
                    "extra": {"segment": segment["idx"], "segment_name": segment["name"]},
                }
            )
        mine = calls_by_turn.get(turn["idx"], [])
        step: dict[str, Any] = {
            "timestamp": turn["created_at"],
            "source": "agent",
            "model_name": model,
            "message": turn["text"] or "",
            "metrics": {
                "prompt_tokens": turn["prompt_tokens"],
                "completion_tokens": turn["completion_tokens"],
                "cached_tokens": turn["cached_tokens"],
                "cost_usd": turn["cost_usd"],
            },
            "extra": {
                "turn": turn["idx"],
                "segment": turn["segment_idx"],
                "format_error": turn["format_error"],
                "finish_reason": turn["finish_reason"],
                "latency_ms": turn["latency_ms"],
                "calls": [
                    {
                        "tool_call_id": c["tool_call_id"],
                        "exit_code": c["exit_code"],
                        "timed_out": bool(c["timed_out"]),
                        "not_run": bool(c["not_run"]),
                        "remaining_budget": c["remaining_budget"],
                    }
                    for c in mine
                ],
            },
        }
        if turn["reasoning"]:
            step["reasoning_content"] = turn["reasoning"]
        if mine:
            step["tool_calls"] = [
                {
                    "tool_call_id": c["tool_call_id"] or f"call_{c['idx']}",
                    "function_name": TOOL_NAME,
                    "arguments": {"command": c["command"]},
                }
                for c in mine
            ]
            step["observation"] = {
                "results": [
                    {
                        "source_call_id": c["tool_call_id"] or f"call_{c['idx']}",
                        "content": c["observation"],
                    }
                    for c in mine
                ]
            }
        add(step)

    return {
        "schema_version": SCHEMA_VERSION,
        "session_id": f"depthtui-{episode['id']}-{episode['run_key'][:12]}",
        "agent": {
            "name": AGENT_NAME,
            "version": version,
            "model_name": model,
            "tool_definitions": [TOOL_DEFINITION],
            "extra": {"agent": episode["agent"], "prompt": episode["prompt_name"]},
        },
        "steps": steps,
        "final_metrics": {
            "total_prompt_tokens": sum(t["prompt_tokens"] for t in turns),
            "total_completion_tokens": sum(t["completion_tokens"] for t in turns),
            "total_cached_tokens": sum(t["cached_tokens"] for t in turns),
            "total_cost_usd": sum(t["cost_usd"] for t in turns),
            "total_steps": len(steps),
        },
        "extra": {
            "task": episode["task_id"],
            "mode": episode["mode"],
            "cap": episode["cap"],
            "budget": episode["budget"],
            "fault": episode["fault_family"],
            "end_reason": episode["end_reason"],
        },
    }


def _text(value: Any) -> str:
    """A message or observation as text: a string as is; ATIF 1.5+'s content parts joined
    (text parts verbatim, an image as a placeholder naming its source)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, dict) and "type" in p for p in value):
        parts = []
        for part in value:
            if part["type"] == "text":
                parts.append(str(part.get("text", "")))
            else:
                source = part.get("source") or {}
                where = source.get("path") or source.get("url") if isinstance(source, dict) else ""
                parts.append(f"[{part['type']}{': ' + str(where) if where else ''}]")
        return "\n".join(parts)
    return json.dumps(value)


def parse(doc: Any, where: str = "trajectory.json") -> dict[str, Any]:
    """Read an ATIF document into plain rows: {system, segments, turns: [{turn, calls}], model}.

    Tolerant of what other harnesses write (no extra fields, string arguments, observations
    without ids): a tool call's result is matched by source_call_id, else by position."""
    if not isinstance(doc, dict):
        raise AtifError(f"{where}: expected a JSON object at the top")
    steps = doc.get("steps")
    if not isinstance(steps, list):
        raise AtifError(f"{where}: field 'steps' must be a list")
    version = doc.get("schema_version")
    if version is not None and not str(version).startswith("ATIF-v1."):
        raise AtifError(f"{where}: schema_version {version!r}; expected ATIF-v1.x (1.2 to 1.7)")
    agent = doc.get("agent") or {}
    out: dict[str, Any] = {
        "session_id": str(doc.get("session_id", "")),
        "agent_name": str(agent.get("name", "")),
        "model": str(agent.get("model_name", "") or ""),
        # depthtui's own exports name the registry entry that ran (model_name is the model id).
        "agent": str((agent.get("extra") or {}).get("agent") or ""),
        "system": "",
        "segments": [],
        "turns": [],
    }
    call_idx = 0
    for n, step in enumerate(steps, 1):
        if not isinstance(step, dict):
            raise AtifError(f"{where}: steps[{n}] must be an object")
        source = step.get("source")
        message = _text(step.get("message"))
        if source == "system":
            out["system"] = message if not out["system"] else out["system"] + "\n" + message
        elif source == "user":
            out["segments"].append({"user_message": message, "first_turn": len(out["turns"]) + 1})
        elif source == "agent":
            metrics = step.get("metrics") or {}
            results = (step.get("observation") or {}).get("results") or []
            by_id = {r.get("source_call_id"): r for r in results if isinstance(r, dict)}
            calls = []
            for i, tc in enumerate(step.get("tool_calls") or []):
                call_idx += 1
                args = tc.get("arguments", {})
                if isinstance(args, str):
                    try:
                        args = json.loads(args)
                    except json.JSONDecodeError:
                        args = {"command": args}
                command = args.get("command") if isinstance(args, dict) else None
                if command is None:
                    command = json.dumps(args)
                result = by_id.get(tc.get("tool_call_id"))
                if result is None and i < len(results):
                    result = results[i]
                content = _text((result or {}).get("content", ""))
                calls.append(
                    {
                        "idx": call_idx,
                        "tool_call_id": str(tc.get("tool_call_id", "")),
                        "command": str(command),
                        "observation": content,
                    }
                )
            out["turns"].append(
                {
                    "text": message,
                    "reasoning": step.get("reasoning_content") or "",
                    "timestamp": step.get("timestamp"),
                    "model": step.get("model_name") or out["model"],
                    "prompt_tokens": int(metrics.get("prompt_tokens") or 0),
                    "completion_tokens": int(metrics.get("completion_tokens") or 0),
                    "cached_tokens": int(metrics.get("cached_tokens") or 0),
                    "cost_usd": float(metrics.get("cost_usd") or 0.0),
                    "segment_idx": max(len(out["segments"]) - 1, 0),
                    "calls": calls,
                }
            )
        else:
            raise AtifError(
                f"{where}: steps[{n}].source is {source!r}; expected system, user or agent"
            )
    return out
