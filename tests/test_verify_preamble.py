"""Offline rewriting of Harbor test.sh files: the network preamble goes, the pytest line runs
the trusted pytest with its test files, reward lines stay; what cannot be replaced is an error
naming the line. Every rewrite is checked with `bash -n`."""

from __future__ import annotations

import subprocess
import textwrap

import pytest

from engine.verify.preamble import OfflineError, rewrite_test_sh
from engine.verify.toolchain import PYTEST

TERMINAL_BENCH = """\
#!/bin/bash

# Install curl
apt-get update
apt-get install -y curl

# Install uv
curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh

source $HOME/.local/bin/env

# Check if we're in a valid working directory
if [ "$PWD" = "/" ]; then
    echo "Error: No working directory set. Please set a WORKDIR in your Dockerfile."
    exit 1
fi

uvx \\
  -p 3.13 \\
  -w pytest==8.4.1 \\
  -w pytest-json-ctrf==0.3.5 \\
  pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA


if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
"""


def bash_ok(script: str) -> None:
    res = subprocess.run(["bash", "-n"], input=script.encode(), capture_output=True)
    assert res.returncode == 0, res.stderr.decode()


def code_lines(script: str) -> list[str]:
    return [
        line.strip()
        for line in script.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def test_terminal_bench_template():
    r = rewrite_test_sh(TERMINAL_BENCH)
    bash_ok(r.script)
    assert r.runs_pytest
    lines = code_lines(r.script)
    # --ctrf stays: the trusted toolchain has pytest-json-ctrf.
    assert f"{PYTEST} --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py -rA" in lines
    assert "echo 1 > /logs/verifier/reward.txt" in lines
    assert not any(w in r.script for w in ("apt-get", "astral.sh", ".local/bin/env", "uvx"))
    assert len(r.changes) == 5
    assert r.changes[0].startswith("line 4: removed `apt-get update`")


def test_guarded_installer_and_commented_continuation():
    script = textwrap.dedent(
        """\
        #!/bin/bash
        set -eo pipefail
        if ! command -v uv &> /dev/null; then
            apt-get update && apt-get install -y curl
            (set -o pipefail; curl -LsSf https://astral.sh/uv/0.10.11/install.sh | sh) || exit $?
        fi
        source "$HOME/.local/bin/env"
        uvx \\
          -p 3.13 \\
          -w pytest==8.4.1 \\
          # -w pandas==2.3.3 \\
          pytest /tests/test_outputs.py -rA
        echo $? > /logs/verifier/reward.txt
        """
    )
    r = rewrite_test_sh(script)
    bash_ok(r.script)
    lines = code_lines(r.script)
    assert "true && true" in lines
    assert "(set -o pipefail; true) || exit $?" in lines
    # bash ends the uvx command at the comment, so pytest is a command of its own
    assert f"{PYTEST} /tests/test_outputs.py -rA" in lines


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("pytest /tests/test_a.py -v", f"{PYTEST} /tests/test_a.py -v"),
        (
            'python3 -m pytest -q "$TESTS/t.py" 2>&1 | tee out',
            f'{PYTEST} -q "$TESTS/t.py" 2>&1 | tee out',
        ),
        ("uv run --with pytest pytest /tests/t.py", f"{PYTEST} /tests/t.py"),
        ("uv tool run pytest /tests/t.py", f"{PYTEST} /tests/t.py"),
        (
            "cd /app && pytest --ctrf=/logs/c.json t.py",
            f"cd /app && {PYTEST} --ctrf=/logs/c.json t.py",
        ),
        ("pip install pytest==8.4.1 pytest-timeout", "true"),
        ("python3 -m pip install --upgrade pip", "true"),
        ("uv venv .venv && source .venv/bin/activate", "true && true"),
        ("curl -s http://localhost:8000/health", "curl -s http://localhost:8000/health"),
        ("python3 /tests/check.py", "python3 /tests/check.py"),
    ],
)
def test_single_commands(line, expected):
    r = rewrite_test_sh(line + "\n")
    bash_ok(r.script)
    assert code_lines(r.script) == [expected]


def test_apt_packages_are_listed_for_the_verifier_not_checked_in_test_sh():
    # Issue 24: the check is the verifier's, on the task's image; test.sh's output never
    # decides it, so the script keeps no check (and no marker) of its own.
    r = rewrite_test_sh("apt-get install -y --no-install-recommends jq=1.6 curl >/dev/null\n")
    bash_ok(r.script)
    assert code_lines(r.script) == ["true"]
    assert r.apt_packages == ("jq",)
    assert "DEPTHTUI-OFFLINE-MISSING" not in r.script


def test_heredoc_bodies_are_left_alone():
    script = "cat > /tmp/req.txt <<'EOF'\npip install numpy\nEOF\npytest /tests/t.py\n"
    r = rewrite_test_sh(script)
    bash_ok(r.script)
    assert "pip install numpy" in r.script
    assert f"{PYTEST} /tests/t.py" in r.script


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("pip install pytest numpy==2.0", "installs numpy"),
        ("pip install -r /tests/requirements.txt", "-r"),
        ("uvx -p 3.13 -w pytest -w pandas==2.3.3 pytest /tests/t.py", "need pandas"),
        ("uvx -w pip==25.2 -w pytest pytest /tests/t.py", "need pip"),
        ("uvx ruff check /app", "uvx ruff"),
        ("uv sync", "uv sync"),
        ("git clone https://github.com/example/repo /app/repo", "github.com"),
        ("wget -q https://example.com/data.csv -O /tmp/d.csv", "example.com"),
        ("npm install -g left-pad", "npm install"),
    ],
)
def test_needs_network(line, needle):
    with pytest.raises(OfflineError, match="line 2") as info:
        rewrite_test_sh("#!/bin/bash\n" + line + "\n")
    assert needle in str(info.value)
