"""The labels depthtui puts on its containers and snapshot images, and who owns them."""

from __future__ import annotations

import os
import socket

LABEL_OWNER = "depthtui.owner"  # host:pid of the process that started it
LABEL_TASK = "depthtui.task"  # on task images and the containers made from them
LABEL_JOB = "depthtui.job"
LABEL_EPISODE = "depthtui.episode"
LABEL_ROLE = "depthtui.role"  # one of the roles below
ROLE_AGENT = "agent"
ROLE_VERIFIER = "verifier"
ROLE_SNAPSHOT = "snapshot"


def this_owner() -> str:
    """This process as an owner ("host:pid"): on the containers it starts and the jobs and
    episodes it runs."""
    return f"{socket.gethostname()}:{os.getpid()}"


def process_runs(owner: str) -> bool:
    """Whether the process a `host:pid` owner label names still runs. Another machine's owner
    counts as alive: it is not ours to judge. (A job's owner is judged with its heartbeat too:
    engine/jobs/owner.py `owner_alive`.)"""
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
