"""The pytest verifier end to end on real snapshots: the agent (uid 1000) works in a container,
the container is committed, and the hidden tests grade the snapshot in a fresh container."""

from __future__ import annotations

import pytest

from engine.tasks.model import Environment, Limits, Segment, Task
from engine.verify.pytest_verifier import PytestSpec, run_pytest_verifier, spec_for
from store.db import Store
from store.episodes import add_test_results, create_episode, list_test_results

pytest_plugins = ["tests.fixtures_verify"]

LABELS = {"depthtui.test": "1"}

ANSWER_TESTS = """
import pytest

def test_answer_exists():
    assert open("/home/user/answer.txt").read().strip() != ""

def test_answer_value():
    assert open("/home/user/answer.txt").read().strip() == "42"
"""

PHASE_TESTS = """
import pytest

@pytest.fixture
def bad_setup():
    raise RuntimeError("setup boom")

@pytest.fixture
def bad_teardown():
    yield
    raise RuntimeError("teardown boom")

def test_ok():
    pass

def test_call_fails():
    assert 1 == 2

def test_setup_fails(bad_setup):
    pass

def test_teardown_fails(bad_teardown):
    pass

def test_skipped():
    pytest.skip("not today")

@pytest.mark.xfail(reason="known")
def test_xfail():
    assert False
"""


def spec(image: str, tests, **kw) -> PytestSpec:
    return PytestSpec(image=image, tests=tests, labels=LABELS, **kw)


def outcomes(verdict) -> dict[str, str]:
    return {r.nodeid.split("::")[1]: r.outcome for r in verdict.results}


def test_passing_and_failing_agents(snapshot, write_tests, toolchain):
    tests = write_tests({"test_final_state.py": ANSWER_TESTS})
    good = run_pytest_verifier(spec(snapshot("echo 42 > answer.txt"), tests), toolchain=toolchain)
    assert good.ok and good.complete
    assert (good.tests_passed, good.tests_total) == (2, 2)
    bad = run_pytest_verifier(spec(snapshot("echo 41 > answer.txt"), tests), toolchain=toolchain)
    assert bad.ok and not bad.complete
    assert outcomes(bad) == {"test_answer_exists": "passed", "test_answer_value": "failed"}
    assert "AssertionError" in bad.results[1].message


def test_phases_are_recorded_and_stored(snapshot, write_tests, toolchain, db_path):
    tests = write_tests({"test_phases.py": PHASE_TESTS})
    verdict = run_pytest_verifier(spec(snapshot("true"), tests), toolchain=toolchain)
    assert verdict.ok, verdict.error_detail
    assert outcomes(verdict) == {
        "test_ok": "passed",
        "test_call_fails": "failed",
        "test_setup_fails": "error",
        "test_teardown_fails": "error",
        "test_skipped": "skipped",
        "test_xfail": "skipped",
    }
    phases = {r.nodeid.split("::")[1]: (r.setup, r.call, r.teardown) for r in verdict.results}
    assert phases["test_setup_fails"] == ("failed", None, "passed")
    assert phases["test_teardown_fails"] == ("passed", "passed", "failed")
    assert phases["test_call_fails"] == ("passed", "failed", "passed")
    # The rows go into the store's test_results table as they are.
    with Store(db_path) as store:
        episode = create_episode(
            store, run_key="k", task_id="t", task_hash="h", mode="check", agent="oracle"
        )
        add_test_results(store, episode, [r.row() for r in verdict.results], segment_idx=0)
        rows = list_test_results(store, episode)
    stored = {row["nodeid"].split("::")[1]: row for row in rows}
    assert (stored["test_teardown_fails"]["teardown"], stored["test_ok"]["outcome"]) == (
        "failed",
        "passed",
    )
    assert "setup boom" in stored["test_setup_fails"]["message"]


def test_inventory_rule(snapshot, write_tests, toolchain):
    first = write_tests({"test_final_state.py": ANSWER_TESTS})
    image = snapshot("echo 42 > answer.txt")
    # First validation run: no inventory yet, so it is what ran.
    v1 = run_pytest_verifier(spec(image, first), toolchain=toolchain)
    assert v1.inventory == (
        "test_final_state.py::test_answer_exists",
        "test_final_state.py::test_answer_value",
    )
    # Later the tests change: one inventory test is now skipped, one is gone, one is extra.
    later = write_tests(
        {
            "test_final_state.py": """
                import pytest
                def test_answer_exists():
                    pytest.skip("skipped on purpose")
                def test_extra():
                    assert False
            """
        }
    )
    v2 = run_pytest_verifier(spec(image, later), v1.inventory, toolchain=toolchain)
    assert v2.ok and not v2.complete
    assert (v2.tests_passed, v2.tests_total) == (0, 2)
    assert outcomes(v2) == {
        "test_answer_exists": "skipped",
        "test_answer_value": "missing",
        "test_extra": "failed",
    }
    assert [r.in_inventory for r in v2.results] == [True, True, False]
    # An extra test does not spoil an otherwise complete run.
    extra = write_tests(
        {"test_final_state.py": ANSWER_TESTS + "\ndef test_extra():\n    assert False\n"}
    )
    v3 = run_pytest_verifier(spec(image, extra), v1.inventory, toolchain=toolchain)
    assert v3.complete and v3.tests_total == 2


def test_collection_error_fails_closed(snapshot, write_tests, toolchain):
    tests = write_tests(
        {"test_final_state.py": ANSWER_TESTS, "test_broken.py": "def test_x(:\n    pass\n"}
    )
    verdict = run_pytest_verifier(
        spec(snapshot("echo 42 > answer.txt"), tests), toolchain=toolchain
    )
    assert verdict.error_code == "collection_error"
    assert "test_broken.py" in verdict.error_detail
    assert not verdict.complete


def test_hanging_test_is_stopped_by_the_per_test_timeout(snapshot, write_tests, toolchain):
    tests = write_tests(
        {
            "test_final_state.py": """
                import time
                def test_hangs():
                    time.sleep(600)
                def test_after():
                    pass
            """
        }
    )
    verdict = run_pytest_verifier(
        spec(snapshot("true"), tests, per_test_timeout_s=2), toolchain=toolchain
    )
    assert verdict.ok, verdict.error_detail
    assert outcomes(verdict) == {"test_hangs": "failed", "test_after": "passed"}
    assert "Timeout" in verdict.results[0].message


def test_whole_run_timeout_fails_closed(snapshot, write_tests, toolchain):
    tests = write_tests(
        {
            "test_final_state.py": """
                import signal, time
                def test_blocks_the_alarm():
                    # The per-test timeout uses SIGALRM; blocking it leaves only the whole-run one.
                    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
                    time.sleep(600)
            """
        }
    )
    verdict = run_pytest_verifier(
        spec(snapshot("true"), tests, per_test_timeout_s=1, timeout_s=6), toolchain=toolchain
    )
    assert verdict.error_code == "timeout"
    assert not verdict.complete


def test_tests_that_start_agent_programs_are_graded_with_the_risk_recorded(
    snapshot, write_tests, toolchain
):
    tests = write_tests(
        {
            "test_final_state.py": """
                import subprocess
                def test_script_prints_42():
                    out = subprocess.run(["bash", "/home/user/solve.sh"], capture_output=True)
                    assert out.stdout.strip() == b"42"
            """
        }
    )
    image = snapshot("printf 'echo 42\\n' > solve.sh")
    verdict = run_pytest_verifier(spec(image, tests), toolchain=toolchain)
    # A program runs apart from the signed runner: it cannot forge the record.
    assert verdict.complete and not verdict.forgeable
    assert verdict.risk == (
        "test_final_state.py:4: runs agent-writable code '/home/user/solve.sh' via "
        "subprocess.run()",
    )


def test_tests_that_import_agent_code_are_graded_and_marked_forgeable(
    snapshot, write_tests, toolchain
):
    tests = write_tests(
        {
            "test_final_state.py": """
                import sys
                sys.path.insert(0, "/home/user")
                def test_helper_answers():
                    import helper
                    assert helper.ANSWER == 42
            """
        }
    )
    image = snapshot("printf 'ANSWER = 42\\n' > helper.py")
    verdict = run_pytest_verifier(spec(image, tests), toolchain=toolchain)
    assert verdict.complete and verdict.forgeable
    assert verdict.risk and all("test_final_state.py:" in line for line in verdict.risk)
    why = "imports 'helper' from a folder the tests put on sys.path"
    assert any(why in line for line in verdict.risk)


def test_spec_for_a_task(tmp_path):
    seg = Segment(
        name="main",
        instruction="x",
        tests={"test_final_state.py": tmp_path / "t.py"},
        solution_script=None,
        solution_dir=None,
        verifier_timeout_sec=120.0,
        verifier_env={"MODE": "strict"},
    )
    task = Task(
        id="demo/t1",
        dataset="demo",
        format="depthtui",
        source_path=tmp_path,
        content_hash="h",
        segments=(seg,),
        environment=Environment(context_dir=None, dockerfile=None, image="img"),
        limits=Limits(cpus=1.0, memory_mb=1024, pids=128),
        verifier_kind="pytest",
        workdir="/home/user/work",
    )
    s = spec_for(task, 0, "sha256:abc", per_test_timeout_s=5)
    assert (s.image, s.workdir, s.uid, s.timeout_s, s.per_test_timeout_s) == (
        "sha256:abc",
        "/home/user/work",
        1000,
        120.0,
        5,
    )
    assert s.limits.memory_mb == 1024 and s.env == {"MODE": "strict"}
    with pytest.raises(IndexError):
        spec_for(task, 1, "img")


AGENT_CONFTEST = (
    "printf 'def pytest_collection_modifyitems(items):\\n    items.clear()\\n' > conftest.py; "
    "printf 'def test_b():\\n    pass\\n' > test_b.py"
)


def test_the_tasks_conftest_loads_and_the_agents_does_not(snapshot, write_tests, toolchain):
    # The task's tests/conftest.py gives a fixture (issue 25: once refused, --noconftest). The
    # agent left a conftest.py in its home that would empty the run; the tests are pointed at
    # a file beside it so that pytest walks that folder: the runner must still not load it.
    tests = write_tests(
        {
            "test_a.py": "def test_a(answer):\n    assert answer == 42\n",
            "conftest.py": "import pytest\n\n@pytest.fixture\ndef answer():\n    return 42\n",
        }
    )
    image = snapshot(AGENT_CONFTEST)
    verdict = run_pytest_verifier(
        spec(image, tests, test_paths=("test_a.py", "../home/user/test_b.py")),
        toolchain=toolchain,
    )
    assert verdict.ok and verdict.complete, verdict.error_detail or verdict.output
    assert "test_a" in outcomes(verdict) and outcomes(verdict)["test_a"] == "passed"
    assert "/home/user/conftest.py is not the task's (outside /tests); not loaded" in (
        verdict.output
    )


def test_a_harbor_test_sh_beside_pytest_files_is_not_scanned(snapshot, write_tests, toolchain):
    tests = write_tests(
        {
            "test.sh": "#!/bin/bash\nsource $HOME/.local/bin/env\nbash /home/user/x.sh\n",
            "test_final_state.py": ANSWER_TESTS,
        }
    )
    verdict = run_pytest_verifier(
        spec(snapshot("echo 42 > answer.txt"), tests), toolchain=toolchain
    )
    assert verdict.complete and verdict.risk == ()


def test_docker_trouble_is_a_verdict_not_an_exception(write_tests, toolchain):
    tests = write_tests({"test_final_state.py": ANSWER_TESTS})
    verdict = run_pytest_verifier(
        spec("depthtui-test/no-such-image:never", tests), toolchain=toolchain
    )
    assert (verdict.error_kind, verdict.error_code) == ("verifier", "docker")
    assert "no-such-image" in verdict.error_detail
