"""Every heredoc form of BuildKit's Dockerfile frontend (blank after `<<`, quoted and unquoted
delimiters, `<<-`, several on one line, RUN / COPY / ADD, variables expanding in unquoted bodies),
built by the engine's classic builder through build_image on a real Docker engine: each file
holds what BuildKit would put there, and the loader reads no body as an instruction."""

from __future__ import annotations

import subprocess
from pathlib import Path

import docker
import pytest

from engine.sandbox.images import build_image, remove_task_images
from engine.tasks.dockerfile import parse
from engine.tasks.loader import load_task
from tests.conftest import ROOT
from tests.fixtures_sandbox import TEST_LABELS

pytestmark = pytest.mark.docker

TASK = ROOT / "tests" / "fixtures" / "realtasks" / "heredoc-forms"

# (form, file in the image, what BuildKit writes there)
FORMS = [
    (
        "blank after <<, quoted",
        "/srv/forms/space-quoted.conf",
        "WORKER_PROCESSES 4\nFROM datetime import date\nuser=$USER\n",
    ),
    ('double-quoted <<"EOF"', "/srv/forms/double-quoted.txt", "home=$HOME\n"),
    ("backslash-quoted <<\\EOF", "/srv/forms/backslash.txt", "port=${APP_PORT}\n"),
    ("unquoted: ARG and ENV expand", "/srv/forms/unquoted.txt", "greeting=hello port=8080\n"),
    ("blank after <<, unquoted", "/srv/forms/space-unquoted.txt", "WORKDIR /not-a-workdir hello\n"),
    ("<<- strips leading tabs", "/srv/forms/tabs.txt", "indented\ntwice\n"),
    ("<<- with a blank, quoted", "/srv/forms/tabs-space.txt", "$kept\n"),
    ("two on one line, first", "/srv/forms/one.txt", "first hello\n"),
    ("two on one line, second (quoted)", "/srv/forms/two.txt", "second $GREETING\n"),
    ("RUN <<EOF as the script", "/srv/forms/script.txt", "script says hello\n"),
    ("RUN << EOF as the script", "/srv/forms/spaced-script.txt", "spaced script\n"),
    ("RUN <<EOF bash", "/srv/forms/bash.txt", "bash ran\n"),
    ("RUN <<EOF with a shebang", "/srv/forms/python.txt", "python ran\n"),
    (
        "COPY unquoted: variables, not commands",
        "/srv/forms/copy.txt",
        "port=8080 greeting=hello $(echo not-run)\n",
    ),
    ("COPY << 'EOF'", "/srv/forms/copy-quoted.txt", "port=${APP_PORT}\n"),
    ("COPY <<-EOF", "/srv/forms/copy-tabs.txt", "tabbed\n"),
    ("COPY two heredocs into a folder, first", "/srv/forms/multi/first.txt", "one\n"),
    ("COPY two heredocs into a folder, second", "/srv/forms/multi/second.txt", "two\n"),
    (
        "COPY --chmod with a blank after <<, quoted",
        "/usr/local/bin/forms-hello",
        '#!/bin/sh\necho "hello $1"\n',
    ),
    ("ADD <<EOF", "/srv/forms/add.txt", "added\n"),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    task = load_task(TASK)
    client = docker.from_env()
    result = build_image(task, tmp_path_factory.mktemp("logs"), labels=TEST_LABELS, client=client)
    sep = "\n--depthtui-sep--\n"
    script = "; ".join(f"cat {path}; printf '{sep}'" for _, path, _ in FORMS)
    script += "; stat -c %a /usr/local/bin/forms-hello; forms-hello there; pwd"
    try:
        out = subprocess.run(
            [
                "docker",
                "run",
                "--rm",
                "--network",
                "none",
                "--label",
                "depthtui.test=1",
                result.tag,
                "sh",
                "-c",
                script,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        remove_task_images(client, task)
        client.close()
    assert out.returncode == 0, out.stderr
    *files, tail = out.stdout.split(sep)
    return dict(zip([path for _, path, _ in FORMS], files, strict=True)), tail, result


@pytest.mark.parametrize(("form", "path", "expected"), FORMS, ids=[f[0] for f in FORMS])
def test_each_heredoc_form_writes_what_buildkit_writes(built, form, path, expected) -> None:
    files, _, _ = built
    assert files[path] == expected, form


def test_copy_flags_and_the_final_workdir_hold(built) -> None:
    _, tail, result = built
    assert tail.split() == ["755", "hello", "there", "/home/user"]
    log = result.log_path.read_text() if result.log_path else ""
    assert log.count("heredoc rewritten for the classic builder") == 18


def test_the_loader_reads_no_body_as_an_instruction() -> None:
    task = load_task(TASK)
    # The only warning is the substituted base image: nothing about `FROM datetime`, and no
    # WORKER_PROCESSES or WORKDIR taken from a body.
    assert [w for w in task.warnings if "datetime" in w or "WORKER" in w] == []
    info = parse(Path(TASK / "environment" / "Dockerfile").read_text())
    keywords = {i.keyword for i in info.instructions}
    assert keywords == {"FROM", "ARG", "ENV", "RUN", "COPY", "ADD", "WORKDIR"}
    assert [line for line, _ in info.base_images] == [1]
    assert info.workdir == "/home/user"
    assert sum(len(i.heredocs) for i in info.instructions) == 20
