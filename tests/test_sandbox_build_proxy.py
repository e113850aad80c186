"""Builds behind a proxy (docs/builds.md): with DEPTHTUI_BUILD_PROXY on, a task image build gets
the host's CA bundle and proxy settings, so a Dockerfile that pip-installs from PyPI builds on a
machine that reaches PyPI only through a TLS-intercepting proxy; without it the build fails with
the certificate error in its message. The tag covers the CA bundle, never a proxy's URL."""

from __future__ import annotations

import subprocess
from pathlib import Path

import docker
import pytest

from engine.sandbox import build_proxy
from engine.sandbox.base import SandboxError
from engine.sandbox.images import build_image, remove_task_images
from tests.fixtures_sandbox import BASE, TEST_LABELS, make_task

# pip itself fetched from PyPI over TLS (the base image has no pip), then a small pure-Python
# package installed with it: both need the CA that the build is given.
DOCKERFILE = f"""\
FROM {BASE}
RUN python3 -c "import re, urllib.request as u; \\
page = u.urlopen('https://pypi.org/simple/pip/').read().decode(); \\
url = re.search(r'href=.(https://[^#]*/pip-24.3.1-py3-none-any.whl)', page).group(1); \\
open('/tmp/pip.whl', 'wb').write(u.urlopen(url).read())"
RUN python3 /tmp/pip.whl/pip install --no-cache-dir --target /opt/pkgs six==1.16.0 \\
    && rm /tmp/pip.whl
"""


def _task(tmp_path: Path, name: str):
    context = tmp_path / name
    context.mkdir()
    (context / "Dockerfile").write_text(DOCKERFILE)
    return make_task(
        f"proxy-test/{name}", context_dir=context, dockerfile=context / "Dockerfile", image=None
    )


def test_hand_over_is_off_by_default_and_keeps_proxy_values_out_of_the_tag(tmp_path: Path):
    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(b"-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n")
    assert build_proxy.from_host({"SSL_CERT_FILE": str(bundle)}) is None
    env = {
        "DEPTHTUI_BUILD_PROXY": "1",
        "SSL_CERT_FILE": str(bundle),
        "HTTPS_PROXY": "http://user:secret@proxy:3128",
        "no_proxy": "localhost",
    }
    one = build_proxy.from_host(env)
    assert one is not None and one.ca_source == bundle
    assert one.proxies == {"HTTPS_PROXY": "http://user:secret@proxy:3128", "no_proxy": "localhost"}
    other = build_proxy.from_host({**env, "HTTPS_PROXY": "http://other:3128"})
    assert other is not None and other.tag_material() == one.tag_material()
    assert b"secret" not in one.tag_material()
    text = build_proxy.inject("FROM a AS x\nRUN true\nfrom \\\n  b\nRUN false\n", one)
    lines = text.splitlines()
    assert lines[1] == f"COPY {build_proxy.CONTEXT_NAME} {build_proxy.CA_PATH}"
    assert lines[2].startswith(f"ARG SSL_CERT_FILE={build_proxy.CA_PATH} PIP_CERT=")
    assert lines[6] == lines[1] and lines[-1] == "RUN false"
    with pytest.raises(build_proxy.BuildProxyError, match="no CA bundle"):
        build_proxy.from_host(
            {"DEPTHTUI_BUILD_PROXY": "1", "SSL_CERT_FILE": str(tmp_path / "none")},
            system_bundles=(),
        )


@pytest.mark.docker
@pytest.mark.slow  # pip and a package from PyPI: about a minute
def test_pip_install_builds_with_the_option_and_fails_clearly_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    client = docker.from_env()
    with_task, without_task = _task(tmp_path, "with"), _task(tmp_path, "without")
    try:
        monkeypatch.setenv("DEPTHTUI_BUILD_PROXY", "1")
        built = build_image(with_task, tmp_path / "logs", labels=TEST_LABELS, client=client)
        out = subprocess.run(
            ["docker", "run", "--rm", "--network", "none", "--label", "depthtui.test=1",
             built.tag, "sh", "-c", "ls /opt/pkgs/six.py; env | grep -c SSL_CERT_FILE || true"],
            capture_output=True, text=True, timeout=60,
        ).stdout.split()  # fmt: skip
        # The package is there; the CA variables were the build's only (ARG), not the image's.
        assert out == ["/opt/pkgs/six.py", "0"]
        log = built.log_path.read_text() if built.log_path else ""
        assert "build proxy: CA bundle" in log

        monkeypatch.delenv("DEPTHTUI_BUILD_PROXY")
        try:
            plain = build_image(without_task, tmp_path / "logs", labels=TEST_LABELS, client=client)
        except SandboxError as exc:
            assert "CERTIFICATE_VERIFY_FAILED" in str(exc), str(exc)[-2000:]
        else:
            client.api.remove_image(plain.tag, force=True)
            pytest.skip("this machine reaches PyPI without a TLS-intercepting proxy")
    finally:
        for task in (with_task, without_task):
            remove_task_images(client, task)
        client.close()
