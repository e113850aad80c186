"""Task images: built once per content, from a filtered copy of the task's build context.

The tag is `depthtui-task/<slug>:<hash>`, the hash covering every file that goes into the build
(private files left out), the Dockerfile as built and the ids of the FROM images, so a second
build of an unchanged task is a lookup and any change rebuilds. A FROM image that is neither on
the engine nor pullable (offline: ubuntu:*, debian:*, python:*-slim, ...) is replaced by the local
base image, with a warning that names it.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
from docker.utils.json_stream import json_stream

from engine.sandbox import build_errors, build_proxy
from engine.sandbox.base import SandboxError
from engine.sandbox.build_context import context_files, hash_entry, write_context
from engine.sandbox.buildkit import to_classic
from engine.sandbox.dockerapi import connect
from engine.sandbox.labels import LABEL_TASK
from engine.tasks.model import Task

BASE_IMAGE = "depthtui/base:bookworm"
TAG_REPO = "depthtui-task"
LOG_TAIL_LINES = 40

Progress = Callable[[str], None]

_FROM = re.compile(r"^(\s*FROM\s+)((?:--\S+\s+)*)(\S+)(.*)$", re.IGNORECASE)
_ARG = re.compile(r"^\s*ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(\S*))?", re.IGNORECASE)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_STAGE = re.compile(r"\s+AS\s+(\S+)", re.IGNORECASE)
# The classic builder colours a step's stderr; the log and its tail are read as plain text.
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


@dataclass(frozen=True)
class ImageResult:
    tag: str
    # False when the image already existed (same content) or the task's prebuilt image was used.
    built: bool
    warnings: tuple[str, ...] = ()
    log_path: Path | None = None


def build_image(
    task: Task,
    log_dir: Path,
    on_progress: Progress | None = None,
    *,
    labels: dict[str, str] | None = None,
    client: docker.DockerClient | None = None,
    pull: bool = True,
) -> ImageResult:
    """The image for `task`'s environment, building it only when its content changed.

    Raises SandboxError("build", <the build log's last lines>) when the build fails: an error of
    this task, not of the run. `labels` are put on a built image (tests mark theirs).
    """
    say = on_progress or (lambda line: None)
    client = client or connect()
    env = task.environment
    # Harbor's docker_image: a prebuilt image, used instead of building when it can be had.
    if env.image and (_have(client, env.image) or (pull and _pull(client, env.image))):
        return ImageResult(tag=env.image, built=False)
    text = _dockerfile_text(task)
    warnings: list[str] = []
    if text is None:
        if env.image:
            warning = (
                f"{task.id}: image {env.image} is neither on this engine nor pullable; "
                f"substituted {BASE_IMAGE}"
            )
            say(f"warning: {warning}")
            return ImageResult(tag=BASE_IMAGE, built=False, warnings=(warning,))
        raise SandboxError("build", f"{task.source_path}: the task has no Dockerfile and no image")

    text, notes = to_classic(text)
    text, base_ids, substituted = _resolve_froms(client, text, pull)
    for original in substituted:
        warning = (
            f"{task.id}: FROM {original} cannot be had on this engine (not present, not "
            f"pullable); substituted {BASE_IMAGE}"
        )
        warnings.append(warning)
        say(f"warning: {warning}")

    try:
        proxy = build_proxy.from_host()
    except build_proxy.BuildProxyError as exc:
        raise SandboxError("build", str(exc)) from None
    if proxy is not None:
        text = build_proxy.inject(text, proxy)

    files = list(context_files(task))
    digest = hashlib.sha256()
    digest.update(text.encode())
    if proxy is not None:
        digest.update(proxy.tag_material())
    for base_id in base_ids:
        digest.update(base_id.encode())
    for rel, path, st in files:
        hash_entry(digest, rel, path, st)
    content = digest.hexdigest()[:20]
    slug = _slug(task.id)
    tag = f"{TAG_REPO}/{slug}:{content}"
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{slug}-{content}.log"
    if _have(client, tag):
        kept = log_path if log_path.exists() else None
        return ImageResult(tag=tag, built=False, warnings=tuple(warnings), log_path=kept)
    failed = _FAILED_BUILDS.get(tag)
    if failed is not None and time.monotonic() - failed[0] < FAILED_BUILD_MEMORY_S:
        raise SandboxError("build", failed[1])

    with tempfile.TemporaryFile() as context, log_path.open("w", encoding="utf-8") as log:
        for warning in warnings:
            log.write(f"warning: {warning}\n")
        for note in notes:
            log.write(f"note: {note}\n")
        extra: dict[str, bytes] = {}
        if proxy is not None:
            log.write(f"note: {proxy.describe()}\n")
            extra[build_proxy.CONTEXT_NAME] = proxy.ca_bytes
        write_context(context, files, text, extra)
        context.seek(0)
        buildargs = dict(proxy.proxies) if proxy is not None else {}
        _run_build(
            client, context, tag, task, labels or {}, log, say, buildargs,
            proxy_on=proxy is not None, substituted=substituted,
        )  # fmt: skip
    return ImageResult(tag=tag, built=True, warnings=tuple(warnings), log_path=log_path)


def _dockerfile_text(task: Task) -> str | None:
    env = task.environment
    if env.dockerfile_text is not None:
        return env.dockerfile_text
    if env.dockerfile is None:
        return None
    try:
        return Path(env.dockerfile).read_text(encoding="utf-8")
    except OSError as exc:
        raise SandboxError(
            "build", f"{env.dockerfile}: cannot read the Dockerfile ({exc})"
        ) from None


def _have(client: docker.DockerClient, ref: str) -> bool:
    try:
        client.api.inspect_image(ref)
    except docker.errors.ImageNotFound:
        return False
    except docker.errors.APIError:
        return False
    return True


# Refs a pull already failed for in this process: offline, each would fail again the same way.
_UNPULLABLE: set[str] = set()
# Build errors of the task's own Dockerfile (a step failed, the file did not parse, the build ran
# past its time), by tag: the same content fails the same way, so a retry or the task's next
# episode gets the recorded error instead of building again. Engine trouble is not kept.
# Remembered for a while only: a long-lived engine builds again once a mirror may be back.
_FAILED_BUILDS: dict[str, tuple[float, str]] = {}
FAILED_BUILD_MEMORY_S = 900.0


def _pull(client: docker.DockerClient, ref: str) -> bool:
    if ref in _UNPULLABLE:
        return False
    last = ref.rsplit("/", 1)[-1]
    repo, tag = ref.rsplit(":", 1) if ":" in last and "@" not in ref else (ref, "latest")
    try:
        client.api.pull(repo, tag=tag)
    except Exception:  # offline: DNS, refused, timeout, not found all mean "cannot be had"
        _UNPULLABLE.add(ref)
        return False
    return _have(client, ref)


_DROP_USER = "userdel -r user >/dev/null 2>&1 || true"
# The official python images answer to `python`; task scripts call it by that name.
_PYTHON_NAME = "ln -sf /usr/bin/python3 /usr/local/bin/python"
_PYTHON_IMAGE = re.compile(r"(^|/)python([:@]|$)", re.IGNORECASE)
# Ubuntu 23.04 and later ship an `ubuntu` account (uid 1000) that task Dockerfiles remove.
_UBUNTU_USER = "useradd -m -u 1000 -s /bin/bash ubuntu"
_UBUNTU_WITH_USER = re.compile(
    r"(^|/)ubuntu:(2[3-9]\.|[3-9]\d\.|latest|rolling|devel|noble|oracular|plucky)",
    re.IGNORECASE,
)


def _resolve_froms(
    client: docker.DockerClient, text: str, pull: bool
) -> tuple[str, list[str], list[str]]:
    """The Dockerfile with unobtainable FROM images replaced by BASE_IMAGE; the ids of the FROM
    images used (for the content hash); the refs that were replaced."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    lines = text.splitlines(keepends=True)
    base_ids: list[str] = []
    substituted: list[str] = []
    seen_from = False
    for i, line in enumerate(lines):
        arg = _ARG.match(line)
        if arg and not seen_from:
            args[arg.group(1)] = arg.group(2) or ""
            continue
        m = _FROM.match(line)
        if not m:
            continue
        seen_from = True
        ref = _expand(m.group(3), args)
        stage = _STAGE.match(m.group(4))
        if ref.lower() in stages or ref == "scratch":
            pass
        elif _have(client, ref) or (pull and _pull(client, ref)):
            base_ids.append(client.api.inspect_image(ref)["Id"])
        else:
            if not _have(client, BASE_IMAGE):
                raise SandboxError(
                    "build",
                    f"FROM {ref} cannot be had and the substitute {BASE_IMAGE} is missing too: "
                    "run docker/setup.sh",
                )
            substituted.append(ref)
            base_ids.append(client.api.inspect_image(BASE_IMAGE)["Id"])
            ending = "\n" if line.endswith("\n") else ""
            lines[i] = f"{m.group(1)}{m.group(2)}{BASE_IMAGE}{m.group(4).rstrip()}\n"
            # Look like the stock image asked for: no `user` account (a task that creates it
            # would otherwise fail), the root folder as working directory, and `python` where
            # a python image was asked for.
            setup = _DROP_USER
            if _PYTHON_IMAGE.search(ref):
                setup += f" && {_PYTHON_NAME}"
            if _UBUNTU_WITH_USER.search(ref):
                setup += f" && {_UBUNTU_USER}"
            lines[i] += f"WORKDIR /\nRUN {setup}{ending}"
        if stage:
            stages.add(stage.group(1).lower())
    return "".join(lines), base_ids, substituted


def _expand(ref: str, args: dict[str, str]) -> str:
    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(3)
        return args.get(name) or (m.group(2) or "")

    return _VAR.sub(one, ref)


def _run_build(
    client: docker.DockerClient,
    context: io.IOBase,
    tag: str,
    task: Task,
    labels: dict[str, str],
    log: io.TextIOBase,
    say: Progress,
    buildargs: dict[str, str] | None = None,
    *,
    proxy_on: bool = False,
    substituted: Sequence[str] = (),
) -> None:
    """POST /build and follow its stream into the log. The response is ours, so at the deadline
    its socket is shut down from a timer: the engine sees the client go and cancels the build,
    even in the middle of a silent RUN step."""
    limit = task.environment.build_timeout_sec
    api = client.api
    params = {
        "t": tag,
        "rm": True,
        "forcerm": True,
        "dockerfile": "Dockerfile",
        "labels": json.dumps({LABEL_TASK: task.id, **labels}),
    }
    if buildargs:
        params["buildargs"] = json.dumps(buildargs)
    error = ""
    task_fault = False  # the Dockerfile failed, not the engine
    expired = threading.Event()
    try:
        response = api.post(
            f"{api.base_url}/v{api.api_version}/build",
            params=params,
            data=context,
            headers={"Content-Type": "application/x-tar"},
            stream=True,
            timeout=None,
        )
    except Exception as exc:
        raise SandboxError("build", f"cannot start the build of {task.id}: {exc}") from None

    def expire() -> None:
        expired.set()
        sock = getattr(getattr(response.raw, "connection", None), "sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        response.close()

    timer = threading.Timer(limit, expire)
    timer.daemon = True
    timer.start()
    try:
        if response.status_code >= 400:
            error = f"the engine refused the build: {response.status_code} {response.text[:500]}"
            log.write(f"ERROR: {error}\n")
        else:
            for chunk in json_stream(response.iter_content(chunk_size=None, decode_unicode=False)):
                line = _ANSI.sub("", chunk.get("stream") or chunk.get("status") or "")
                if chunk.get("error"):
                    error, task_fault = chunk["error"], True
                    line = f"ERROR: {error}\n"
                if line:
                    log.write(line if line.endswith("\n") else line + "\n")
                    log.flush()
                    if line.strip():
                        say(line.rstrip("\n"))
    except Exception as exc:
        if not expired.is_set():
            error = f"the build stream broke: {exc}"
            log.write(f"ERROR: {error}\n")
    finally:
        timer.cancel()
        response.close()
    if expired.is_set():
        error = f"the build took longer than build_timeout_sec = {limit:g} s and was stopped"
        log.write(f"ERROR: {error}\n")
        task_fault = True
    elif not error and not _have(client, tag):
        error = "the build ended without producing the image"
        log.write(f"ERROR: {error}\n")
    log.flush()
    if error:
        lines = Path(log.name).read_text(encoding="utf-8", errors="replace").splitlines()
        tail = "\n".join(lines[-LOG_TAIL_LINES:])
        step_failed = task_fault and not expired.is_set()
        # The cause right after the first line (the tail ends with the failing command, which
        # says where, not why; a long tail may be cut where the detail is stored).
        why = build_errors.cause(lines, proxy_on=proxy_on, substituted=substituted)
        head = [f"building the image of {task.id} failed (log: {log.name}):"]
        if why:
            head.append(build_errors.CAUSE + why)
        if step_failed and not build_errors.deterministic(lines):
            task_fault = False  # the network or a mirror: a later try may build
        elif step_failed:
            head.append(build_errors.NOT_RETRIED)
        detail = "\n".join([*head, tail])
        if task_fault:
            _FAILED_BUILDS[tag] = (time.monotonic(), detail)
        raise SandboxError("build", detail)


def _slug(task_id: str) -> str:
    slug = re.sub(r"[^a-z0-9._-]+", "-", task_id.lower())
    slug = re.sub(r"[._-]{2,}", "-", slug).strip("._-")
    return slug[:100] or "task"


def remove_task_images(client: docker.DockerClient, task: Task) -> list[str]:
    """Remove every built image of a task (all content hashes); the tags removed."""
    removed = []
    for img in client.api.images(name=f"{TAG_REPO}/{_slug(task.id)}"):
        for ref in img.get("RepoTags") or []:
            try:
                client.api.remove_image(ref, force=True)
                removed.append(ref)
            except docker.errors.NotFound:
                pass
    return removed
