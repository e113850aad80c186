"""Taking over what a dead engine (or a killed foreground run) left behind.

A job still marked running whose owner is dead goes back to the queue; the dead owner's episodes
still marked running become interrupted (never done, so the protocol runs them again and never
counts them), and their containers are removed. Every step is guarded by the state it expects,
so two engines starting at once can both run this safely.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from engine.jobs.containers import gc_dead_owners, remove_containers
from engine.jobs.owner import owner_alive
from store.db import Store
from store.queue import (
    Interrupted,
    interrupt_episodes,
    list_engines,
    owner_heartbeat,
    requeue_orphan,
    running_episode_owners,
    running_jobs,
    set_engine_status,
)

log = logging.getLogger("depthtui.engine")


@dataclass(frozen=True)
class TakeoverReport:
    jobs_requeued: tuple[int, ...] = ()
    episodes_interrupted: tuple[int, ...] = ()
    containers_removed: int = 0
    errors: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(
            self.jobs_requeued
            or self.episodes_interrupted
            or self.containers_removed
            or self.errors
        )

    def describe(self) -> str:
        return (
            f"took over {len(self.jobs_requeued)} job(s) {list(self.jobs_requeued)}, "
            f"interrupted {len(self.episodes_interrupted)} episode(s), removed "
            f"{self.containers_removed} container(s)"
            + (f"; problems: {'; '.join(self.errors)}" if self.errors else "")
        )


def take_over(
    store: Store,
    *,
    alive: Callable[[str | None, str | None], bool] = owner_alive,
    sweep: bool = False,
) -> TakeoverReport:
    """Requeue the jobs of dead owners, interrupt their episodes, remove their containers.

    The sandbox's label sweep (containers and snapshots of every dead owner, including one
    started just before its owner died and never named in an episode row) runs when a dead
    owner was found, or always with `sweep` (an engine starting)."""
    requeued: list[int] = []
    dead_engines = 0
    gone: list[Interrupted] = []
    for job in running_jobs(store):
        owner = job["owner"]
        if alive(owner, job["heartbeat_at"]):
            continue
        eps = interrupt_episodes(store, owner, None, f"its process {owner} died") if owner else []
        gone += eps
        message = (
            f"queued again: its process {owner} died; {len(eps)} episode(s) in flight were "
            "interrupted and will run again"
        )
        if requeue_orphan(store, job["id"], owner, message):
            requeued.append(job["id"])
            log.info("job %s: %s", job["id"], message)
    for owner in running_episode_owners(store):
        if not alive(owner, owner_heartbeat(store, owner)):
            gone += interrupt_episodes(store, owner, None, f"its process {owner} died")
    for engine in list_engines(store, live_only=True):
        if not alive(engine["owner"], engine["heartbeat_at"]):
            set_engine_status(store, engine["owner"], "dead", "found dead by another engine")
            dead_engines += 1
    with_container = [g.container_id for g in gone if g.container_id]
    removed, errors = remove_containers(with_container)
    if sweep or requeued or gone or dead_engines:
        swept, gc_errors = gc_dead_owners(lambda o: alive(o, owner_heartbeat(store, o)))
        removed += swept
        errors += gc_errors
    return TakeoverReport(
        jobs_requeued=tuple(requeued),
        episodes_interrupted=tuple(g.episode_id for g in gone),
        containers_removed=removed,
        errors=tuple(errors),
    )
