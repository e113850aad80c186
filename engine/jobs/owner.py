"""Who owns a job or an episode ("host:pid"), and whether that owner is still alive."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from store.queue import age_s

HEARTBEAT_S = 2.0
# An owner whose heartbeat is older than this is dead even if its pid exists (the pid was reused,
# or the process hangs and has stopped heartbeating). Well above HEARTBEAT_S so a busy machine
# never makes a live engine look dead.
STALE_S = 60.0


def parse_owner(owner: str) -> tuple[str, int | None]:
    host, _, pid = owner.rpartition(":")
    return (host, int(pid)) if pid.isdigit() else (owner, None)


def pid_alive(pid: int) -> bool:
    """True when a process with this pid runs here (a zombie, killed but not reaped, is dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True
    for line in status.splitlines():
        if line.startswith("State:"):
            return "Z" not in line.split()[1]
    return True


def owner_alive(owner: str | None, heartbeat_at: str | None = None) -> bool:
    """Whether `owner` may still be working. On this host the pid decides (plus a stale
    heartbeat); on another host only the heartbeat can tell, and no heartbeat counts as alive."""
    if not owner:
        return False
    age = age_s(heartbeat_at)
    if age is not None and age > STALE_S:
        return False
    host, pid = parse_owner(owner)
    if host != socket.gethostname() or pid is None:
        return True
    return pid_alive(pid)
