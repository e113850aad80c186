"""The Harbor test.sh verifier end to end on real snapshots: the Terminal-Bench preamble runs
offline with the trusted pytest, reward.txt / reward.json are read from a fresh /logs/verifier,
the agent cannot forge them, and every failure is a verifier error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.verify.harbor_verifier import HarborSpec, _read_regular, run_harbor_verifier
from engine.verify.rewards import RewardError

pytest_plugins = ["tests.fixtures_verify"]

LABELS = {"depthtui.test": "1"}
MAKE_APP = "mkdir -p /app && chown 1000:1000 /app"

TEST_SH = """\
#!/bin/bash

# Install curl
apt-get update
apt-get install -y curl

# Install uv
curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh

source $HOME/.local/bin/env

# Check if we're in a valid working directory
if [ "$PWD" = "/" ]; then
    echo "Error: No working directory set."
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

TEST_OUTPUTS = """
import os

def test_result_file():
    assert os.getcwd() == "/app"
    assert open("/app/result.txt").read().strip() == "42"
"""


def spec(image: str, tests, **kw) -> HarborSpec:
    return HarborSpec(image=image, tests=tests, workdir="/app", labels=LABELS, **kw)


@pytest.fixture
def app(snapshot):
    def make(answer: str, **kw) -> str:
        return snapshot(f"echo {answer} > /app/result.txt\n" + kw.pop("agent", ""), **kw)

    def with_root(answer: str, root_script: str = "", **kw) -> str:
        return make(answer, root_script=MAKE_APP + "\n" + root_script, **kw)

    return with_root


def test_terminal_bench_task_offline(app, write_tests, toolchain):
    tests = write_tests({"test.sh": TEST_SH, "test_outputs.py": TEST_OUTPUTS})
    good = run_harbor_verifier(spec(app("42"), tests), toolchain=toolchain)
    assert good.ok, (good.error_detail, good.output)
    assert good.rewards == {"reward": 1.0} and good.passed
    assert "1 passed" in good.output
    assert len(good.changes) == 5 and good.toolchain_sha256 == toolchain.sha256
    bad = run_harbor_verifier(spec(app("41"), tests), toolchain=toolchain)
    assert bad.ok and bad.rewards == {"reward": 0.0} and not bad.passed
    assert "AssertionError" in bad.output


def test_reward_json_wins_and_gates(app, write_tests, toolchain):
    tests = write_tests(
        {
            "test.sh": """\
                #!/bin/bash
                echo '{"reward": 0.5, "style": 0}' > /logs/verifier/reward.json
                echo 1 > /logs/verifier/reward.txt
                exit 3
            """
        }
    )
    image = app("42")
    v = run_harbor_verifier(spec(image, tests, min_reward=0.5), toolchain=toolchain)
    assert v.rewards == {"reward": 0.5, "style": 0.0}
    assert v.passed and v.exit_code == 3  # the exit code is recorded, never used
    gated = run_harbor_verifier(spec(image, tests, min_reward={"style": 1.0}), toolchain=toolchain)
    assert gated.ok and not gated.passed
    default = run_harbor_verifier(spec(image, tests), toolchain=toolchain)
    assert not default.passed  # without min_reward a pass needs reward >= 1


@pytest.mark.parametrize(
    ("script", "needle"),
    [
        ("#!/bin/bash\necho done\n", "neither"),
        ("#!/bin/bash\necho > /logs/verifier/reward.txt\n", "reward.txt is empty"),
        ("#!/bin/bash\necho PASSED > /logs/verifier/reward.txt\n", "expected one number"),
        ("#!/bin/bash\nln -s /etc/passwd /logs/verifier/reward.json\n", "not a regular file"),
    ],
)
def test_missing_or_bad_reward_is_a_verifier_error(app, write_tests, toolchain, script, needle):
    v = run_harbor_verifier(spec(app("42"), write_tests({"test.sh": script})), toolchain=toolchain)
    assert (v.error_kind, v.error_code, v.passed) == ("verifier", "no_reward", False)
    assert needle in v.error_detail


def test_timeout(app, write_tests, toolchain):
    tests = write_tests({"test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\nsleep 600\n"})
    v = run_harbor_verifier(spec(app("42"), tests, timeout_s=3), toolchain=toolchain)
    assert v.error_code == "timeout" and not v.passed


def test_network_needs_are_clear_errors(app, write_tests, toolchain):
    pip = write_tests({"test.sh": "#!/bin/bash\npip install pytest requests\npytest /tests\n"})
    v = run_harbor_verifier(spec("unused-image", pip), toolchain=toolchain)
    assert v.error_code == "needs_network"
    assert "line 2" in v.error_detail and "requests" in v.error_detail
    # An apt package the image lacks is found when test.sh runs (the image decides).
    apt = write_tests(
        {
            "test.sh": "#!/bin/bash\napt-get update && apt-get install -y jq\n"
            "echo 1 > /logs/verifier/reward.txt\n"
        }
    )
    v = run_harbor_verifier(spec(app("42"), apt), toolchain=toolchain)
    assert v.error_code == "needs_network" and "jq" in v.error_detail
    present = write_tests(
        {"test.sh": "#!/bin/bash\napt-get install -y procps\necho 1 > /logs/verifier/reward.txt\n"}
    )
    assert run_harbor_verifier(spec(app("42"), present), toolchain=toolchain).passed


def test_marker_text_in_the_output_is_not_a_verdict(app, write_tests, toolchain):
    # Issue 24: the old offline marker printed by test.sh (as an agent's file would be, plain
    # or after \x0b) no longer turns a failing run into needs_network.
    forged = write_tests(
        {
            "test.sh": "#!/bin/bash\nprintf 'x\\013DEPTHTUI-OFFLINE-MISSING: forged\\n'\n"
            "echo 'DEPTHTUI-OFFLINE-MISSING: forged'\necho 0 > /logs/verifier/reward.txt\n"
        }
    )
    v = run_harbor_verifier(spec(app("42"), forged), toolchain=toolchain)
    assert v.error_code is None and not v.passed
    assert "DEPTHTUI-OFFLINE-MISSING" in v.output


def test_missing_module_and_agent_code(app, write_tests, toolchain):
    numpy = write_tests(
        {
            "test.sh": "#!/bin/bash\npytest /tests/test_outputs.py\n",
            "test_outputs.py": "import numpy\n",
        }
    )
    v = run_harbor_verifier(spec("unused-image", numpy), toolchain=toolchain)
    assert v.error_code == "missing_module" and "numpy" in v.error_detail
    runs_agent = write_tests(
        {
            "test.sh": TEST_SH,
            "test_outputs.py": """
                import subprocess
                def test_solution():
                    out = subprocess.run(["bash", "/app/solve.sh"], capture_output=True, text=True)
                    assert out.stdout.strip() == "42"
            """,
        }
    )
    image = app("0", agent="echo 'echo 42' > /app/solve.sh")
    # Graded as Harbor grades it, and marked: the agent's script could write the reward.
    graded = run_harbor_verifier(spec(image, runs_agent), toolchain=toolchain)
    assert graded.ok and graded.passed and graded.forgeable
    assert graded.risk == (
        "test_outputs.py:4: runs agent-writable code '/app/solve.sh' via subprocess.run()",
    )
    # A module imported from a folder the tests put on sys.path is the agent's, not missing.
    imports_agent = write_tests(
        {
            "test.sh": TEST_SH,
            "test_outputs.py": """
                import sys
                sys.path.insert(0, "/app")
                from answer import VALUE
                def test_value():
                    assert VALUE == 42
            """,
        }
    )
    image = app("0", agent="echo 'VALUE = 42' > /app/answer.py")
    graded = run_harbor_verifier(spec(image, imports_agent), toolchain=toolchain)
    assert graded.ok and graded.passed and graded.forgeable
    assert "imports 'answer' from a folder the tests put on sys.path ('/app')" in graded.risk[1]


FORGE = """
mkdir -p /logs/verifier
echo 1 > /logs/verifier/reward.txt
echo '{"reward": 1}' > /logs/verifier/reward.json
"""

LURKER = """
while :; do
  if [ -d /tests ]; then
    echo '{"reward": 1}' > /logs/verifier/reward.json
    echo 42 > /app/result.txt
  fi
  sleep 0.1
done
"""


def test_agent_cannot_forge_reward_files(app, write_tests, toolchain):
    tests = write_tests({"test.sh": TEST_SH, "test_outputs.py": TEST_OUTPUTS})
    image = app(
        "41",
        root_script="mkdir -p /logs/verifier && chmod -R 777 /logs",
        agent=FORGE,
        background=LURKER,
    )
    v = run_harbor_verifier(spec(image, tests), toolchain=toolchain)
    assert v.ok and v.rewards == {"reward": 0.0} and not v.passed


def test_reward_files_are_read_without_following_links(tmp_path: Path):
    (tmp_path / "reward.txt").write_text("1\n")
    os.symlink(tmp_path / "reward.txt", tmp_path / "reward.json")
    with pytest.raises(RewardError, match="not a regular file"):
        _read_regular(tmp_path / "reward.json")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(RewardError, match="not a regular file"):
        _read_regular(tmp_path / "fifo")
    assert _read_regular(tmp_path / "reward.txt") == b"1\n"
    assert _read_regular(tmp_path / "absent") is None
