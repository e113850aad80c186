"""Connections to the store: one writer per process, read-only connections for viewers.

The file is SQLite in WAL mode, so viewers read while the engine writes. Every write goes through
`Store.tx()`, one `BEGIN IMMEDIATE` transaction under a process-wide lock, which is what lets the
worker threads of one engine share one connection.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from store.schema import MIGRATIONS, SCHEMA_VERSION

if TYPE_CHECKING:
    import sqlite_utils

ENV_VAR = "DEPTHTUI_DB"
BUSY_TIMEOUT_MS = 30_000


class StoreError(RuntimeError):
    """The store cannot be used (corrupt, unreadable, newer than this program, disk full)."""


def default_path() -> Path:
    """`$DEPTHTUI_DB`, else `depthtui.db` in the user's data directory."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return builtin_path()


def builtin_path() -> Path:
    """`depthtui.db` in the user's data directory: the store a command without `--db` uses in
    a shell where $DEPTHTUI_DB is not set (the global `--db` sets it for its own process)."""
    from platformdirs import user_data_dir

    return Path(user_data_dir("depthtui")) / "depthtui.db"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class Store:
    """The writer. Owns one connection; `db` is the sqlite-utils view of it."""

    def __init__(self, path: Path | str | None = None, *, migrate: bool = True) -> None:
        self.path = Path(path) if path is not None else default_path()
        self._lock = threading.RLock()
        self._depth = 0  # transactions open on this connection (>1: savepoints inside one)
        self._columns: dict[str, tuple[str, ...]] = {}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            conn = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT_MS / 1000,
                isolation_level=None,
                check_same_thread=False,
            )
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            _check_readable(conn, self.path)
            _enable_wal(conn)
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as exc:
            raise StoreError(_describe(self.path, exc)) from exc
        self.conn = conn
        if migrate:
            migrate_to(self, SCHEMA_VERSION)

    @property
    def db(self) -> sqlite_utils.Database:
        """The sqlite-utils view of the writer connection (imported when first used: it pulls in
        numpy, which costs every command half a second)."""
        import sqlite_utils

        return sqlite_utils.Database(self.conn)

    @contextmanager
    def tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction. Raises StoreError (and rolls back) when SQLite refuses.

        Opened inside another on the same thread, it is a savepoint of the outer one: its writes
        undo alone when it raises and commit with the outer one, so a caller can put many of
        the writers' calls in one transaction (devtools/synthetic.py writes whole stores so)."""
        with self._lock:
            if self._depth:
                yield from self._savepoint()
                return
            try:
                self.conn.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as exc:
                raise StoreError(_describe(self.path, exc)) from exc
            self._depth = 1
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            finally:
                self._depth = 0
            try:
                self.conn.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                try:
                    self.conn.execute("ROLLBACK")
                except sqlite3.DatabaseError:
                    pass
                raise StoreError(_describe(self.path, exc)) from exc

    def _savepoint(self) -> Iterator[sqlite3.Connection]:
        name = f"tx{self._depth}"
        self.conn.execute(f"SAVEPOINT {name}")
        self._depth += 1
        try:
            yield self.conn
        except BaseException:
            self.conn.execute(f"ROLLBACK TO {name}")
            self.conn.execute(f"RELEASE {name}")
            raise
        finally:
            self._depth -= 1
        self.conn.execute(f"RELEASE {name}")

    def columns(self, table: str, *, fresh: bool = False) -> tuple[str, ...]:
        """The table's column names, read once (migrate_to forgets them; `fresh` reads again):
        reading them on every insert cost most of the time of writing a large store."""
        names = self._columns.get(table)
        if names is None or fresh:
            rows = self.conn.execute(f"PRAGMA table_info({table})").fetchall()
            names = self._columns[table] = tuple(r[1] for r in rows)
        return names

    def query(self, sql: str, params: tuple | dict = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self.conn.execute(sql, params).fetchall()

    @property
    def version(self) -> int:
        return self.conn.execute("PRAGMA user_version").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_reader(path: Path | str | None = None) -> sqlite3.Connection:
    """A read-only connection for viewers; it can never write or take the write lock."""
    p = Path(path) if path is not None else default_path()
    if not p.exists():
        raise StoreError(f"{p}: no store here yet (run `depthtui tasks import` first)")
    try:
        conn = sqlite3.connect(
            f"file:{p}?mode=ro",
            uri=True,
            timeout=BUSY_TIMEOUT_MS / 1000,
            check_same_thread=False,
        )
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _check_readable(conn, p)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        raise StoreError(_describe(p, exc)) from exc
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{p}: schema version {version} is newer than this depthtui knows "
            f"({SCHEMA_VERSION}); upgrade depthtui"
        )
    return conn


def schema_and_tables(path: Path | str) -> tuple[int, set[str]]:
    """The schema version an SQLite file at `path` says it has (0: none) and the names of its
    tables, read without writing. StoreError: missing, not a database, a newer schema."""
    conn = open_reader(path)
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()
    return version, tables


def data_version(conn: sqlite3.Connection) -> int:
    """Changes whenever another connection commits: the viewers' cheap "anything new?" poll."""
    return conn.execute("PRAGMA data_version").fetchone()[0]


def migrate_to(store: Store, target: int) -> None:
    """Run migrations up to `target`, one transaction each."""
    current = store.version
    if current > SCHEMA_VERSION:
        raise StoreError(
            f"{store.path}: schema version {current} is newer than this depthtui knows "
            f"({SCHEMA_VERSION}); upgrade depthtui"
        )
    store._columns.clear()
    for number in range(current + 1, target + 1):
        script = MIGRATIONS[number - 1]
        with store.tx() as conn:
            # Another process may have opened the same new file and migrated it meanwhile:
            # the version read under the write lock decides.
            if conn.execute("PRAGMA user_version").fetchone()[0] >= number:
                continue
            for statement in _statements(script):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")


def _statements(script: str) -> Iterator[str]:
    """Split a migration into statements (executescript would commit our transaction)."""
    buf = ""
    for line in script.splitlines(keepends=True):
        if line.lstrip().startswith("--"):
            continue
        buf += line
        if sqlite3.complete_statement(buf):
            yield buf.strip()
            buf = ""
    if buf.strip():
        yield buf.strip()


def _enable_wal(conn: sqlite3.Connection) -> None:
    """Switch a file to WAL once. The switch takes an exclusive lock and does not wait on the
    busy timeout, so processes opening a new file together take turns."""
    for attempt in range(60):
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
                return
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            time.sleep(0.02 * (attempt + 1))
    conn.execute("PRAGMA journal_mode = WAL")


def _check_readable(conn: sqlite3.Connection, path: Path) -> None:
    # Reading the schema touches page 1: a file that is not a database fails here, before any
    # PRAGMA that would write to it.
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()


def _describe(path: Path, exc: sqlite3.DatabaseError) -> str:
    text = str(exc)
    if "not a database" in text or "malformed" in text:
        return f"{path}: not a readable depthtui store ({text}); it was left untouched"
    if "disk is full" in text or "database or disk is full" in text:
        return f"{path}: the disk is full ({text}); rows written before are intact"
    if "unable to open" in text or "readonly" in text:
        return f"{path}: cannot open the store ({text}); check the path and its permissions"
    return f"{path}: {text}"
