"""The host's fail-closed rules and the inventory rule, over runner records made with the real
record format (no container: the boundary faked here is only "what the container printed")."""

from __future__ import annotations

import pytest

from engine.verify.runner import RECORD_PREFIX, Collector, decode_record, encode_record
from engine.verify.verdict import RunOutput, find_record, interpret, phase_outcome

SECRET = bytes(range(32))
OTHER = b"\xff" * 32


def entry(nodeid: str, setup="passed", call="passed", teardown="passed", message="") -> dict:
    return {
        "nodeid": nodeid,
        "setup": setup,
        "call": call,
        "teardown": teardown,
        "duration": 0.01,
        "message": message,
    }


def record(*tests: dict, exitstatus: int = 0, collect_errors=(), internal_error=None) -> dict:
    return {
        "v": 1,
        "exitstatus": exitstatus,
        "collected": [t["nodeid"] for t in tests],
        "collect_errors": list(collect_errors),
        "tests": list(tests),
        "internal_error": internal_error,
        "dumpable": 0,
    }


def out(*lines: str, exit_code: int | None = 0, **kw) -> RunOutput:
    return RunOutput(
        stdout="".join(f"{line}\n" for line in lines).encode(),
        stderr=b"pytest said things\n",
        exit_code=exit_code,
        **kw,
    )


def test_record_round_trip_and_forgery():
    line = encode_record(SECRET, {"a": 1})
    assert line.startswith(RECORD_PREFIX)
    assert decode_record(SECRET, line) == {"a": 1}
    assert decode_record(OTHER, line) is None
    payload, mac = line[len(RECORD_PREFIX) :].split(" ")
    tampered = RECORD_PREFIX + payload[:-4] + "AAA=" + " " + mac
    assert decode_record(SECRET, tampered) is None
    assert decode_record(SECRET, "DEPTHTUI-VERDICT-V1 garbage") is None


@pytest.mark.parametrize(
    ("phases", "expected"),
    [
        (("passed", "passed", "passed"), "passed"),
        (("passed", "passed", None), "passed"),
        (("passed", "failed", "passed"), "failed"),
        (("failed", None, "passed"), "error"),
        (("passed", "passed", "failed"), "error"),
        (("skipped", None, "passed"), "skipped"),
        (("passed", "skipped", "passed"), "skipped"),
        (("passed", None, "passed"), "error"),
    ],
)
def test_phase_outcome(phases, expected):
    setup, call, teardown = phases
    assert phase_outcome({"setup": setup, "call": call, "teardown": teardown}) == expected
    assert phase_outcome(None) == "missing"


def test_all_pass_is_complete():
    rec = record(entry("t.py::a"), entry("t.py::b"))
    v = interpret(out(encode_record(SECRET, rec)), SECRET, ["t.py::a", "t.py::b"])
    assert v.ok and v.complete
    assert (v.tests_passed, v.tests_total) == (2, 2)
    assert [r.outcome for r in v.results] == ["passed", "passed"]


def test_inventory_rule_missing_skipped_and_extras():
    rec = record(
        entry("t.py::a"),
        entry("t.py::b", call="skipped", message="call: skip"),
        entry("t.py::extra", call="failed"),
    )
    v = interpret(out(encode_record(SECRET, rec)), SECRET, ["t.py::a", "t.py::b", "t.py::gone"])
    assert v.ok and not v.complete
    assert (v.tests_passed, v.tests_total) == (1, 3)
    by_id = {r.nodeid: r for r in v.results}
    assert by_id["t.py::b"].outcome == "skipped"
    assert by_id["t.py::gone"].outcome == "missing"
    # The failing extra is listed but neither counted nor able to fail the run.
    assert by_id["t.py::extra"].in_inventory is False
    assert by_id["t.py::extra"].outcome == "failed"
    assert by_id["t.py::gone"].row()["in_inventory"] == 1


def test_first_run_inventory_is_what_ran():
    rec = record(entry("t.py::a"), entry("t.py::b", teardown="failed"))
    v = interpret(out(encode_record(SECRET, rec)), SECRET, None)
    assert v.inventory == ("t.py::a", "t.py::b")
    assert (v.tests_passed, v.tests_total) == (1, 2)
    assert v.results[1].outcome == "error"


def test_unsigned_lines_are_ignored():
    good = encode_record(SECRET, record(entry("t.py::a", call="failed")))
    forged = encode_record(OTHER, record(entry("t.py::a")))
    v = interpret(out("noise", forged, good, "PASSED everything"), SECRET, ["t.py::a"])
    assert v.ok and v.tests_passed == 0


@pytest.mark.parametrize(
    ("run", "code"),
    [
        (out("no record here"), "no_record"),
        (out(encode_record(OTHER, record(entry("t.py::a")))), "bad_signature"),
        (
            out(
                encode_record(SECRET, record(entry("t.py::a"))),
                encode_record(SECRET, record(entry("t.py::a"))),
            ),
            "duplicate_record",
        ),
        (out(encode_record(SECRET, record(entry("t.py::a"))), exit_code=137), "abnormal_exit"),
        (out(encode_record(SECRET, record(entry("t.py::a"))), timed_out=True), "timeout"),
        (
            out(encode_record(SECRET, record(entry("t.py::a"), internal_error="boom"))),
            "runner_error",
        ),
        (
            out(
                encode_record(
                    SECRET,
                    record(
                        entry("t.py::a"),
                        exitstatus=2,
                        collect_errors=[{"nodeid": "u.py", "message": "SyntaxError"}],
                    ),
                )
            ),
            "collection_error",
        ),
        (out(encode_record(SECRET, record(entry("t.py::a"), exitstatus=3))), "pytest_exit"),
        (out(encode_record(SECRET, record(exitstatus=5))), "pytest_exit"),
    ],
)
def test_fails_closed(run, code):
    v = interpret(run, SECRET, ["t.py::a"])
    assert v.error_kind == "verifier"
    assert v.error_code == code
    assert v.error_detail.startswith(code)
    assert not v.complete


def test_collection_error_keeps_results_for_display():
    rec = record(
        entry("t.py::a"), exitstatus=2, collect_errors=[{"nodeid": "u.py", "message": "x"}]
    )
    v = interpret(out(encode_record(SECRET, rec)), SECRET, ["t.py::a"])
    assert v.error_code == "collection_error"
    assert v.tests_passed == 1 and not v.complete


def test_find_record_reasons():
    assert find_record(b"", SECRET) == (None, "no_record")


def test_collector_records_phases():
    class Report:
        def __init__(self, when, outcome, longrepr=None):
            self.nodeid, self.when, self.outcome = "t.py::a", when, outcome
            self.duration, self.longrepr = 0.5, longrepr
            self.failed, self.skipped = outcome == "failed", outcome == "skipped"

    c = Collector()
    c.pytest_runtest_logreport(Report("setup", "passed"))
    c.pytest_runtest_logreport(Report("call", "skipped", ("t.py", 3, "Skipped: why")))
    c.pytest_runtest_logreport(Report("teardown", "passed"))
    assert c.tests["t.py::a"]["call"] == "skipped"
    assert c.tests["t.py::a"]["message"] == "call: Skipped: why"
    assert c.tests["t.py::a"]["duration"] == 1.5
