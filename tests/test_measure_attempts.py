"""Independent attempts (docs/attempts.md) end to end: `depthtui free` against the real scripted
HTTP server on loopback, real Docker and a real SQLite file. With a base seed configured each
attempt sends its own seed, derived from the base seed, the task, the cap and the attempt (every
request of one run the same; a rerun in a fresh store sends the same again); a temperature-0
model is warned about at launch, and the report counts the attempts whose transcripts came out
identical (the scripted policy answers the same way every time)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devtools.scripted_server import ScriptedServer
from engine.agents.registry import run_seed
from tests.conftest import DEMO
from tests.fixtures_measure import BatchingPolicy, cleanup, endless, rows, run_cli

pytestmark = pytest.mark.docker

TASK = "demo/error-count"
POLICY = BatchingPolicy(
    look="ls -la /home/user/logs",
    work={
        "app.log": (
            "mkdir -p /home/user/reports && awk '$3 == \"ERROR\"' /home/user/logs/app.log "
            "| wc -l > /home/user/reports/error_count.txt",
        )
    },
    batch_at_most={},
)


def _models(path: Path, server: ScriptedServer) -> Path:
    path.write_text(
        f'[models.greedy]\nbase_url = "{server.base_url}"\nmodel = "{server.model}"\n'
        "[models.greedy.sampling]\ntemperature = 0\nseed = 7\n"
    )
    return path


def _seeds(server: ScriptedServer, since: int) -> list[int | None]:
    return [r.body.get("seed") for r in server.chat_requests[since:]]


def test_attempts_send_their_own_seeds_and_repeats_are_counted(tmp_path: Path) -> None:
    owners: list[str] = []
    with ScriptedServer(endless(POLICY)) as server:
        models = _models(tmp_path / "models.toml", server)
        args = ["free", str(DEMO / "error-count"), "-m", "greedy", "--attempts", "2"]
        try:
            first = run_cli(
                [*args, "--models", str(models), "--json"], tmp_path / "a.db", owners=owners
            )
            sent_first = _seeds(server, 0)
            n_first = len(server.chat_requests)
            again = run_cli([*args, "--models", str(models)], tmp_path / "b.db", owners=owners)
            sent_again = _seeds(server, n_first)
        finally:
            cleanup(owners)
    assert first.returncode == 0, first.stderr[-3000:]
    assert again.returncode == 0, again.stderr[-3000:]

    want = [run_seed(7, TASK, None, attempt) for attempt in (0, 1)]
    assert want[0] != want[1]
    # Each run's requests carry its seed: one run after the other, attempt 0 first.
    assert sorted(set(sent_first)) == sorted(want)
    assert sent_first == sorted(sent_first, key=want.index)
    # A rerun in a fresh store sends exactly the same seeds.
    assert sent_again == sent_first
    stored = rows(tmp_path / "a.db", "SELECT attempt, spec_json FROM episodes ORDER BY attempt")
    assert [json.loads(r["spec_json"])["request_seed"] for r in stored] == want

    # Temperature 0: said at launch and in the report, which counts the identical transcripts.
    assert "greedy: sampling is deterministic (temperature 0)" in " ".join(first.stderr.split())
    [repeats] = first.json()["repeats"]
    assert repeats == {
        "model": "greedy",
        "runs": 1,
        "repeat_attempts": 1,
        "identical": 1,
        "deterministic": True,
    }
    assert "Repeated attempts of greedy: 1 of 1 identical" in " ".join(again.stdout.split())
