"""What a pytest verifier run decided, and the rules that decide it from the runner's record.

Everything here is plain data and pure functions over what came out of the container, so the
fail-closed rules and the inventory rule are tested without Docker.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from engine.verify.runner import EXIT_DUMPABLE, EXIT_USAGE, RECORD_PREFIX, decode_record

# pytest's own exit statuses that mean "the tests ran": all passed, some failed.
PYTEST_RAN = (0, 1)
DETAIL_LIMIT = 2000


@dataclass(frozen=True)
class TestResult:
    """One test's result; the fields are the test_results table's columns."""

    nodeid: str
    outcome: str  # passed | failed | skipped | error | missing
    setup: str | None = None  # passed | failed | skipped | None (phase never reported)
    call: str | None = None
    teardown: str | None = None
    in_inventory: bool = True
    duration_s: float | None = None
    message: str = ""

    __test__ = False  # not a pytest test class

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    def row(self) -> dict:
        """Column values for store's test_results (episode_id and segment_idx are the caller's)."""
        return {
            "nodeid": self.nodeid,
            "outcome": self.outcome,
            "setup": self.setup,
            "call": self.call,
            "teardown": self.teardown,
            "in_inventory": int(self.in_inventory),
            "duration_s": self.duration_s,
            "message": self.message,
        }


@dataclass(frozen=True)
class Verdict:
    """A verifier run's decision. A verdict with error_kind set is never a pass."""

    results: tuple[TestResult, ...]
    tests_passed: int
    tests_total: int
    # The inventory the run was graded against: the frozen one, or on a first validation run
    # (no inventory given) the tests this run executed.
    inventory: tuple[str, ...]
    error_kind: str | None = None  # "verifier" whenever set
    error_code: str | None = None  # short reason: no_record, bad_signature, timeout, ...
    error_detail: str | None = None
    risk: tuple[str, ...] = ()  # evidence that the tests run agent-written code (file:line: what)
    # Agent code ran inside the test process, where it could forge the record: graded anyway
    # (as the task's own harness grades it) and marked so.
    forgeable: bool = False
    output: str = ""  # the tail of what the run printed (stderr), for the user
    toolchain_sha256: str = ""
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    @property
    def complete(self) -> bool:
        """Every inventory test passed and nothing went wrong."""
        return self.ok and self.tests_total > 0 and self.tests_passed == self.tests_total


def failed_closed(
    code: str,
    detail: str,
    *,
    inventory: Sequence[str] = (),
    output: str = "",
    duration_s: float = 0.0,
    risk: Sequence[str] = (),
) -> Verdict:
    """A verifier error: no pass, no counts, the reason."""
    return Verdict(
        results=(),
        tests_passed=0,
        tests_total=0,
        inventory=tuple(inventory),
        error_kind="verifier",
        error_code=code,
        error_detail=f"{code}: {detail}"[:DETAIL_LIMIT],
        risk=tuple(risk),
        output=output,
        duration_s=duration_s,
    )


def phase_outcome(entry: dict | None) -> str:
    """passed = setup passed and call passed and teardown did not fail; a skip (xfail included)
    is never a pass; a test that never reported is missing."""
    if entry is None:
        return "missing"
    setup, call, teardown = entry.get("setup"), entry.get("call"), entry.get("teardown")
    if setup == "failed":
        return "error"
    if "skipped" in (setup, call):
        return "skipped"
    if call == "failed":
        return "failed"
    if teardown == "failed":
        return "error"
    if setup == "passed" and call == "passed":
        return "passed"
    return "error"


def find_record(stdout: bytes, secret: bytes) -> tuple[dict | None, str | None]:
    """The one record signed with `secret` among stdout's lines, or (None, reason code).
    Unsigned or forged lines are ignored; two signed records mean the secret leaked."""
    valid: list[dict] = []
    forged = 0
    for raw in stdout.splitlines():
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith(RECORD_PREFIX):
            continue
        record = decode_record(secret, line)
        if record is None:
            forged += 1
        else:
            valid.append(record)
    if len(valid) == 1:
        return valid[0], None
    if len(valid) > 1:
        return None, "duplicate_record"
    return None, "bad_signature" if forged else "no_record"


def grade(
    record: dict, inventory: Sequence[str] | None
) -> tuple[tuple[TestResult, ...], int, int, tuple[str, ...]]:
    """(results, passed, total, inventory) by the inventory rule: every inventory test must be
    collected and pass; extras are listed but do not count."""
    entries = {t["nodeid"]: t for t in record.get("tests", []) if isinstance(t, dict)}
    inv = tuple(entries) if inventory is None else tuple(dict.fromkeys(inventory))
    results: list[TestResult] = []
    for nodeid in inv:
        entry = entries.get(nodeid)
        results.append(_result(nodeid, entry, in_inventory=True))
    for nodeid, entry in entries.items():
        if nodeid not in inv:
            results.append(_result(nodeid, entry, in_inventory=False))
    passed = sum(1 for r in results if r.in_inventory and r.passed)
    return tuple(results), passed, len(inv), inv


def _result(nodeid: str, entry: dict | None, *, in_inventory: bool) -> TestResult:
    if entry is None:
        return TestResult(
            nodeid, "missing", in_inventory=in_inventory, message="not collected or never ran"
        )
    return TestResult(
        nodeid=nodeid,
        outcome=phase_outcome(entry),
        setup=entry.get("setup"),
        call=entry.get("call"),
        teardown=entry.get("teardown"),
        in_inventory=in_inventory,
        duration_s=float(entry.get("duration") or 0.0),
        message=str(entry.get("message") or ""),
    )


@dataclass(frozen=True)
class RunOutput:
    """What the verifier container produced, as the host saw it."""

    stdout: bytes
    stderr: bytes
    exit_code: int | None
    timed_out: bool = False
    oom_killed: bool = False
    timeout_s: float = 0.0
    duration_s: float = 0.0


def interpret(run: RunOutput, secret: bytes, inventory: Sequence[str] | None) -> Verdict:
    """Fail closed: a pass needs a normal exit, exactly one record signed with this run's secret,
    no collection error, and pytest having run the tests; anything else is a verifier error."""
    tail = _tail(run.stderr)
    common = {"output": tail, "duration_s": run.duration_s}
    if run.timed_out:
        return failed_closed(
            "timeout", f"the whole run exceeded {run.timeout_s:g} s and was killed", **common
        )
    if run.oom_killed:
        # Killed for memory: what the tests read is the agent's state (docs/outcomes.md).
        return failed_closed(
            "out_of_memory",
            f"the verifier was killed for memory (exit {run.exit_code}); {tail[-300:]}",
            **common,
        )
    record, problem = find_record(run.stdout, secret)
    if record is None and run.exit_code in (EXIT_USAGE, EXIT_DUMPABLE):
        # The runner refused to start (no secret, could not protect itself): ours, not the agent's.
        return failed_closed(
            "runner_refused", f"the runner exited {run.exit_code}: {tail[-300:]}", **common
        )
    if record is None:
        why = {
            "no_record": "the runner printed no record",
            "bad_signature": "only records with a wrong signature were printed",
            "duplicate_record": "more than one signed record was printed",
        }[problem or "no_record"]
        return failed_closed(
            problem or "no_record", f"{why} (exit {run.exit_code}); {tail[-300:]}", **common
        )
    if run.exit_code != 0:
        return failed_closed("abnormal_exit", f"the runner exited with {run.exit_code}", **common)
    results, passed, total, inv = grade(record, inventory)
    graded = {**common, "inventory": inv}
    if record.get("internal_error"):
        return failed_closed("runner_error", str(record["internal_error"]), **graded)
    errors = record.get("collect_errors") or []
    # Results stay on these error verdicts for display; an error verdict is still never a pass.
    if errors:
        first = errors[0]
        detail = (
            f"{len(errors)} collection error(s); {first.get('nodeid')}: {first.get('message', '')}"
        )
        verdict = failed_closed("collection_error", detail, **graded)
        return replace(verdict, results=results, tests_passed=passed, tests_total=total)
    status = record.get("exitstatus")
    if status not in PYTEST_RAN:
        meaning = {2: "interrupted", 3: "internal error", 4: "usage error", 5: "no tests collected"}
        detail = f"pytest exit status {status} ({meaning.get(status, 'unknown')})"
        verdict = failed_closed("pytest_exit", detail, **graded)
        return replace(verdict, results=results, tests_passed=passed, tests_total=total)
    if total == 0:
        return failed_closed("empty_inventory", "no inventory test and none executed", **graded)
    return Verdict(results=results, tests_passed=passed, tests_total=total, inventory=inv, **common)


def _tail(data: bytes, limit: int = DETAIL_LIMIT) -> str:
    text = data.decode("utf-8", "replace")
    return text if len(text) <= limit else "[...]" + text[-limit:]
