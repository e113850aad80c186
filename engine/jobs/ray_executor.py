"""The Ray executor: each episode's body runs as a Ray task on a cluster node with Docker.

The task asks for one unit of the custom `docker` resource, which only nodes started with a
Docker engine declare (`ray start --resources '{"docker": N}'`, N = episodes at once there), so
a node without Docker is never given an episode. The node builds or reuses the task's image
(content-hash tags make that safe on every node), runs the sandbox, the oracle, the agent and
the verifier itself, and forwards every record to a hub actor pinned to the driver's node. The
driver drains the hub while it waits and applies each record to the store through a
StoreRecorder: the driver alone writes the store, one transaction per record, so the TUI's live
view and resuming work as with the local pool. What stays on the driver: the store, the queue,
the ladder's decisions, cost limits and stop requests (forwarded to the node between turns).

A node lost mid-episode (or its worker process) ends the task with a Ray system error: the
episode comes back as `lost`, and run_episode marks it interrupted and claims it again. Ray's
own task retries are off (max_retries=0), so a lost run is never run twice behind our back.
Keys travel by environment: the variable the model's entry names (`api_key_env`) is copied from
the driver's environment into the task's runtime_env, never into the store. docs/ray.md.
"""

from __future__ import annotations

import io
import logging
import os
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.cache import build_log_dir, cache_dir
from engine.protocol.execute import RECORDS, EpisodeBody, EpisodeWork, Recorder, apply_record
from engine.protocol.kinds import ProgressEvent

log = logging.getLogger("depthtui.engine")

DOCKER_RESOURCE = "docker"
PUMP_S = 0.05  # how often the driver drains an episode's records while it runs
STOP_POLL_S = 0.5  # how often a node asks the hub whether the driver wants the episode stopped
HUB_TIMEOUT_S = 30.0  # a hub that does not answer this long counts as a lost driver
# Settings the driver was started with that every node must share: image tags depend on them.
SHARED_SETTINGS = ("DEPTHTUI_BUILD_PROXY",)


class RayUnavailable(RuntimeError):
    """Ray is not installed or the cluster cannot be reached; the message says which."""


def import_ray() -> Any:
    """The ray module; RayUnavailable saying what to install when the `ray` extra is not."""
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailable(
            "--executor ray needs Ray: pip install 'depthtui[ray]' (see docs/ray.md)"
        ) from exc
    return ray


class RayExecutor:
    """Runs episode bodies as Ray tasks; one per driver process (engine/jobs/executor.py)."""

    name = "ray"

    def __init__(self, address: str | None = None) -> None:
        self.address = address
        self.placements: dict[int, str] = {}  # episode id -> the node id it last ran on
        self._lock = threading.Lock()
        self._hub: Any = None
        self._remote: Any = None
        self._archives: dict[str, Any] = {}  # task content hash -> [object ref of its folder]

    # --- connecting ----------------------------------------------------------------------------

    def _connect(self) -> Any:
        ray = import_ray()
        with self._lock:
            if self._hub is not None:
                return ray
            if not ray.is_initialized():
                options: dict[str, Any] = {}
                if not (self.address or os.environ.get("RAY_ADDRESS")):
                    # A local instance: it offers Docker slots when this machine has Docker.
                    from engine.jobs.containers import docker_problem

                    if docker_problem() is None:
                        options["resources"] = {DOCKER_RESOURCE: os.cpu_count() or 1}
                try:
                    ray.init(
                        address=self.address or None,
                        log_to_driver=False,
                        configure_logging=False,
                        include_dashboard=False,
                        **options,
                    )
                except Exception as exc:
                    where = self.address or os.environ.get("RAY_ADDRESS") or "a local instance"
                    raise RayUnavailable(f"cannot reach the Ray cluster at {where}: {exc}") from exc
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            here = ray.get_runtime_context().get_node_id()
            self._hub = (
                ray.remote(_Hub)
                .options(
                    num_cpus=0,
                    max_concurrency=64,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
                )
                .remote()
            )
            self._remote = ray.remote(_run_on_node)
            ray.get(self._hub.ping.remote())
            log.info("ray executor: connected (driver node %s)", here[:12])
        return ray

    def docker_slots(self) -> float:
        """How many episodes the cluster can run at once (its total `docker` resource)."""
        ray = self._connect()
        return float(ray.cluster_resources().get(DOCKER_RESOURCE, 0.0))

    def _archive(self, ray: Any, work: EpisodeWork) -> list[Any]:
        """The task folder as a tar in the object store, put once per content hash; wrapped in
        a list so a node fetches it only when it lacks the folder."""
        key = work.task.content_hash
        with self._lock:
            if key not in self._archives:
                buf = io.BytesIO()
                with tarfile.open(fileobj=buf, mode="w:gz") as tar:
                    tar.add(work.task.source_path, arcname=work.task.source_path.name)
                self._archives[key] = [ray.put(buf.getvalue())]
            return self._archives[key]

    # --- one episode ---------------------------------------------------------------------------

    def run(
        self,
        work: EpisodeWork,
        recorder: Recorder,
        should_stop: Callable[[], str | None],
        progress: Callable[[ProgressEvent], None],
    ) -> EpisodeBody:
        if work.after_agent is not None:
            # A validation probe's hook reads and writes the validator's state on the driver:
            # it cannot run elsewhere, so that episode runs here (validate needs Docker here).
            from engine.protocol.episode import LOCAL

            return LOCAL.run(work, recorder, should_stop, progress)
        ray = self._connect()
        from ray.exceptions import RayError, RayTaskError

        key = str(work.episode_id)
        options: dict[str, Any] = {
            "num_cpus": 0,
            "resources": {DOCKER_RESOURCE: 1},
            "max_retries": 0,
        }
        env = key_environment(work)
        if env:
            options["runtime_env"] = {"env_vars": env}
        ref = self._remote.options(**options).remote(work, self._archive(ray, work), self._hub, key)
        state = {"container": None}

        def pump() -> None:
            for kind, name, args, kwargs in ray.get(self._hub.take.remote(key)):
                if kind == "progress":
                    progress(args[0])
                elif kind == "node":
                    self.placements[work.episode_id] = args[0]
                    log.info("episode %s runs on node %s", work.episode_id, args[0][:12])
                else:
                    if name == "update_running" and "container_id" in kwargs:
                        state["container"] = kwargs["container_id"]
                    apply_record(recorder, name, args, kwargs)

        told = False
        try:
            while True:
                ready, _ = ray.wait([ref], timeout=PUMP_S)
                pump()
                reason = None if told else should_stop()
                if reason:
                    self._hub.stop.remote(key, reason)
                    told = True
                if ready:
                    break
            try:
                body = ray.get(ref)
            except RayTaskError as exc:  # our code raised on the node: a harness bug
                raise RuntimeError(f"the episode raised on its Ray node: {exc}") from exc
            except RayError as exc:  # the node or its worker died: not the episode's doing
                pump()
                _remove_container(state["container"])
                reason = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"
                log.info("episode %s lost: %s", work.episode_id, reason)
                return EpisodeBody(None, lost=reason)
            pump()
            return body
        finally:
            self._hub.forget.remote(key)


def key_environment(work: EpisodeWork) -> dict[str, str]:
    """The environment variables the episode needs on its node, copied from the driver's
    environment: the one the model's entry names for the key, and the driver's settings that
    decide what a node builds (SHARED_SETTINGS); each only when it is set."""
    names = [work.model.api_key_env, *SHARED_SETTINGS]
    return {name: os.environ[name] for name in names if name and os.environ.get(name)}


def _remove_container(container_id: str | None) -> None:
    """A lost node's container, when it is on this machine's Docker (one-machine clusters);
    elsewhere the node's own `depthtui sandbox gc` removes it by its labels."""
    if not container_id:
        return
    from engine.jobs.containers import remove_containers

    remove_containers([container_id])


class _Hub:
    """Records on their way from nodes to the driver, and stop requests the other way; one
    actor per driver, keyed by episode id."""

    def __init__(self) -> None:
        self.records: dict[str, list[tuple]] = {}
        self.stops: dict[str, str] = {}

    def ping(self) -> bool:
        return True

    def put(self, key: str, item: tuple) -> None:
        self.records.setdefault(key, []).append(item)

    def take(self, key: str) -> list[tuple]:
        return self.records.pop(key, [])

    def stop(self, key: str, reason: str) -> None:
        self.stops[key] = reason

    def stopped(self, key: str) -> str | None:
        return self.stops.get(key)

    def forget(self, key: str) -> None:
        self.records.pop(key, None)
        self.stops.pop(key, None)


class _Forwarder:
    """The node's recorder: every record goes to the hub, in order (Ray keeps the order of one
    caller's calls to an actor); `flush` waits until the hub holds them all."""

    def __init__(self, hub: Any, key: str) -> None:
        self.hub, self.key = hub, key
        self._last: Any = None
        self._stop: str | None = None
        self._next_poll = 0.0

    def send(self, item: tuple) -> None:
        self._last = self.hub.put.remote(self.key, item)

    def progress(self, event: ProgressEvent) -> None:
        self.send(("progress", "", (event,), {}))

    def should_stop(self) -> str | None:
        if self._stop is None and time.monotonic() >= self._next_poll:
            import ray

            self._next_poll = time.monotonic() + STOP_POLL_S
            try:
                self._stop = ray.get(self.hub.stopped.remote(self.key), timeout=HUB_TIMEOUT_S)
            except Exception:  # the hub died with the driver: end the episode, it runs again
                self._stop = "lost the driver"
        return self._stop

    def flush(self) -> None:
        if self._last is not None:
            import ray

            ray.get(self._last, timeout=HUB_TIMEOUT_S)


def _forward(name: str) -> Callable[..., None]:
    def record(self: _Forwarder, *args: Any, **kwargs: Any) -> None:
        self.send(("record", name, args, kwargs))

    record.__name__ = name
    return record


for _name in RECORDS:  # one forwarding method per Recorder method
    setattr(_Forwarder, _name, _forward(_name))


def _run_on_node(work: EpisodeWork, archive: list[Any], hub: Any, key: str) -> EpisodeBody:
    """The Ray task: the episode's body on this node, its records forwarded to the hub."""
    import ray

    from engine.protocol.episode import execute_episode

    forwarder = _Forwarder(hub, key)
    forwarder.send(("node", "", (ray.get_runtime_context().get_node_id(),), {}))
    task = node_task(work.task, lambda: ray.get(archive[0]))
    log_dir = work.log_dir if work.log_dir.parent.is_dir() else build_log_dir()
    work = replace(work, task=task, log_dir=log_dir)
    body = execute_episode(work, forwarder, forwarder.should_stop, forwarder.progress)  # type: ignore[arg-type]
    forwarder.flush()
    return body


def node_task(task: Any, fetch: Callable[[], bytes], cache: Path | None = None) -> Any:
    """The task as this node sees it: the driver's folder when the node has it with the same
    content hash (one machine, a shared file system), else the driver's copy unpacked into the
    node's cache under its content hash."""
    cache = cache if cache is not None else cache_dir()
    from engine.tasks.loader import load_task
    from engine.tasks.model import TaskError

    if task.source_path.is_dir():
        try:
            if load_task(task.source_path).content_hash == task.content_hash:
                return task
        except TaskError:
            pass
    root = cache / "ray-tasks" / task.content_hash
    folder = root / task.source_path.name
    if not folder.is_dir():
        root.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=root))
        with tarfile.open(fileobj=io.BytesIO(fetch()), mode="r:gz") as tar:
            tar.extractall(staging, filter="data")
        try:
            (staging / task.source_path.name).rename(folder)
        except OSError:
            pass  # another worker unpacked it first
    loaded = load_task(folder)
    if loaded.content_hash != task.content_hash:
        raise RuntimeError(
            f"{task.id}: the copy unpacked at {folder} hashes to {loaded.content_hash}, "
            f"not {task.content_hash}"
        )
    return replace(loaded, id=task.id, dataset=task.dataset)
