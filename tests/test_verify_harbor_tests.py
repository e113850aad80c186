"""Per-test results from Harbor test.sh tasks (docs/verifier-tests.md), on real snapshots: the
trusted pytest that the offline rewrite puts in test.sh records every test's phases, the task's
own `--ctrf` report is still written, the inventory rule applies, a test.sh with no pytest keeps
the reward file's verdict, and a reward with no test behind it is not a pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.verify.harbor_verifier import (
    HarborSpec,
    merge_records,
    run_harbor_verifier,
    runs_pytest,
)

pytest_plugins = ["tests.fixtures_verify"]

pytestmark = pytest.mark.docker

LABELS = {"depthtui.test": "1"}
FIXTURES = Path(__file__).parent / "fixtures" / "terminal-bench"
WORD_STATS = FIXTURES / "word-stats" / "tests"
# What the ctrf report says, printed by test.sh itself into test-stdout.txt.
SHOW_CTRF = (
    "\ngrep -o '\"passed\": [0-9]*' /logs/verifier/ctrf.json | head -n1 | sed 's/^/CTRF /'\n"
)


def spec(image: str, tests, **kw) -> HarborSpec:
    return HarborSpec(image=image, tests=tests, workdir="/app", labels=LABELS, **kw)


@pytest.fixture
def answer(snapshot):
    """answer(json text) -> a snapshot whose /app/stats.json holds it."""

    def make(text: str) -> str:
        return snapshot(
            f"cat > /app/stats.json <<'EOF'\n{text}\nEOF\n",
            root_script="mkdir -p /app && chown 1000:1000 /app",
        )

    return make


def word_stats_tests(write_tests, extra: str = "") -> dict[str, Path]:
    return write_tests(
        {
            "test.sh": (WORD_STATS / "test.sh").read_text() + extra,
            "test_outputs.py": (WORD_STATS / "test_outputs.py").read_text(),
        }
    )


def test_terminal_bench_test_sh_records_every_test(answer, write_tests, toolchain):
    tests = word_stats_tests(write_tests, SHOW_CTRF)
    assert runs_pytest(tests)
    # Two of seven wrong: the reward file says 0, the tests say 5 of 7.
    wrong = '{"lines": 3, "words": 11, "unique": 9, "longest": "jumps", "top": "the"}'
    v = run_harbor_verifier(spec(answer(wrong), tests), toolchain=toolchain)
    assert v.ok, (v.error_detail, v.output)
    assert v.rewards == {"reward": 0.0} and not v.passed
    assert v.per_test and (v.tests_passed, v.tests_total) == (5, 7)
    by_id = {r.nodeid: r for r in v.results}
    assert sorted(by_id) == sorted(f"test_outputs.py::{n}" for n in SEVEN)
    assert by_id["test_outputs.py::test_words"].outcome == "failed"
    assert "11" in by_id["test_outputs.py::test_words"].message
    assert by_id["test_outputs.py::test_longest"].outcome == "failed"
    assert by_id["test_outputs.py::test_lines"].outcome == "passed"
    assert by_id["test_outputs.py::test_lines"].call == "passed"
    # The task's own --ctrf report was written by the toolchain's pytest-json-ctrf.
    assert 'CTRF "passed": 5' in v.output

    right = '{"lines": 3, "words": 12, "unique": 9, "longest": "sleeps", "top": "the"}'
    good = run_harbor_verifier(spec(answer(right), tests), toolchain=toolchain)
    assert good.ok and good.passed and (good.tests_passed, good.tests_total) == (7, 7)


SEVEN = (
    "test_file_exists",
    "test_is_an_object",
    "test_lines",
    "test_words",
    "test_unique",
    "test_longest",
    "test_top",
)


def test_frozen_inventory_counts_a_test_that_did_not_run(answer, write_tests, toolchain):
    tests = word_stats_tests(write_tests)
    inventory = [f"test_outputs.py::{n}" for n in SEVEN] + ["test_outputs.py::test_gone"]
    right = '{"lines": 3, "words": 12, "unique": 9, "longest": "sleeps", "top": "the"}'
    v = run_harbor_verifier(spec(answer(right), tests), inventory, toolchain=toolchain)
    assert v.ok and v.passed  # the reward file's verdict
    assert (v.tests_passed, v.tests_total) == (7, 8)
    gone = [r for r in v.results if r.nodeid.endswith("test_gone")]
    assert [r.outcome for r in gone] == ["missing"]


def test_two_pytest_runs_and_the_pip_preamble(answer, write_tests, toolchain):
    tests = write_tests(
        {
            "test.sh": """\
                #!/bin/bash
                pip install pytest==8.4.1 pytest-json-ctrf==0.3.5
                mkdir -p /logs/verifier
                pytest /tests/test_a.py -rA && python3 -m pytest /tests/test_b.py -rA
                if [ $? -eq 0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
                """,
            "test_a.py": "def test_a1():\n    assert True\n\ndef test_a2():\n    assert True\n",
            "test_b.py": "def test_b1():\n    assert open('/app/stats.json').read()\n",
        }
    )
    v = run_harbor_verifier(spec(answer("{}"), tests), toolchain=toolchain)
    assert v.ok and v.passed, (v.error_detail, v.output)
    assert sorted(r.nodeid for r in v.results) == [
        "test_a.py::test_a1",
        "test_a.py::test_a2",
        "test_b.py::test_b1",
    ]
    assert (v.tests_passed, v.tests_total) == (3, 3)


def test_a_test_sh_without_pytest_keeps_the_reward_verdict(answer, write_tests, toolchain):
    tests = write_tests(
        {
            "test.sh": """\
                #!/bin/bash
                if grep -q sleeps /app/stats.json; then echo 1; else echo 0; fi \\
                    > /logs/verifier/reward.txt
                """
        }
    )
    assert not runs_pytest(tests)
    v = run_harbor_verifier(spec(answer('{"longest": "sleeps"}'), tests), toolchain=toolchain)
    assert v.ok and v.passed
    assert not v.per_test and v.results == ()


def test_a_reward_no_test_stands_behind_is_a_verifier_error(answer, write_tests, toolchain):
    # test.sh writes a passing reward and stops before its pytest line.
    tests = write_tests(
        {
            "test.sh": """\
                #!/bin/bash
                echo 1 > /logs/verifier/reward.txt
                [ -f /app/stats.json ] && exit 0
                pytest /tests/test_outputs.py
                """,
            "test_outputs.py": "def test_x():\n    assert False\n",
        }
    )
    v = run_harbor_verifier(spec(answer("{}"), tests), toolchain=toolchain)
    assert (v.error_kind, v.error_code, v.passed) == ("verifier", "no_test_record", False)
    assert "no pytest run left a record" in (v.error_detail or "")


def test_merge_records_keeps_each_tests_last_run():
    first = {"tests": [{"nodeid": "t.py::a", "call": "failed"}, {"nodeid": "t.py::b"}]}
    second = {"tests": [{"nodeid": "t.py::a", "call": "passed"}], "collect_errors": [{"x": 1}]}
    merged = merge_records([first, second])
    assert {t["nodeid"]: t.get("call") for t in merged["tests"]} == {
        "t.py::a": "passed",
        "t.py::b": None,
    }
    assert merged["collect_errors"] == [{"x": 1}]
