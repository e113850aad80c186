"""A Dockerfile written for BuildKit (heredocs, a cache mount) built by the engine's classic
builder through build_image, on a real Docker engine: every file lands as BuildKit would put it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import docker
import pytest

from engine.sandbox import images
from engine.sandbox.base import SandboxError
from engine.sandbox.images import build_image
from tests.fixtures_sandbox import TEST_LABELS, make_task

pytestmark = pytest.mark.docker

DOCKERFILE = """\
# syntax=docker/dockerfile:1.4
FROM ubuntu:22.04
ARG GREETING=hello
ENV APP_PORT=8080
RUN --mount=type=cache,target=/var/cache/apt echo mounted > /tmp/mount.txt
RUN mkdir -p /home/user/data && cat <<'EOF' > /home/user/data/people.csv && \\
    chmod 0600 /home/user/data/people.csv
name,age
ana,31
WORKDIR /not-a-workdir
EOF
RUN <<EOF
set -e
echo "$GREETING from a script" > /tmp/script.txt
EOF
RUN <<-EOT
\t#!/usr/bin/env python3
\topen("/tmp/py.txt", "w").write("python ran\\n")
\tEOT
COPY <<EOF /etc/app/app.conf
port = ${APP_PORT}
literal = \\$uri
EOF
COPY --chmod=755 <<'EOF' /usr/local/bin/hi
#!/bin/sh
echo "hi $1"
EOF
WORKDIR /home/user
"""

SHOW = (
    "pwd; cat /tmp/mount.txt /home/user/data/people.csv /tmp/script.txt /tmp/py.txt "
    "/etc/app/app.conf; stat -c %a /home/user/data/people.csv /usr/local/bin/hi; hi there; "
    "test -e /not-a-workdir || echo no-stray-workdir"
)


def test_buildkit_heredocs_build_on_the_classic_builder(tmp_path: Path) -> None:
    context = tmp_path / "environment"
    context.mkdir()
    (context / "Dockerfile").write_text(DOCKERFILE)
    task = make_task(
        "realworld-test/heredocs",
        context_dir=context,
        dockerfile=context / "Dockerfile",
        image=None,
    )
    client = docker.from_env()
    result = build_image(task, tmp_path / "logs", labels=TEST_LABELS, client=client)
    try:
        run = ["docker", "run", "--rm", "--network", "none", "--label", "depthtui.test=1"]
        out = subprocess.run(
            [*run, result.tag, "sh", "-c", SHOW],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    finally:
        client.api.remove_image(result.tag, force=True)
        client.close()
    assert out.splitlines() == [
        "/home/user",
        "mounted",
        "name,age",
        "ana,31",
        "WORKDIR /not-a-workdir",
        "hello from a script",
        "python ran",
        "port = 8080",
        "literal = $uri",
        "600",
        "755",
        "hi there",
        "no-stray-workdir",
    ]
    log = result.log_path.read_text() if result.log_path else ""
    assert "COPY heredoc rewritten for the classic builder" in log


def test_a_failing_dockerfile_is_not_built_again_at_once(tmp_path: Path, monkeypatch) -> None:
    # A broken task's retries and its next episodes meet the same failure: one build, not six.
    context = tmp_path / "environment"
    context.mkdir()
    (context / "Dockerfile").write_text(
        "FROM ubuntu:24.04\nRUN apt-get install -y no-such-package-here\n"
    )
    task = make_task(
        "realworld-test/fails", context_dir=context, dockerfile=context / "Dockerfile", image=None
    )
    logs = tmp_path / "logs"
    with pytest.raises(SandboxError) as first:
        build_image(task, logs, labels=TEST_LABELS)
    [log] = logs.iterdir()
    log.write_text("seen\n")  # a new build would write its log again
    with pytest.raises(SandboxError) as again:
        build_image(task, logs, labels=TEST_LABELS)
    assert again.value.detail == first.value.detail
    assert "no-such-package-here" in first.value.detail and log.read_text() == "seen\n"
    # After a while it is tried again (a mirror may be back).
    monkeypatch.setattr(images, "FAILED_BUILD_MEMORY_S", 0.0)
    with pytest.raises(SandboxError):
        build_image(task, logs, labels=TEST_LABELS)
    assert "Unable to locate package no-such-package-here" in log.read_text()
