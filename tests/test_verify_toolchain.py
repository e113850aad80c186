"""The trusted toolchain: built offline by docker/toolchain.sh, idempotent, hashed, and running
pytest through its own loader inside both Debian 12 and Debian 11 (older glibc, Python 3.9)
containers, as the agent's uid, with no network."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from engine.verify.pytest_verifier import PytestSpec, run_pytest_verifier
from engine.verify.toolchain import ToolchainError, load_toolchain, runner_source

pytest_plugins = ["tests.fixtures_verify"]

ROOT = Path(__file__).resolve().parents[1]
BOOKWORM, BULLSEYE = "depthtui/base:bookworm", "depthtui/base:bullseye"
LABELS = {"depthtui.test": "1"}

PROBE = """
import ctypes, os, socket, subprocess, sys

def test_trusted_python():
    assert sys.version_info[:2] == (3, 11)
    assert sys.prefix == "/opt/depthtui/toolchain"
    assert sys.flags.isolated and sys.flags.no_site

def test_distribution():
    assert open("/etc/debian_version").read().startswith("{debian}")

def test_programs_use_the_image_libraries():
    # What the tests start runs on the container's own loader and Python.
    out = subprocess.run(["python3", "-c", "import sys; print(sys.version_info[1])"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "{image_minor}"

def test_sys_executable_runs_the_trusted_python():
    out = subprocess.run([sys.executable, "-c", "import sys; print(sys.version_info[1])"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "11"

def test_agent_uid_no_network_read_only_tests():
    assert os.getuid() == 1000
    try:
        socket.create_connection(("1.1.1.1", 80), timeout=3)
        raise AssertionError("network reachable")
    except OSError:
        pass
    try:
        open("/tests/x", "w")
        raise AssertionError("/tests is writable")
    except OSError:
        pass

def test_tmp_path_is_under_a_fresh_random_folder(tmp_path):
    assert str(tmp_path).startswith("/tmp/depthtui-") and os.access(tmp_path, os.W_OK)

def test_runner_is_not_dumpable():
    assert ctypes.CDLL(None).prctl(3, 0, 0, 0, 0) == 0
    # Another process of the same uid cannot read the runner's environment or memory.
    for what in ("environ", "mem"):
        res = subprocess.run(["cat", f"/proc/{{os.getpid()}}/{{what}}"], capture_output=True)
        assert res.returncode != 0 and b"Permission denied" in res.stderr
"""


@pytest.mark.parametrize(
    ("image", "debian", "image_minor"), [(BOOKWORM, "12", "11"), (BULLSEYE, "11", "9")]
)
def test_toolchain_runs_pytest_across_distributions(
    write_tests, toolchain, image, debian, image_minor
):
    tests = write_tests({"test_probe.py": PROBE.format(debian=debian, image_minor=image_minor)})
    verdict = run_pytest_verifier(
        PytestSpec(image=image, tests=tests, labels=LABELS), toolchain=toolchain
    )
    assert verdict.ok, verdict.error_detail
    failures = [(r.nodeid, r.message) for r in verdict.results if not r.passed]
    assert failures == []
    assert verdict.tests_total == 7 and verdict.complete
    assert verdict.toolchain_sha256 == toolchain.sha256


def test_toolchain_script_is_idempotent_and_recorded(toolchain):
    res = subprocess.run(
        [str(ROOT / "docker" / "toolchain.sh")], cwd=ROOT, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    assert "up to date" in res.stdout
    info = json.loads((toolchain.path / "TOOLCHAIN.json").read_text())
    assert info["sha256"] == toolchain.sha256 and len(toolchain.sha256) == 64
    assert info["python"].startswith("3.11.")
    assert info["pytest_timeout"] == "2.4.0"
    assert info["files"] > 1000
    libs = {p.name for p in (toolchain.path / "lib").iterdir()}
    assert {"ld-linux-x86-64.so.2", "libc.so.6", "libssl.so.3", "libffi.so.8"} <= libs


def test_missing_or_stale_toolchain_is_a_clear_error(tmp_path: Path):
    with pytest.raises(ToolchainError, match=r"docker/toolchain\.sh"):
        load_toolchain(tmp_path)
    for rel in ("lib/ld-linux-x86-64.so.2", "bin/python3.11", "bin/pytest"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    (tmp_path / "runner").mkdir()
    (tmp_path / "runner" / "runner.py").write_text("# an older runner\n")
    info = {"sha256": "0" * 64, "python": "3.11.2", "pytest": "7.2.1"}
    info |= {"pytest_timeout": "2.4.0", "runner_sha256": "1" * 64}
    (tmp_path / "TOOLCHAIN.json").write_text(json.dumps(info))
    with pytest.raises(ToolchainError, match="out of date"):
        load_toolchain(tmp_path)
    (tmp_path / "runner" / "runner.py").write_bytes(runner_source().read_bytes())
    (tmp_path / "TOOLCHAIN.json").write_text("{broken")
    with pytest.raises(ToolchainError, match="unreadable"):
        load_toolchain(tmp_path)
