"""The report's verifier audit: per validated task, what each of m1-m4 did to each graded file
(validate's mutation audit, docs/verifier.md), how many passing runs are false-positive suspects
and for which kind of reason, and the judges' review findings (the judge's words, never a
verdict). Read from the store alone."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from store import triage, vocab

# A false-positive reason's kind, from its text (store/triage.py writes them).
REASON_KINDS = (
    ("differential", "differential:"),
    ("mutation", "the tests accept"),
    ("fault", "fault was not cleared"),
    ("replay", "replay of episode"),
    ("judge_analyze", "judge_analyze:"),
)


def mutation_cells(detail: dict[str, Any] | None) -> dict[str, dict[str, str]]:
    """{graded file: {m1: caught | accepted | n/a, ...}} from a contract's detail."""
    seen = (detail or {}).get("discrimination")
    out: dict[str, dict[str, str]] = {}
    if not isinstance(seen, dict):
        return out
    for path, result in sorted(seen.items()):
        failed = result.get("failed") if isinstance(result, dict) else None
        if not isinstance(failed, dict):
            continue
        out[str(path)] = {
            code: {True: "caught", False: "accepted"}.get(failed.get(kind), "n/a")
            for kind, code in vocab.MUTATION_CODES.items()
        }
    return out


def reason_kind(reason: str) -> str:
    for kind, mark in REASON_KINDS:
        if mark in reason:
            return kind
    return "other"


@dataclass(frozen=True)
class VerifierRow:
    task: str
    mutations: dict[str, dict[str, str]]  # graded file -> m1..m4 -> caught | accepted | n/a
    suspects: int  # passing runs in the false-positive queue
    suspects_by_reason: dict[str, int] = field(default_factory=dict)
    review_findings: dict[str, int] = field(default_factory=dict)  # category -> count (judges)

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "mutations": self.mutations,
            "suspects": self.suspects,
            "suspects_by_reason": self.suspects_by_reason,
            "review_findings": self.review_findings,
        }


def rows(conn: sqlite3.Connection, wanted: Iterable[str]) -> tuple[VerifierRow, ...]:
    """One row per wanted task that was validated or reviewed."""
    wanted = set(wanted)
    details: dict[str, dict] = {}
    for task_id, detail_json in conn.execute("SELECT task_id, detail_json FROM contracts"):
        if task_id in wanted:
            try:
                details[task_id] = json.loads(detail_json or "{}") or {}
            except ValueError:
                details[task_id] = {}
    findings: dict[str, dict[str, int]] = {}
    if _has_table(conn, "reviews"):
        for task_id, findings_json in conn.execute(
            "SELECT task_id, findings_json FROM reviews WHERE status = 'done'"
        ):
            if task_id not in wanted:
                continue
            mine = findings.setdefault(task_id, {})
            for f in json.loads(findings_json or "[]"):
                cat = str(f.get("category", "?"))
                mine[cat] = mine.get(cat, 0) + 1
    suspects: dict[str, dict[str, set[int]]] = {}
    for item in triage.queue_items(conn, "false_positive"):
        if item.task_id in wanted:
            by = suspects.setdefault(item.task_id, {})
            for r in item.reasons:
                by.setdefault(reason_kind(r), set()).add(item.episode_id)
    out = []
    for task_id in sorted(set(details) | set(findings)):
        by = suspects.get(task_id, {})
        out.append(
            VerifierRow(
                task=task_id,
                mutations=mutation_cells(details.get(task_id)),
                suspects=len(set().union(*by.values())) if by else 0,
                suspects_by_reason={k: len(v) for k, v in sorted(by.items())},
                review_findings=dict(sorted(findings.get(task_id, {}).items())),
            )
        )
    return tuple(out)


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
        ).fetchone()
        is not None
    )


def mutations_text(cells: dict[str, dict[str, str]]) -> str:
    """'squares.txt: m1 caught, m2 caught, m3 ACCEPTED, m4 n/a' per file, one a line."""
    lines = []
    for path, res in cells.items():
        parts = [f"{code} {'ACCEPTED' if r == 'accepted' else r}" for code, r in res.items()]
        lines.append(f"{path}: {', '.join(parts)}")
    return "\n".join(lines)
