"""The pytest runner's refusal status is not the agent's to give (issue 24, the audit of point
1): code the tests import runs in the runner's process and can exit with the runner's own
refusal status (`os._exit(2)`), which used to make the agent's failure an infrastructure error
(left out of every rate, tried again). The tests are run once more without the agent."""

from __future__ import annotations

from engine.verify.outcome import blame
from store import vocab

REFUSED = "runner_refused: the runner exited 2: "


def test_a_refusal_the_run_without_the_agent_does_not_repeat_is_the_agents() -> None:
    asked: list[int] = []

    def without_agent() -> str:
        asked.append(1)
        return "collection_error: 1 collection error(s); test_x.py: ModuleNotFoundError: counter"

    kind, detail = blame("verifier", REFUSED, without_agent)
    assert asked == [1]
    assert kind == "verifier_killed" and "starts without the agent" in (detail or "")
    assert vocab.classify(False, kind, detail) == vocab.AGENT_ERROR


def test_a_refusal_without_the_agent_too_is_infrastructure() -> None:
    for why in (REFUSED, "docker: the engine is gone", "toolchain: missing"):
        kind, detail = blame("verifier", REFUSED, lambda why=why: why)
        assert vocab.classify(False, kind, detail) == vocab.INFRA_ERROR, why


def test_a_refusal_nobody_can_recheck_stays_infrastructure() -> None:
    kind, detail = blame("verifier", REFUSED, lambda: None)
    assert vocab.classify(False, kind, detail) == vocab.INFRA_ERROR
    kind, detail = blame("verifier", REFUSED, None)
    assert vocab.classify(False, kind, detail) == vocab.INFRA_ERROR
