"""The names every layer shares: the stated turn caps, the fault families, the job kinds, and the
outcome of a run with who it is blamed on, with the one rule that maps what an episode stored to
its outcome (docs/outcomes.md).

Pure data and functions over stored columns, so the store (back-fill, queries, the synthetic
store), the engine and the front end share them without importing each other. Container labels
are the sandbox's alone (engine/sandbox/labels.py).
"""

from __future__ import annotations

# The turn caps the depth protocol states, smallest first (docs/protocol.md).
CAPS: tuple[int, ...] = (1, 2, 3, 5, 10, 20, 40, 80)
# How a depth is stored when the task passed only above the largest cap, and how it reads.
ABOVE_LARGEST_CAP = 99
ABOVE_LARGEST_CAP_TEXT = ">80"

# Fault families injected on purpose (engine/oracle/faults.py): trained on, and held out.
TRAIN_FAULTS = ("perm_denied", "moved_input")
HELDOUT_FAULTS = ("blocking_fifo",)
FAULT_FAMILIES = (*TRAIN_FAULTS, *HELDOUT_FAULTS)
# The fault family of an episode without a fault (episodes.fault_family), and the selection of it.
NO_FAULT = "clean"

# The job kinds, as stored in jobs.kind and named by their verbs (engine/protocol/registry.py).
JOB_KINDS = ("check", "validate", "free", "ladder", "audit", "episodes", "replay")
# A job's status (jobs.status), and those it never leaves.
JOB_STATUSES = ("queued", "running", "paused", "cancelled", "done", "failed")
FINAL_JOB_STATUSES = ("done", "failed", "cancelled")

PASS = "pass"
FAIL = "fail"
AGENT_ERROR = "agent_error"  # the agent caused it: a failure everywhere; the kind says why
INFRA_ERROR = "infra_error"  # the cause lies outside the episode: left out of rates, retried
TASK_BROKEN = "task_broken"  # the task's own files fail: left out of the model's rates, not retried
OUTCOMES = (PASS, FAIL, AGENT_ERROR, INFRA_ERROR, TASK_BROKEN)

# Outcomes that count in a model's rates (pass@1, safe success, ladder caps, reports).
IN_RATES = frozenset({PASS, FAIL, AGENT_ERROR})
# Outcomes a run is tried again after.
RETRIED = frozenset({INFRA_ERROR})

# Error kinds whose cause is the state the agent left or what its processes did. Other
# engineers' kinds for the agent's own limits belong here too.
AGENT_KINDS = frozenset(
    {
        "storage_limit",  # the agent wrote past the disk limit
        "object_limit",  # the agent created past the limit on new objects
        "verifier_timeout",  # the tests ran out of time on what the agent left (a FIFO, ...)
        "verifier_memory",  # the tests ran out of memory on what the agent left
        "verifier_killed",  # the runner died in the agent's state without a record
        "forged_record",  # a record signed with a wrong key, or two records
        "collection_error",  # the tests do not collect in the agent's state (they do without it)
        "no_reward",  # test.sh wrote no reward in the agent's state
        "no_test_record",  # test.sh's pytest left no record in the agent's state (it did without)
        "setup_after_agent",  # a later segment's setup or healthcheck failed in the agent's state
        "shell_forgery",  # a command forged the shell's end mark (docs/sandbox.md)
        "verifier_output",  # test.sh printed or wrote past its bound on what the agent left
        "snapshot_timeout",  # the commit of the agent's container ran past its data's deadline
        "verifier_unstartable",  # the verifier's container does not start on the agent's state
    }
)
# Error kinds of the task's own files.
TASK_KINDS = frozenset({"task_broken", "plan", "setup", "healthcheck"})
# Verifier error codes (the prefix of error_detail when error_kind is "verifier") decided from
# the task's files: every try meets them again.
TASK_CODES = frozenset(
    {
        "conftest",  # stored by older depthtui: the tests shipped a conftest.py (now loaded)
        "tests_unreadable",
        "agent_code",
        "needs_network",
        "missing_module",
        "no_test_sh",
        "empty_inventory",
        "collection_error",  # kept as "verifier" only when the tests fail without the agent too
        "pytest_exit",
        "no_reward",  # kept as "verifier" only when test.sh writes none without the agent too
        "no_test_record",  # likewise, when its pytest leaves no record without the agent too
    }
)
# Verifier codes whose cause is the agent's state, and the agent kind each becomes.
AGENT_CODES = {
    "timeout": "verifier_timeout",
    "out_of_memory": "verifier_memory",
    "no_record": "verifier_killed",
    "abnormal_exit": "verifier_killed",
    "bad_signature": "forged_record",
    "duplicate_record": "forged_record",
    "output_flood": "verifier_output",
}


def verifier_code(error_detail: str | None) -> str:
    """The short code a verifier error's detail starts with ("timeout: ..." -> "timeout")."""
    return (error_detail or "").split(":", 1)[0].strip()


def classify(passed: bool | int | None, error_kind: str | None, error_detail: str | None) -> str:
    """The outcome of a finished run from what it stored. Unknown error kinds are
    infrastructure: an error is the agent's only where a rule above says so."""
    if error_kind is None:
        return PASS if passed else FAIL
    if error_kind in AGENT_KINDS:
        return AGENT_ERROR
    if error_kind in TASK_KINDS:
        return TASK_BROKEN
    if error_kind == "verifier" and verifier_code(error_detail) in TASK_CODES:
        return TASK_BROKEN
    return INFRA_ERROR


def in_rates(outcome: str | None) -> bool:
    """Whether a run counts in the model's rates."""
    return outcome in IN_RATES


def passed(outcome: str | None) -> bool:
    return outcome == PASS


def replay_agrees(replay: str | None, original: str | None) -> bool | None:
    """Whether a replay's verdict agrees with its original's: both pass, or neither does. None
    when the replay says nothing about the verdict (it did not count: infrastructure, a broken
    task, or it is not done)."""
    if not in_rates(replay):
        return None
    return (replay == PASS) == (original == PASS)


def label(outcome: str | None, error_kind: str | None = None) -> str:
    """How a person reads an outcome: 'pass', 'fail', 'agent error (verifier_timeout)', ..."""
    if outcome is None:
        return "-"
    text = outcome.replace("_", " ")
    return f"{text} ({error_kind})" if error_kind and outcome not in (PASS, FAIL) else text


# The discrimination audit's mutations (engine/verify/mutations.py) and the recovery bench's
# names for them: m1-m3 must fail where they apply, m4 is reported only.
MUTATION_CODES = {
    "empty": "m1",
    "drop_last_line": "m2",
    "bump_first_digit": "m3",
    "duplicate_first_line": "m4",
}
