"""Tasks, their segments, datasets and the folders that failed to load.

Writes take a `Store`; reads take a sqlite3 connection (a viewer's read-only one) or a Store.
The store never imports the engine: a task arrives as the engine's frozen dataclass and is read
by attribute, and `task_json` keeps all of it as plain JSON for display and export.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path
from typing import Any

from store.db import Store, now

# A test file bigger than this is stored cut, with a note: the table is for display.
MAX_TEST_TEXT = 200_000


def _conn(source: Store | sqlite3.Connection) -> sqlite3.Connection:
    return source.conn if isinstance(source, Store) else source


def _dicts(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def plain(value: Any) -> Any:
    """A dataclass tree as JSON-ready values: paths become strings, tuples lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)  # TOML dates and times


def task_record(task: Any) -> dict[str, Any]:
    """The task as one JSON-ready dict (what `tasks show --json` prints)."""
    record = plain(task)
    record["work"] = task.work
    for seg_record, segment in zip(record["segments"], task.segments, strict=True):
        seg_record["work"] = segment.work
    return record


def _test_texts(tests: dict[str, Path]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in sorted(tests):
        try:
            data = Path(tests[name]).read_bytes()
        except OSError as exc:
            out[name] = f"[cannot be read: {exc.strerror}]"
            continue
        text = data[:MAX_TEST_TEXT].decode("utf-8", errors="replace")
        if len(data) > MAX_TEST_TEXT:
            text += f"\n[... {len(data) - MAX_TEST_TEXT} more bytes not stored ...]"
        out[name] = text
    return out


def upsert_task(store: Store, task: Any) -> None:
    """Insert or replace a task and its segments; a load error recorded for its folder clears."""
    record = task_record(task)
    with store.tx() as conn:
        conn.execute(
            """
            INSERT INTO tasks (id, dataset, name, format, source_path, content_hash, segments,
                               work, verifier_kind, instruction, warnings_json, task_json,
                               imported_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT(id) DO UPDATE SET
                dataset = excluded.dataset, name = excluded.name, format = excluded.format,
                source_path = excluded.source_path, content_hash = excluded.content_hash,
                segments = excluded.segments, work = excluded.work,
                verifier_kind = excluded.verifier_kind, instruction = excluded.instruction,
                warnings_json = excluded.warnings_json, task_json = excluded.task_json,
                imported_at = excluded.imported_at
            """,
            (
                task.id,
                task.dataset,
                task.name,
                task.format,
                str(task.source_path),
                task.content_hash,
                len(task.segments),
                task.work,
                task.verifier_kind,
                task.instruction,
                json.dumps(list(task.warnings)),
                json.dumps(record),
                now(),
            ),
        )
        conn.execute("DELETE FROM segments WHERE task_id = ?", (task.id,))
        for idx, (segment, seg_record) in enumerate(
            zip(task.segments, record["segments"], strict=True)
        ):
            limits = {
                k: seg_record[k]
                for k in (
                    "agent_timeout_sec",
                    "verifier_timeout_sec",
                    "min_reward",
                    "healthcheck",
                    "verifier_env",
                    "solution_env",
                    "workdir_dir",
                    "setup_script",
                )
            }
            conn.execute(
                "INSERT INTO segments (task_id, idx, name, instruction, solution, tests_json, "
                "work, limits_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    task.id,
                    idx,
                    segment.name,
                    segment.instruction,
                    segment.solution_script,
                    json.dumps(_test_texts(segment.tests)),
                    segment.work,
                    json.dumps(limits),
                ),
            )
        conn.execute("DELETE FROM task_errors WHERE path = ?", (str(task.source_path),))


def record_task_error(store: Store, path: Path | str, dataset: str, message: str) -> None:
    """Remember why a folder did not load (replacing what was said about it before)."""
    with store.tx() as conn:
        conn.execute(
            "INSERT INTO task_errors (path, dataset, message, imported_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(path) DO UPDATE SET dataset = excluded.dataset, "
            "message = excluded.message, imported_at = excluded.imported_at",
            (str(path), dataset, message, now()),
        )


def clear_task_error(store: Store, path: Path | str) -> None:
    with store.tx() as conn:
        conn.execute("DELETE FROM task_errors WHERE path = ?", (str(path),))


def upsert_dataset(
    store: Store,
    name: str,
    path: Path | str,
    *,
    title: str = "",
    description: str = "",
    group: str | None = None,
) -> None:
    with store.tx() as conn:
        conn.execute(
            "INSERT INTO datasets (name, title, description, group_name, path, imported_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET title = excluded.title, "
            "description = excluded.description, group_name = excluded.group_name, "
            "path = excluded.path, imported_at = excluded.imported_at",
            (name, title, description, group, str(path), now()),
        )


def _summary(row: dict[str, Any]) -> dict[str, Any]:
    row["warnings"] = json.loads(row.pop("warnings_json"))
    return row


def list_tasks(
    source: Store | sqlite3.Connection, dataset: str | None = None
) -> list[dict[str, Any]]:
    """One summary dict per task, by id: id, dataset, name, format, segments, work,
    verifier_kind, warnings (a list), content_hash, source_path, imported_at."""
    sql = (
        "SELECT id, dataset, name, format, segments, work, verifier_kind, warnings_json, "
        "content_hash, source_path, imported_at FROM tasks"
    )
    params: tuple = ()
    if dataset is not None:
        sql += " WHERE dataset = ?"
        params = (dataset,)
    return [_summary(r) for r in _dicts(_conn(source).execute(sql + " ORDER BY id", params))]


def count_tasks(source: Store | sqlite3.Connection) -> int:
    """How many tasks the store holds."""
    return _conn(source).execute("SELECT count(*) FROM tasks").fetchone()[0]


def find_task_ids(source: Store | sqlite3.Connection, key: str) -> list[str]:
    """Ids that `key` names: the full id, else every task whose folder name is `key` (or whose
    id ends with "/key")."""
    conn = _conn(source)
    if conn.execute("SELECT 1 FROM tasks WHERE id = ?", (key,)).fetchone():
        return [key]
    escaped = key.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    rows = conn.execute(
        "SELECT id FROM tasks WHERE id LIKE ? ESCAPE '\\' ORDER BY id", ("%/" + escaped,)
    ).fetchall()
    return [r[0] for r in rows]


def get_task(source: Store | sqlite3.Connection, key: str) -> dict[str, Any] | None:
    """The task named by its full id or by a folder name that only one task has; None when no
    task (or more than one) matches. The dict holds the summary columns, `task` (the whole
    normalized task) and `segment_rows` (per segment: name, instruction, solution, tests
    {name: text}, work, limits)."""
    conn = _conn(source)
    ids = find_task_ids(conn, key)
    if len(ids) != 1:
        return None
    rows = _dicts(conn.execute("SELECT * FROM tasks WHERE id = ?", (ids[0],)))
    if not rows:
        return None
    row = _summary(rows[0])
    row["task"] = json.loads(row.pop("task_json"))
    segments = _dicts(
        conn.execute("SELECT * FROM segments WHERE task_id = ? ORDER BY idx", (ids[0],))
    )
    for segment in segments:
        segment["tests"] = json.loads(segment.pop("tests_json"))
        segment["limits"] = json.loads(segment.pop("limits_json"))
    row["segment_rows"] = segments
    return row


def datasets(source: Store | sqlite3.Connection) -> list[dict[str, Any]]:
    """Every dataset that has tasks, a dataset.toml or load errors: name, title, description,
    group, path, tasks (count), errors (count)."""
    conn = _conn(source)
    rows = _dicts(
        conn.execute(
            """
            WITH names AS (
                SELECT dataset AS name FROM tasks UNION SELECT name FROM datasets
                UNION SELECT dataset FROM task_errors
            )
            SELECT names.name AS name, coalesce(d.title, '') AS title,
                   coalesce(d.description, '') AS description, d.group_name AS "group",
                   d.path AS path,
                   (SELECT count(*) FROM tasks t WHERE t.dataset = names.name) AS tasks,
                   (SELECT count(*) FROM task_errors e WHERE e.dataset = names.name) AS errors
            FROM names LEFT JOIN datasets d ON d.name = names.name
            ORDER BY names.name
            """
        )
    )
    return rows


def task_errors(
    source: Store | sqlite3.Connection, dataset: str | None = None
) -> list[dict[str, Any]]:
    sql = "SELECT path, dataset, message, imported_at FROM task_errors"
    params: tuple = ()
    if dataset is not None:
        sql += " WHERE dataset = ?"
        params = (dataset,)
    return _dicts(_conn(source).execute(sql + " ORDER BY path", params))
