"""Starting and stopping background engine processes for a store."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from engine.jobs.engine import engine_log_path
from engine.jobs.executor import LOCAL_CHOICE, ExecutorChoice
from engine.jobs.owner import owner_alive, parse_owner, pid_alive
from engine.jobs.takeover import TakeoverReport, take_over
from store.db import Store
from store.queue import list_engines, set_engine_status

START_WAIT_S = 20.0


class EngineError(RuntimeError):
    """An engine could not be started or stopped; the message says why (with its log's tail)."""


def live_engines(store: Store) -> list[dict]:
    """Engines of this store that are alive now (their rows, newest first)."""
    return [
        e for e in list_engines(store, live_only=True) if owner_alive(e["owner"], e["heartbeat_at"])
    ]


def ensure_engine(
    db_path: Path | str, workers: int = 1, executor: ExecutorChoice = LOCAL_CHOICE
) -> int:
    """The pid of a live engine for this store, starting one if none is alive (a live one
    keeps the executor it was started with)."""
    db_path = Path(db_path).expanduser().resolve()
    with Store(db_path) as store:
        live = live_engines(store)
    if live:
        return live[0]["pid"]
    return start_engine(db_path, workers, executor=executor)


def start_engine(
    db_path: Path | str,
    workers: int = 1,
    *,
    executor: ExecutorChoice = LOCAL_CHOICE,
    module: str = "engine.jobs.engine",
    idle_s: float | None = None,
) -> int:
    """Launch a detached engine process and wait until it has registered; its pid.

    `module` is the program run as `python -m module`: the engine's own, or one that calls
    engine.jobs.engine.main with kinds of its own (the test suite's tests/engine_main.py).

    The process gets its own session (a Ctrl-C in the terminal that started it does not reach
    it) and writes its log beside the store. Raises EngineError with the log's tail when it dies
    before registering."""
    db_path = Path(db_path).expanduser().resolve()
    log_path = engine_log_path(db_path)
    argv = [sys.executable, "-m", module, "--db", str(db_path)]
    argv += ["--workers", str(workers), *executor.argv()]
    if idle_s is not None:  # (else the engine reads $DEPTHTUI_ENGINE_IDLE_S, inherited)
        argv += ["--idle-s", str(idle_s)]
    with open(log_path, "ab") as log_file:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
        )
    deadline = time.monotonic() + START_WAIT_S
    with Store(db_path) as store:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise EngineError(
                    f"the engine exited at once (code {proc.returncode}); "
                    f"its log {log_path} ends with:\n{_tail(log_path)}"
                )
            if any(e["pid"] == proc.pid for e in live_engines(store)):
                return proc.pid
            time.sleep(0.1)
    raise EngineError(
        f"the engine (pid {proc.pid}) did not register within {START_WAIT_S:.0f} s; see {log_path}"
    )


def stop_engines(db_path: Path | str, timeout_s: float = 60.0) -> list[tuple[str, str]]:
    """Ask every live engine of this store to stop (SIGTERM on this host, and the `stopping`
    status for any host), wait up to `timeout_s`, then kill what is left on this host and take
    over its work. Returns (owner, how it ended) per engine."""
    db_path = Path(db_path).expanduser().resolve()
    ended: list[tuple[str, str]] = []
    with Store(db_path) as store:
        engines = live_engines(store)
        for e in engines:
            set_engine_status(store, e["owner"], "stopping", "asked to stop")
            _signal(e["owner"], signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        waiting = {e["owner"] for e in engines}
        while waiting and time.monotonic() < deadline:
            for owner in list(waiting):
                if _gone(store, owner):
                    waiting.discard(owner)
                    ended.append((owner, "stopped"))
            time.sleep(0.2)
        for owner in waiting:
            if _signal(owner, signal.SIGKILL):
                ended.append((owner, f"killed after {timeout_s:.0f} s"))
            else:
                ended.append((owner, "still stopping (on another host)"))
        if waiting:
            time.sleep(0.2)
            report: TakeoverReport = take_over(store)
            if report:
                ended.append(("takeover", report.describe()))
    return ended


def _gone(store: Store, owner: str) -> bool:
    row = [e for e in list_engines(store) if e["owner"] == owner]
    if row and row[0]["status"] in ("stopped", "dead"):
        return True
    host, pid = parse_owner(owner)
    return host == socket.gethostname() and pid is not None and not pid_alive(pid)


def _signal(owner: str, sig: int) -> bool:
    """Send `sig` to an owner's process when it runs on this host; False when it does not."""
    host, pid = parse_owner(owner)
    if host != socket.gethostname() or pid is None:
        return False
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
