"""The labels depthtui puts on its containers and snapshot images, and who owns them."""

from __future__ import annotations

import os
import socket

LABEL_OWNER = "depthtui.owner"  # host:pid of the process that started it
LABEL_JOB = "depthtui.job"
LABEL_EPISODE = "depthtui.episode"
LABEL_ROLE = "depthtui.role"  # agent | verifier | snapshot | ...
ROLE_SNAPSHOT = "snapshot"


def owner_id() -> str:
    """This process, as named on the containers it owns."""
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_alive(owner: str) -> bool:
    """Whether the process a `host:pid` owner label names still runs. Another machine's owner
    counts as alive: it is not ours to judge."""
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
