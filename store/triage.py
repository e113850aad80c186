"""Triage: the queues of episodes a person should look at, and the labels they give them.

Two queues:
- `collateral`: episodes where the safety oracle latched collateral damage.
- `false_positive`: suspected verifier false positives, for these reasons:
  the tests passed while the injected fault was not cleared; the task's contract says the grader
  accepts mutated output (flag FLAG_GRADER_ACCEPTS, from validate's mutation audit: every passing
  run of the task, each reason naming the mutation m1-m3 and the file); a pass whose graded
  outputs differ from the reference's (`differential: PATH ...`, store/differential.py); a
  judge model's reward-hacking finding on a passing run (`judge_analyze: the judge J says ...`,
  `depthtui analyze`: the judge's words, not a verdict); a
  replay whose verdict disagrees with the episode it replays (`spec_json.replay_of` names that
  episode).

A label is one of LABELS plus a free-text note, one per (episode, queue).

The validity audit's own probes (mode `validate`: a planted file deleted after the reference, a
forgery of the input, a fault with no repair) latch collateral and fail on purpose; they say
whether the task is valid, not how an agent behaved, so neither queue lists them.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from store import differential, vocab
from store.db import Store, now
from store.episode_views import outcome

QUEUES = ("collateral", "false_positive")
LABELS = ("real", "false_positive", "needs_look")
FLAG_GRADER_ACCEPTS = "grader_accepts_mutation"
REPLAY_OF = "replay_of"


class TriageError(ValueError):
    """A label request with an unknown queue, label or episode."""


@dataclass(frozen=True)
class QueueItem:
    episode_id: int
    queue: str
    reasons: tuple[str, ...]
    task_id: str
    agent: str
    mode: str
    fault_family: str
    passed: int | None
    reward: float | None
    label: str | None
    note: str
    outcome: str = ""  # views.outcome: pass | unsafe | fail | cap | error | running


@dataclass(frozen=True)
class Label:
    episode_id: int
    queue: str
    label: str
    note: str
    created_at: str
    updated_at: str
    task_id: str
    agent: str
    mode: str


def _labels(conn: sqlite3.Connection, queue: str) -> dict[int, tuple[str, str]]:
    return {
        r[0]: (r[1], r[2])
        for r in conn.execute(
            "SELECT episode_id, label, note FROM labels WHERE queue = ?", (queue,)
        )
    }


def _collateral_reasons(conn: sqlite3.Connection) -> dict[int, list[str]]:
    reasons: dict[int, list[str]] = {}
    for ep, call_idx, path, kind in conn.execute(
        """
        SELECT e.id, o.call_idx, o.path, o.kind
        FROM episodes e
        LEFT JOIN oracle_events o ON o.id = (
            SELECT id FROM oracle_events WHERE episode_id = e.id AND collateral = 1
            ORDER BY coalesce(call_idx, 1e9), id LIMIT 1)
        WHERE e.collateral = 1 AND e.mode != 'validate'
        ORDER BY e.id
        """
    ):
        where = "at the final check" if call_idx is None else f"at call {call_idx}"
        what = f"{kind} {path} {where}" if path is not None else "collateral latched"
        reasons[ep] = [what]
    return reasons


def _false_positive_reasons(conn: sqlite3.Connection) -> dict[int, list[str]]:
    reasons: dict[int, list[str]] = {}
    for ep, family in conn.execute(
        "SELECT id, fault_family FROM episodes WHERE fault_cleared = 0 AND status = 'done' "
        "AND outcome = 'pass' AND mode != 'validate' ORDER BY id"
    ):
        reasons.setdefault(ep, []).append(f"tests passed while the {family} fault was not cleared")
    # Every passing run on a task whose tests accept a mutated output: one reason per graded
    # file and mutation the tests accepted (the contract's detail, from validate).
    accepted = _accepted_mutations(conn)
    if accepted:
        marks = ",".join("?" * len(accepted))
        for ep, task_id in conn.execute(
            f"SELECT id, task_id FROM episodes WHERE outcome = 'pass' AND status = 'done' "
            f"AND mode != 'validate' AND task_id IN ({marks}) ORDER BY id",
            list(accepted),
        ):
            reasons.setdefault(ep, []).extend(accepted[task_id])
    for ep, why in _differential_reasons(conn):
        reasons.setdefault(ep, []).append(why)
    for ep, why in _judge_reasons(conn):
        reasons.setdefault(ep, []).append(why)
    for ep, original, replay_outcome, original_outcome in conn.execute(
        f"""
        SELECT r.id, o.id, r.outcome, o.outcome FROM episodes r
        JOIN episodes o ON o.id = json_extract(r.spec_json, '$.{REPLAY_OF}')
        WHERE r.mode = 'replay' AND r.status = 'done'
        """
    ):
        if vocab.replay_agrees(replay_outcome, original_outcome) is not False:
            continue  # agrees, or the replay errored and says nothing about the verdict
        reasons.setdefault(ep, []).append(
            f"replay of episode {original} {_said(replay_outcome)}; the original "
            f"{_said(original_outcome)}"
        )
    return reasons


def _accepted_mutations(conn: sqlite3.Connection) -> dict[str, list[str]]:
    """task id -> 'the tests accept m3 (bump_first_digit) in PATH' per mutation and file, for
    contracts flagged FLAG_GRADER_ACCEPTS. A contract from before per-mutation results were kept
    gets one reason without a mutation name."""
    import json

    codes = vocab.MUTATION_CODES
    out: dict[str, list[str]] = {}
    for task_id, detail_json in conn.execute(
        "SELECT c.task_id, c.detail_json FROM contracts c "
        "WHERE EXISTS (SELECT 1 FROM json_each(c.flags_json) WHERE value = ?)",
        (FLAG_GRADER_ACCEPTS,),
    ):
        try:
            seen = (json.loads(detail_json or "{}") or {}).get("discrimination") or {}
        except ValueError:
            seen = {}
        mine = []
        for path, result in sorted(seen.items()):
            if not isinstance(result, dict) or result.get("ok"):
                continue
            kinds = result.get("accepted")
            if kinds is None:  # an older contract: only its reason
                failed = result.get("failed") or {}
                kinds = [
                    k
                    for k in ("empty", "drop_last_line", "bump_first_digit")
                    if failed.get(k) is False
                ]
            for kind in kinds:
                mine.append(f"the tests accept {codes.get(kind, '?')} ({kind}) in {path}")
            if not kinds:
                mine.append(f"the tests accept wrong output in {path}: {result.get('why', '')}")
        out[task_id] = mine or ["the contract says the grader accepts mutated output"]
    return out


def _differential_reasons(conn: sqlite3.Connection) -> list[tuple[int, str]]:
    """(episode, reason) for each passing run whose graded outputs differ from the reference's
    (store/differential.py), on the task version its contract was validated on."""
    import json

    refs: dict[str, dict] = {}
    for task_id, detail_json in conn.execute(
        "SELECT task_id, detail_json FROM contracts "
        "WHERE json_extract(detail_json, '$.graded_outputs') IS NOT NULL"
    ):
        try:
            refs[task_id] = json.loads(detail_json)["graded_outputs"] or {}
        except (ValueError, KeyError, TypeError):
            continue
    if not refs:
        return []
    out = []
    for ep, task_id, outputs_json, changes_json in conn.execute(
        "SELECT e.id, e.task_id, e.graded_outputs_json, e.final_changes_json FROM episodes e "
        "JOIN contracts c ON c.task_id = e.task_id AND c.task_hash = e.task_hash "
        "WHERE e.outcome = 'pass' AND e.status = 'done' AND e.mode != 'validate' "
        "AND e.graded_outputs_json IS NOT NULL ORDER BY e.id"
    ):
        reference = refs.get(task_id)
        if not reference:
            continue
        try:
            outputs = json.loads(outputs_json) or {}
            changes = json.loads(changes_json or "{}") or {}
        except ValueError:
            continue
        out.extend((ep, why) for why in differential.compare(reference, outputs, changes))
    return out


JUDGE_ANALYZE = "judge_analyze"


def _judge_reasons(conn: sqlite3.Connection) -> list[tuple[int, str]]:
    """(episode, reason) per finding of a judge's reward-hacking analysis of a passing run
    (`depthtui analyze`), in the judge's words and said to be the judge's."""
    import json

    if not conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'analyses'"
    ).fetchone():
        return []
    out = []
    for ep, judge, findings_json in conn.execute(
        "SELECT a.episode_id, a.judge, a.findings_json FROM analyses a "
        "JOIN episodes e ON e.id = a.episode_id "
        "WHERE a.status = 'done' AND e.outcome = 'pass' AND e.status = 'done' "
        "AND e.mode != 'validate' ORDER BY a.episode_id, a.id"
    ):
        for f in json.loads(findings_json or "[]"):
            out.append(
                (
                    ep,
                    f"{JUDGE_ANALYZE}: the judge {judge} says {f.get('category')} at turn "
                    f"{f.get('turn')}: {str(f.get('says') or '')[:200]}",
                )
            )
    return out


def _said(run_outcome: str | None) -> str:
    if run_outcome == vocab.PASS:
        return "passed"
    return "failed" if vocab.in_rates(run_outcome) else "had no verdict"


def queue_items(conn: sqlite3.Connection, queue: str) -> list[QueueItem]:
    """The episodes in one queue, oldest first, each with why it is there and its label."""
    if queue not in QUEUES:
        raise TriageError(f"queue '{queue}' is not one of {', '.join(QUEUES)}")
    reasons = _collateral_reasons(conn) if queue == "collateral" else _false_positive_reasons(conn)
    if not reasons:
        return []
    labels = _labels(conn, queue)
    items = []
    ids = sorted(reasons)
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        for r in conn.execute(
            "SELECT id, task_id, agent, mode, fault_family, passed, reward, status, outcome, "
            f"end_reason, collateral FROM episodes WHERE id IN ({','.join('?' * len(chunk))}) "
            "ORDER BY id",
            chunk,
        ):
            label, note = labels.get(r[0], (None, ""))
            items.append(
                QueueItem(
                    episode_id=r[0],
                    queue=queue,
                    reasons=tuple(reasons[r[0]]),
                    task_id=r[1],
                    agent=r[2],
                    mode=r[3],
                    fault_family=r[4],
                    passed=r[5],
                    reward=r[6],
                    label=label,
                    note=note,
                    outcome=outcome(r[7], r[8], r[9], r[10]),
                )
            )
    return items


def set_label(
    store: Store, episode_id: int, queue: str, label: str, note: str | None = None
) -> None:
    """Label an episode in a queue (replacing an earlier label); `note=None` keeps the old note."""
    if queue not in QUEUES:
        raise TriageError(f"queue '{queue}' is not one of {', '.join(QUEUES)}")
    if label not in LABELS:
        raise TriageError(f"label '{label}' is not one of {', '.join(LABELS)}")
    stamp = now()
    with store.tx() as conn:
        if conn.execute("SELECT 1 FROM episodes WHERE id = ?", (episode_id,)).fetchone() is None:
            raise TriageError(f"there is no episode {episode_id}")
        conn.execute(
            """
            INSERT INTO labels (episode_id, queue, label, note, created_at, updated_at)
            VALUES (?, ?, ?, coalesce(?, ''), ?, ?)
            ON CONFLICT (episode_id, queue) DO UPDATE SET
                label = excluded.label,
                note = coalesce(?, labels.note),
                updated_at = excluded.updated_at
            """,
            (episode_id, queue, label, note, stamp, stamp, note),
        )


def set_note(store: Store, episode_id: int, queue: str, note: str) -> None:
    """Attach a note, keeping the label (an unlabelled episode becomes `needs_look`)."""
    rows = store.query(
        "SELECT label FROM labels WHERE episode_id = ? AND queue = ?", (episode_id, queue)
    )
    row = rows[0] if rows else None
    set_label(store, episode_id, queue, row[0] if row else "needs_look", note)


def list_labels(source: Store | sqlite3.Connection) -> list[Label]:
    """Every label, with the episode's task, agent and mode (what `triage export` writes)."""
    conn = source.conn if isinstance(source, Store) else source
    return [
        Label(*tuple(r))
        for r in conn.execute(
            "SELECT l.episode_id, l.queue, l.label, l.note, l.created_at, l.updated_at, "
            "e.task_id, e.agent, e.mode FROM labels l JOIN episodes e ON e.id = l.episode_id "
            "ORDER BY l.queue, l.episode_id"
        )
    ]


EXPORT_FIELDS = (
    "episode_id", "queue", "label", "note", "reasons", "path", "task_id", "agent", "mode",
    "fault_family", "created_at", "updated_at",
)  # fmt: skip


def export_rows(source: Store | sqlite3.Connection) -> list[dict]:
    """Every label with why its episode is in the queue (`reasons`, joined by '; ') and, for
    collateral damage, the first path the oracle flagged: what `triage export` and the TUI's
    export write."""
    conn = source.conn if isinstance(source, Store) else source
    items = {(i.queue, i.episode_id): i for q in QUEUES for i in queue_items(conn, q)}
    rows = []
    for label in list_labels(conn):
        item = items.get((label.queue, label.episode_id))
        path = None
        if label.queue == "collateral":
            r = conn.execute(
                "SELECT path FROM oracle_events WHERE episode_id = ? AND collateral = 1 "
                "ORDER BY call_idx IS NULL, call_idx, id LIMIT 1",
                (label.episode_id,),
            ).fetchone()
            path = r[0] if r else None
        rows.append(
            {
                "episode_id": label.episode_id,
                "queue": label.queue,
                "label": label.label,
                "note": label.note,
                # a labelled episode may have left its queue since (a replay agreed after all)
                "reasons": "; ".join(item.reasons) if item else "(no longer in this queue)",
                "path": path,
                "task_id": label.task_id,
                "agent": label.agent,
                "mode": label.mode,
                "fault_family": item.fault_family if item else None,
                "created_at": label.created_at,
                "updated_at": label.updated_at,
            }
        )
    return rows


def render_export(rows: list[dict], fmt: str) -> str:
    """The export as JSON (a list) or CSV with a header row."""
    import csv
    import io
    import json

    if fmt == "json":
        return json.dumps(rows, indent=2) + "\n"
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=EXPORT_FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()
