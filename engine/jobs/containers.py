"""The Docker side of running jobs: is an engine there to run them, and removing the containers
that interrupted episodes left behind."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import docker

PING_TIMEOUT_S = 10


def _client(timeout: int = PING_TIMEOUT_S) -> docker.DockerClient:
    import docker

    return docker.from_env(timeout=timeout)


def docker_problem() -> str | None:
    """None when a Docker engine answers; otherwise what is wrong, in one line."""
    try:
        client = _client()
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:  # the SDK raises several unrelated types for "not there"
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"no Docker engine answers ({text}); start dockerd or check DOCKER_HOST"
    return None


def remove_containers(ids: Iterable[str | None]) -> tuple[int, list[str]]:
    """Force-remove containers by id; a container already gone is fine. Returns how many were
    removed (or already gone) and the errors."""
    wanted = [i for i in ids if i]
    if not wanted:
        return 0, []
    errors: list[str] = []
    removed = 0
    try:
        import docker.errors

        client = _client()
    except Exception as exc:
        return 0, [f"cannot reach Docker to remove {len(wanted)} container(s): {exc}"]
    try:
        for cid in wanted:
            try:
                client.containers.get(cid).remove(force=True)
                removed += 1
            except docker.errors.NotFound:
                removed += 1
            except Exception as exc:
                errors.append(f"container {cid[:12]}: {exc}")
    finally:
        client.close()
    return removed, errors


def gc_dead_owners(owner_alive: Callable[[str], bool]) -> tuple[int, list[str]]:
    """Let the sandbox remove every container (and snapshot image) whose owner label names a dead
    process: this also catches a container started just before its owner died, before any
    episode row named it. Returns how many containers went, and the errors."""
    from engine.sandbox.gc import gc

    try:
        result = gc(owner_alive=owner_alive)
    except Exception as exc:
        return 0, [f"sandbox gc failed: {_first_line(exc)}"]
    return len(result.containers), []


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
