"""The outcome rule (store/vocab.py, docs/outcomes.md) as plain functions: which stored errors
are the agent's, infrastructure's or the task's; the back-fill of rows stored before the outcome
column; who a verifier error is blamed on; lossless text that is not valid Unicode."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.agents import unicode
from engine.verify.outcome import blame
from engine.verify.verdict import RunOutput, interpret
from store import episodes as ep
from store import vocab
from store.db import Store, migrate_to
from store.schema import MIGRATIONS, V3_OUTCOMES

CASES = [
    # (passed, error_kind, error_detail) -> outcome
    ((1, None, None), "pass"),
    ((0, None, None), "fail"),
    ((0, "verifier_timeout", "timeout: test.sh ran past 10 s"), "agent_error"),
    ((0, "verifier_memory", "out_of_memory: killed"), "agent_error"),
    ((0, "storage_limit", "the home grew past 100 MB"), "agent_error"),
    ((0, "model_endpoint", "HTTP 503"), "infra_error"),
    ((0, "build", "building the image failed"), "infra_error"),
    ((0, "harness", "KeyError: 'x'"), "infra_error"),
    ((0, "verifier", "runner_error: PermissionError"), "infra_error"),  # our runner's bug
    ((0, "verifier", "docker: engine gone"), "infra_error"),
    ((0, "verifier", "needs_network: test.sh line 9"), "task_broken"),
    ((0, "verifier", "collection_error: NameError [both]"), "task_broken"),
    ((0, "plan", "no input can take the fault"), "task_broken"),
    ((0, "a_kind_nobody_knows", ""), "infra_error"),
]


@pytest.mark.parametrize(("stored", "expected"), CASES)
def test_classify(stored, expected) -> None:
    assert vocab.classify(*stored) == expected


def test_which_outcomes_count_and_which_are_retried() -> None:
    assert [o for o in vocab.OUTCOMES if vocab.in_rates(o)] == ["pass", "fail", "agent_error"]
    assert sorted(vocab.RETRIED) == ["infra_error"]
    assert vocab.label("agent_error", "verifier_timeout") == "agent error (verifier_timeout)"


def test_old_rows_are_back_filled_by_the_same_rule(tmp_path: Path) -> None:
    old = Store(tmp_path / "old.db", migrate=False)
    v3 = MIGRATIONS.index(V3_OUTCOMES) + 1
    migrate_to(old, v3 - 1)
    ids = []
    for n, ((passed, kind, detail), _) in enumerate(CASES):
        eid = ep.create_episode(
            old, run_key=f"k{n}", task_id="t", task_hash="h", mode="free", agent="m"
        )
        ep.finish_episode(old, eid, passed=passed, error_kind=kind, error_detail=detail)
        ids.append(eid)
    running = ep.create_episode(
        old, run_key="running", task_id="t", task_hash="h", mode="free", agent="m"
    )
    old.close()
    with Store(tmp_path / "old.db") as store:
        got = [ep.get_episode(store, eid)["outcome"] for eid in ids]
        assert got == [expected for _, expected in CASES]
        assert ep.get_episode(store, running)["outcome"] is None


def test_a_writer_that_names_no_outcome_gets_the_rules(tmp_path: Path) -> None:
    with Store(tmp_path / "new.db") as store:
        eid = ep.create_episode(
            store, run_key="k", task_id="t", task_hash="h", mode="free", agent="m"
        )
        ep.finish_episode(store, eid, passed=0, error_kind="verifier_timeout")
        assert ep.get_episode(store, eid)["outcome"] == "agent_error"


def test_blame_moves_agent_caused_verifier_errors_to_the_agent() -> None:
    assert blame("verifier", "timeout: ran past 10 s") == (
        "verifier_timeout",
        "timeout: ran past 10 s",
    )
    assert blame("verifier", "out_of_memory: x")[0] == "verifier_memory"
    assert blame("verifier", "no_record: the runner printed no record")[0] == "verifier_killed"
    assert blame("verifier", "bad_signature: forged")[0] == "forged_record"
    # Our own faults and the task's files stay where they are.
    assert blame("verifier", "runner_error: boom")[0] == "verifier"
    assert blame("verifier", "needs_network: line 9")[0] == "verifier"
    assert blame("model_endpoint", "HTTP 503") == ("model_endpoint", "HTTP 503")


def test_blame_runs_the_tests_without_the_agent_to_tell_a_broken_task() -> None:
    err = "collection_error: 1 collection error(s); test_x.py: NameError: name 'X'"
    # The same failure without the agent: the task's own files.
    kind, detail = blame("verifier", err, lambda: err)
    assert kind == "verifier" and vocab.classify(0, kind, detail) == "task_broken"
    # They collect without the agent: the agent's state broke them.
    assert blame("verifier", err, lambda: "") == ("collection_error", err)
    # Without the agent only the module the agent was to write is missing: the agent's failure.
    missing = "collection_error: ImportError while importing test module; ModuleNotFoundError"
    assert blame("verifier", err, lambda: missing)[0] == "collection_error"
    # test.sh writes no reward without the agent either: the task's; else the agent's.
    no_reward = "no_reward: neither reward.json nor reward.txt was written"
    assert vocab.classify(0, *blame("verifier", no_reward, lambda: no_reward)) == "task_broken"
    assert blame("verifier", no_reward, lambda: "")[0] == "no_reward"
    # The run without the agent could not be made: infrastructure.
    kind, _ = blame("verifier", err, lambda: "docker: no engine")
    assert vocab.classify(0, kind, "") == "infra_error"


def test_lone_surrogates_are_escaped_for_the_record_and_replaced_to_run() -> None:
    received = 'echo "\ud83d" \udc00'
    assert unicode.escaped(received) == 'echo "\\ud83d" \\udc00'
    assert unicode.escaped(received).encode("utf-8")  # storable
    command, note = unicode.runnable(received)
    assert command == 'echo "\ufffd" \ufffd' and "\\ud83d, \\udc00" in note
    assert unicode.runnable("echo ok") == ("echo ok", "")
    doc = unicode.escaped_json({"a\ud83d": ["x\udfff", 1, None]})
    assert doc == {"a\\ud83d": ["x\\udfff", 1, None]}


def test_the_validate_table_gives_each_unusable_familys_reason() -> None:
    from depthtui.commands.show import _families_cell

    why = {"moved_input": "no input file named in the instruction can take this fault"}
    cell = _families_cell({"fault_families": ["perm_denied"], "families_detail": why})
    assert cell.splitlines() == [
        "perm_denied",
        "[dim]moved_input: no input file named in the instruction can take this fault[/]",
    ]
    assert _families_cell({"fault_families": [], "families_detail": {}}) == "[dim]none[/]"


@pytest.mark.parametrize(
    ("run", "code", "whose"),
    [
        # Killed for memory, whether or not a record made it out: the agent's state.
        (RunOutput(b"", b"Killed", 137, oom_killed=True), "out_of_memory", "agent_error"),
        # Died without a record in the agent's state.
        (RunOutput(b"", b"", 137), "no_record", "agent_error"),
        # Refused to start (no secret, could not protect itself): ours.
        (RunOutput(b"", b"no valid secret on stdin", 2), "runner_refused", "infra_error"),
        (
            RunOutput(b"", b"could not make the runner non-dumpable", 3),
            "runner_refused",
            "infra_error",
        ),
    ],
)
def test_verifier_runs_that_give_no_verdict_are_blamed_by_their_cause(run, code, whose) -> None:
    verdict = interpret(run, b"k" * 32, None)
    assert verdict.error_code == code
    kind, detail = blame(verdict.error_kind, verdict.error_detail)
    assert vocab.classify(0, kind, detail) == whose
