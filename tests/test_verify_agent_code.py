"""Detection of tests that import or execute agent-written code (static analysis)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from engine.verify.agent_code import scan_tests


def scan(src: str, **kw):
    return scan_tests({"test_final_state.py": textwrap.dedent(src)}, **kw)


def test_plain_file_checks_are_not_flagged():
    report = scan(
        """
        import os, json, subprocess, hashlib
        from pathlib import Path
        import pytest
        HOME = Path("/home/user")
        def test_output():
            data = json.loads((HOME / "out.json").read_text())
            assert data["n"] == 3
            out = subprocess.run(["cat", "/home/user/out.json"], capture_output=True)
            assert subprocess.run(["ls", "-l"], cwd=HOME).returncode == 0
            assert hashlib.sha256(b"x").hexdigest()
            import ctypes
            assert ctypes.CDLL(None).getpid() and ctypes.CDLL("libc.so.6")
        """
    )
    assert not report.flagged, report.lines()


@pytest.mark.parametrize(
    ("src", "line", "kind", "in_process"),
    [
        ("import solution\n", 1, "import", True),
        ("from mypkg.core import run\n", 1, "import", True),
        ("import numpy as np\n", 1, "import", True),
        ("import importlib\nm = importlib.import_module('solution')\n", 2, "import", True),
        ("m = __import__(name)\n", 1, "import", True),
        ("import sys\nsys.path.insert(0, '/home/user')\n", 2, "sys_path", True),
        ("import sys\nsys.path = ['/home/user']\n", 2, "sys_path", True),
        ("exec(open('/home/user/x.py').read())\n", 1, "exec", True),
        ("import runpy\nrunpy.run_path('/home/user/solve.py')\n", 2, "exec", True),
        (
            "import importlib.util as u\ns = u.spec_from_file_location('m', '/app/m.py')\n",
            2,
            "exec",
            True,
        ),
        ("import ctypes\nctypes.CDLL('/home/user/libx.so')\n", 2, "exec", True),
        ("import pickle\npickle.load(open('/home/user/m.pkl', 'rb'))\n", 2, "exec", True),
        ("import subprocess\nsubprocess.run(['bash', '/home/user/run.sh'])\n", 2, "program", False),
        (
            "import subprocess, sys\nsubprocess.run([sys.executable, '/home/user/solve.py'])\n",
            2,
            "program",
            False,
        ),
        ("import os\nos.system('cd /home/user && ./build.sh')\n", 2, "program", False),
        (
            "from subprocess import check_output as co\nco('python3 solve.py', shell=True)\n",
            2,
            "program",
            False,
        ),
        (
            "import subprocess, os\n"
            "HOME = '/home/user'\n"
            "SCRIPT = os.path.join(HOME, 'bin', 'tool')\n"
            "subprocess.run([SCRIPT, '--check'])\n",
            4,
            "program",
            False,
        ),
        (
            "import subprocess\nfrom pathlib import Path\n"
            "subprocess.run(['python3', str(Path.home() / 'solve.py')])\n",
            3,
            "program",
            False,
        ),
        ("import subprocess\nsubprocess.run(['/tmp/agent-made'])\n", 2, "program", False),
    ],
)
def test_flagged_with_evidence(src, line, kind, in_process):
    report = scan(src)
    assert report.flagged
    ev = report.evidence[0]
    assert (ev.file, ev.line, ev.kind, ev.in_process) == (
        "test_final_state.py",
        line,
        kind,
        in_process,
    )
    assert str(ev).startswith(f"test_final_state.py:{line}: ")


def test_workdir_and_helpers_shipped_with_the_tests(tmp_path: Path):
    helper = tmp_path / "helpers.py"
    helper.write_text("import json\n")
    test = tmp_path / "test_outputs.py"
    test.write_text(
        "import helpers\nimport subprocess\n"
        "subprocess.run(['python3', '/tests/check.py'])\n"
        "subprocess.run(['/app/server', '--port', '8000'])\n"
    )
    report = scan_tests({"helpers.py": helper, "test_outputs.py": test}, workdir="/app")
    # helpers.py ships with the tests; /tests/check.py is trusted; /app/server is the agent's.
    assert report.lines() == (
        "test_outputs.py:4: runs agent-writable code '/app/server' via subprocess.run()",
    )


def test_shell_lines_and_unparsable_files():
    report = scan_tests(
        {
            "test.sh": "#!/bin/bash\ncd /app\nbash /app/run_me.sh\npython3 /tests/t.py\n",
            "test_broken.py": "def (:\n",
            "data.txt": "import solution\n",
        },
        workdir="/app",
    )
    assert report.lines() == ("test.sh:3: runs agent-writable code '/app/run_me.sh'",)
    assert "test.sh:3" in report.summary()


def test_a_finding_repeated_is_given_once_and_the_in_process_one_first(tmp_path: Path):
    from engine.verify.grade import Grade, forgeable_mark

    test = tmp_path / "test_outputs.py"
    test.write_text(
        "import subprocess\n"
        "def test_a():\n"
        "    subprocess.run(['/app/server'])\n"
        "    subprocess.run(['/app/server'])\n"
        "    subprocess.run(['/app/server'])\n"
        "    exec(compile(open('/app/solution.py').read(), 'solution', 'exec'))\n"
    )
    report = scan_tests({"test_outputs.py": test}, workdir="/app")
    assert report.in_process
    assert report.lines() == (
        "test_outputs.py:6: exec() of code: exec()",
        "test_outputs.py:6: compile() of code: compile()",
        "test_outputs.py:3,4,5: runs agent-writable code '/app/server' via subprocess.run()",
    )
    # The episode's mark cites the in-process line that decided it, and counts distinct ones.
    grade = Grade(True, {"reward": 1.0}, 1, 1, [], "", forgeable=report.lines())
    assert forgeable_mark([grade, grade])["forgeable_evidence"] == (
        "test_outputs.py:6: exec() of code: exec() (and 2 more)"
    )
