"""Task image builds that fail, through the real CLI on a real Docker engine (docs/builds.md):
the quoted error is the cause, not the failing RUN line; a build that fails the same way every
time is tried once, not three times; and a failure stored without `--build-proxy` is built again
with it (the proxy's CA is part of the image), not reused.

The "needs the proxy CA" task stands for a download through a TLS-intercepting proxy: its RUN
step prints Python's CERTIFICATE_VERIFY_FAILED line and fails unless the build was handed a CA
bundle (/usr/local/share/depthtui/build-ca.pem, which `--build-proxy` copies in), so it runs
offline. The PPA task is written for ubuntu:22.04, which this engine cannot have: the Debian base
is substituted and `add-apt-repository` is not there.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from engine.sandbox.build_errors import NOT_RETRIED
from tests.conftest import ROOT
from tests.fixtures_measure import cleanup, rows, run_cli

pytestmark = [pytest.mark.docker, pytest.mark.slow]

TEMPLATE = ROOT / "tests" / "fixtures" / "tasks" / "formats" / "harbor-single"
NEEDS_CA = """\
FROM depthtui/base:bookworm
RUN useradd -m -u 1001 agent && mkdir -p /app && chown agent /app
RUN test -s /usr/local/share/depthtui/build-ca.pem || { echo "ssl.SSLCertVerificationError: \\
[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local issuer \\
certificate"; exit 1; }
RUN echo a later step, the last RUN line
"""
PPA = """\
FROM ubuntu:22.04
RUN useradd -m -u 1001 agent && mkdir -p /app && chown agent /app
RUN add-apt-repository -y ppa:deadsnakes/ppa
RUN echo a later step
"""


def _task(root: Path, name: str, dockerfile: str) -> Path:
    folder = root / "buildfail" / name
    shutil.copytree(TEMPLATE, folder)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace("samples/harbor-single", f"buildfail/{name}"))
    (folder / "environment" / "Dockerfile").write_text(dockerfile)
    return folder


def _cause(detail: str) -> str:
    """The line of a build error that names its cause (right after the first line)."""
    lines = detail.splitlines()
    assert lines[1].startswith("cause: "), lines[:3]
    return lines[1]


@pytest.fixture
def owners():
    made: list[str] = []
    yield made
    cleanup(made)
    # The images the CLI built for these tasks (labelled by task, as every task image is).
    for task in ("buildfail/needs-ca", "buildfail/ppa"):
        ids = subprocess.run(
            ["docker", "images", "-q", "--filter", f"label=depthtui.task={task}"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        if ids:
            subprocess.run(["docker", "rmi", "-f", *ids], capture_output=True, check=False)


def test_a_build_needing_the_proxy_ca_says_so_once_then_builds_with_the_proxy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, owners: list[str]
) -> None:
    task = _task(tmp_path, "needs-ca", NEEDS_CA)
    db = tmp_path / "depthtui.db"
    bundle = tmp_path / "host-ca.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\nproxy-ca\n-----END CERTIFICATE-----\n")
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    monkeypatch.delenv("DEPTHTUI_BUILD_PROXY", raising=False)

    first = run_cli(["check", str(task), "--json"], db, owners=owners)
    assert first.returncode == 1, first.stderr[-2000:]
    failed = rows(db, "SELECT * FROM episodes ORDER BY id")
    # One try each for the reference and the no-op run: the same build fails the same way.
    assert [(e["agent"], e["outcome"], e["error_kind"]) for e in failed] == [
        ("oracle", "infra_error", "build"),
        ("nop", "infra_error", "build"),
    ]
    cause = _cause(failed[0]["error_detail"])
    assert cause.startswith(
        "cause: CERTIFICATE_VERIFY_FAILED: the build does not trust a TLS certificate"
    )
    assert "run with `depthtui --build-proxy ...`" in cause
    assert re.search(r"; at step \d+/\d+ \(RUN test -s /usr/local/share/depthtui/", cause)
    assert failed[0]["error_detail"].splitlines()[2] == NOT_RETRIED
    # What `check` quotes is that cause, with its remedy, and that it was not tried again.
    [row] = first.json()
    [problem] = row["problems"]
    assert "... cause: CERTIFICATE_VERIFY_FAILED" in problem and "--build-proxy" in problem
    assert problem.endswith("(infrastructure: not retried, it fails the same way)")

    second = run_cli(["--build-proxy", "check", str(task), "--json"], db, owners=owners)
    assert second.returncode == 0, second.stderr[-2000:]
    assert "2 episode(s) run, 0 reused" in " ".join(second.stderr.split())
    [row] = second.json()
    assert (row["ok"], row["reference_passed"], row["noop_failed"]) == (True, True, True), row
    statuses = [(e["status"], e["error_kind"]) for e in rows(db, "SELECT * FROM episodes")]
    assert statuses == [("superseded", "build")] * 2 + [("done", None)] * 2


def test_an_ubuntu_ppa_on_the_substituted_debian_base_names_the_substitution(
    tmp_path: Path, owners: list[str]
) -> None:
    task = _task(tmp_path, "ppa", PPA)
    db = tmp_path / "depthtui.db"
    done = run_cli(["check", str(task), "--json"], db, owners=owners)
    assert done.returncode == 1, done.stderr[-2000:]
    episodes = rows(db, "SELECT * FROM episodes ORDER BY id")
    assert len(episodes) == 2  # tried once each
    cause = _cause(episodes[0]["error_detail"])
    assert cause.startswith(
        "cause: an Ubuntu PPA on a Debian base: FROM ubuntu:22.04 cannot be had on this engine"
    )
    assert "depthtui/base:bookworm was substituted" in cause
    assert re.search(r"; at step \d+/\d+ \(RUN add-apt-repository -y ppa:deadsnakes/ppa\)", cause)
