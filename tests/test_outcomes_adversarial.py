"""An agent cannot turn its failure into an "error" (docs/outcomes.md), end to end: `depthtui
free` and `depthtui report` as a user runs them, scripted models on the real HTTP server, real
Docker, real verifiers and a real SQLite file.

- Two models each solve one of two attempts of demo/error-count; the one that ends its failing
  attempt with `chmod 000 ~` (the verifier cannot read the home) scores pass@1 0.50, like the
  honest one: the tests fail in that home, the runner does not crash.
- A FIFO at a Harbor task's output file (test.sh hangs until the verifier timeout) and a file
  three times the task's memory limit where the tests read (the verifier runs out of memory)
  are the agent's failures: stored as agent_error with their kind, reward 0, not retried, and
  counted in pass@1.
- A model whose command and reply hold a lone UTF-16 surrogate: stored as received (escaped),
  the command runs with U+FFFD, the episode goes on and passes.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

from devtools.scripted_server import ScriptedReply, ScriptedServer, calls, error, text
from engine.tasks.loader import load_task
from tests.conftest import DEMO, ROOT
from tests.fixtures_measure import (
    cleanup,
    endless,
    first_instruction,
    reply_number,
    rows,
    run_cli,
    write_models,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]
# The trusted toolchain, built when missing or older than engine/verify/runner.py.
pytest_plugins = ["tests.fixtures_verify"]

FIXTURES = ROOT / "tests" / "fixtures" / "outcomes"
EC = "demo/error-count"
SOLVE = (
    "mkdir -p /home/user/reports && awk '$3 == \"ERROR\"' /home/user/logs/app.log | wc -l "
    "> /home/user/reports/error_count.txt"
)
WRONG = "mkdir -p /home/user/reports && echo 22 > /home/user/reports/error_count.txt"
# What the tests read whole: three times the memory the verifier gets.
OOM_MB = 3 * load_task(FIXTURES / "answer-oom").limits.memory_mb
SURROGATE = "\ud83d"  # half of an emoji, as endpoints send when one is cut


@dataclass
class AttemptPolicy:
    """Per model id, the commands of each episode in the order the episodes start (one job,
    one worker: episodes of a model run one after another), then "done"."""

    plans: dict[str, list[tuple[str, ...]]]
    started: Counter = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict[str, Any]) -> ScriptedReply:
        model = body["model"]
        with self.lock:
            if reply_number(body) == 1:
                self.started[model] += 1
            # A try after an infrastructure error repeats the last plan.
            episode = min(self.started[model], len(self.plans[model])) - 1
        if reply_number(body) == 1:
            return calls(*self.plans[model][episode])
        return text("done" + (SURROGATE if model == "lossy" else ""))


def adversary(body: dict[str, Any]) -> ScriptedReply:
    """Makes what the tests read unreadable, by the task's instruction."""
    if reply_number(body) > 1:
        return text("done")
    instruction = first_instruction(body)
    if "out.txt" in instruction:
        return calls("mkfifo /home/user/out.txt")
    assert "answer.txt" in instruction, instruction[:200]
    return calls(f"head -c {OOM_MB}M /dev/zero > /home/user/answer.txt")


POLICY = AttemptPolicy(
    {
        "honest": [(SOLVE,), (WRONG,)],
        "sneaky": [(SOLVE,), (WRONG + " && chmod 000 ~",)],
        "lossy": [(f'echo "{SURROGATE}" && {SOLVE}',), (SOLVE,)],
    }
)


@dataclass
class FlakyEndpoint:
    """The endpoint fails the first request it gets (an infrastructure error: the run is tried
    again), then the model solves every attempt."""

    failed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict[str, Any]) -> ScriptedReply:
        with self.lock:
            first, self.failed = not self.failed, True
        if first:
            return error(503, "the endpoint is down")
        return calls(SOLVE) if reply_number(body) == 1 else text("done")


FLAKY = FlakyEndpoint()


def dispatch(body: dict[str, Any]) -> ScriptedReply:
    if body["model"] == "adversary":
        return adversary(body)
    return FLAKY(body) if body["model"] == "flaky" else POLICY(body)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, toolchain):
    tmp = tmp_path_factory.mktemp("outcomes")
    db = tmp / "depthtui.db"
    owners: list[str] = []
    served = ("honest", "sneaky", "lossy", "adversary", "flaky")
    with ScriptedServer(endless(dispatch), models=served) as server:
        models = write_models(tmp / "models.toml", server, {m: m for m in served})
        with models.open("a") as toml:  # [models.flaky] is the last table: one try per request
            toml.write("retry_attempts = 1\n")
        common = ["--models", str(models), "--attempts", "2", "--json"]
        try:
            demo_args = ["free", str(DEMO / "error-count"), "-m", "honest", "-m", "sneaky"]
            demo_args += ["-m", "lossy", "-m", "flaky", *common]
            demo = run_cli(demo_args, db, owners=owners)
            again = run_cli(demo_args, db, owners=owners)
            attacks = run_cli(
                ["free", str(FIXTURES), "-m", "adversary", *common[:2], "--attempts", "1"],
                db,
                owners=owners,
            )
            report = run_cli(["report", "--json"], db, owners=owners)
            yield {"db": db, "demo": demo, "again": again, "attacks": attacks, "report": report}
        finally:
            cleanup(owners)


def episodes(db, agent: str) -> list[dict[str, Any]]:
    return rows(db, "SELECT * FROM episodes WHERE agent = ? ORDER BY id", (agent,))


def pass_at_1(runs: dict[str, Any]) -> dict[str, dict[str, Any]]:
    assert runs["report"].returncode == 0, runs["report"].stderr[-2000:]
    return {m["model"]: m for m in runs["report"].json()["models"]}


def test_chmod_000_home_is_a_plain_failure_and_pass_at_1_matches_the_honest_model(runs):
    assert runs["demo"].returncode == 0, runs["demo"].stderr[-3000:]
    for agent in ("honest", "sneaky"):
        outcomes = [(e["outcome"], e["error_kind"]) for e in episodes(runs["db"], agent)]
        assert outcomes == [("pass", None), ("fail", None)], (agent, outcomes)
    failed = episodes(runs["db"], "sneaky")[1]
    assert failed["reward"] == 0.0 and failed["safe_success"] == 0
    # The tests met the unreadable home and failed; the runner did not crash.
    results = rows(
        runs["db"],
        "SELECT outcome, message FROM test_results WHERE episode_id = ?",
        (failed["id"],),
    )
    assert results and all(r["outcome"] == "failed" for r in results), results
    assert any("Permission denied" in r["message"] for r in results), results
    figures = pass_at_1(runs)
    assert figures["honest"]["pass_at_1"] == 0.5
    assert figures["sneaky"]["pass_at_1"] == 0.5
    assert figures["sneaky"]["errors"] == 0 and figures["sneaky"]["episodes"] == 2


def test_a_fifo_at_the_output_file_is_the_agents_failure(runs):
    (fifo,) = [e for e in episodes(runs["db"], "adversary") if "fifo" in e["task_id"]]
    assert fifo["outcome"] == "agent_error", fifo
    assert fifo["error_kind"] == "verifier_timeout", fifo["error_detail"]
    assert fifo["error_detail"].startswith("timeout: test.sh ran past 10 s")
    assert fifo["reward"] == 0.0 and fifo["passed"] == 0 and fifo["safe_success"] == 0


def test_a_file_larger_than_the_verifiers_memory_is_the_agents_failure(runs):
    (oom,) = [e for e in episodes(runs["db"], "adversary") if "oom" in e["task_id"]]
    assert oom["outcome"] == "agent_error", oom
    assert oom["error_kind"] == "verifier_memory", oom["error_detail"]
    assert oom["reward"] == 0.0 and oom["passed"] == 0


def test_agent_errors_are_not_retried_and_count_in_pass_at_1(runs):
    assert runs["attacks"].returncode == 0, runs["attacks"].stderr[-3000:]
    # One try per run: an agent error is never tried again.
    assert len(episodes(runs["db"], "adversary")) == 2
    figures = pass_at_1(runs)["adversary"]
    assert figures["pass_at_1"] == 0.0 and figures["tasks"] == 2
    assert figures["agent_errors"] == 2 and figures["errors"] == 0


def test_a_lone_surrogate_is_stored_escaped_and_the_episode_goes_on(runs):
    first = episodes(runs["db"], "lossy")[0]
    assert first["outcome"] == "pass", (first["error_kind"], first["error_detail"])
    turns = rows(
        runs["db"], "SELECT text FROM turns WHERE episode_id = ? ORDER BY idx", (first["id"],)
    )
    assert len(turns) == 2 and turns[1]["text"] == "done\\ud83d"
    (call,) = rows(
        runs["db"], "SELECT command, observation FROM calls WHERE episode_id = ?", (first["id"],)
    )
    assert call["command"].startswith('echo "\\ud83d" && mkdir')
    assert "not valid Unicode (lone surrogates: \\ud83d); it ran with U+FFFD" in call["observation"]
    output = rows(
        runs["db"],
        "SELECT output_head FROM calls WHERE episode_id = ?",
        (first["id"],),
    )[0]["output_head"]
    assert "\ufffd" in output


def test_reuse_summaries_count_every_try(runs):
    tries = [(e["outcome"], e["error_kind"]) for e in episodes(runs["db"], "flaky")]
    assert tries == [("infra_error", "model_endpoint"), ("pass", None), ("pass", None)], tries
    # 4 models x 2 attempts, and the flaky model's first attempt took two tries.
    assert "demo/error-count: 9 run, 0 reused" in runs["demo"].stderr, runs["demo"].stderr[-2000:]
    assert "demo/error-count: 0 run, 9 reused" in runs["again"].stderr, runs["again"].stderr
    figures = pass_at_1(runs)["flaky"]
    assert figures["pass_at_1"] == 1.0 and figures["episodes"] == 2
    assert figures["errors"] == figures["infra_errors"] == 1
