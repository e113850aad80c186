"""Parity (docs/rl.md): one scripted command sequence run three ways gives the same episode:
an ordinary CLI run with a scripted model on loopback (`free` for the clean arm, `episodes` for
the faulted one with planted files and a frozen contract), TerminalEnv driven directly, and the
OpenEnv server over HTTP. Compared: reward, turns, outcome, the oracle's events per call
(collateral included), the fault record and the per-test results.

The three share the agent's name, so the fault's seed is the same; each rollout is still its
own run (its own key), so nothing is reused between them."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from devtools.scripted_server import ScriptedReply, ScriptedServer, calls, text
from engine.rl import environment_factory
from engine.rl.server import serve
from store.db import Store
from store.protocol import put_contract
from tests.fixtures_measure import cleanup, endless, leftovers, reply_number, rows, run_cli
from tests.fixtures_measure import write_models as write_models_file

pytestmark = [pytest.mark.docker, pytest.mark.slow]

EC = "demo/error-count"
LOG = "/home/user/logs/app.log"
SOLVE = (
    "mkdir -p /home/user/reports && awk '$3 == \"ERROR\"' /home/user/logs/app.log | wc -l "
    "> /home/user/reports/error_count.txt"
)
CLEAN = (
    "mkdir -p /home/user/scratch && echo hi > /home/user/scratch/note",
    "rm -rf /home/user/scratch",
    SOLVE,
)
# Denied, repaired and solved, then a planted file deleted: collateral at call 3.
FAULTED = (f"head -1 {LOG}", f"chmod u+rw {LOG} && {SOLVE}", "rm -f /home/user/logs/journal.md")


def scripted(commands: tuple[str, ...]):
    def policy(body: dict) -> ScriptedReply:
        n = reply_number(body)
        return calls(commands[n - 1]) if n <= len(commands) else text("done")

    return policy


def digest(db: Path, eid: int) -> dict[str, Any]:
    (ep,) = rows(db, "SELECT * FROM episodes WHERE id = ?", (eid,))
    events = rows(
        db,
        "SELECT call_idx, path, kind, permitted, collateral FROM oracle_events "
        "WHERE episode_id = ? ORDER BY call_idx, path, kind",
        (eid,),
    )
    fault = rows(
        db,
        "SELECT family, target, observed_call, cleared, integrity, restored_for_grading "
        "FROM fault_records WHERE episode_id = ?",
        (eid,),
    )
    tests = rows(
        db,
        "SELECT segment_idx, nodeid, outcome FROM test_results WHERE episode_id = ? "
        "ORDER BY segment_idx, nodeid",
        (eid,),
    )
    observations = rows(
        db, "SELECT observation FROM calls WHERE episode_id = ? ORDER BY idx", (eid,)
    )
    keys = ("reward", "turns", "outcome", "collateral", "collateral_call", "end_reason",
            "tests_passed", "tests_total", "fault_family")  # fmt: skip
    return {
        **{k: ep[k] for k in keys},
        "events": events,
        "fault": fault,
        "tests": tests,
        "observations": [o["observation"] for o in observations],
    }


def post(url: str, path: str, body: dict) -> dict:
    request = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())


def three_ways(db: Path, commands: tuple[str, ...], cli_eid: int, **factory_kw: Any) -> list:
    factory = environment_factory("tasks/demo/error-count", db=db, agent="fixer", **factory_kw)
    env = factory()
    env.reset(task=EC, seed=0)
    for command in commands:
        env.bash(command)
    env.get_reward()
    env_eid = env._episode_id()
    env._close()
    server = serve(factory, "127.0.0.1", 0)
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        post(url, "/reset", {"task": EC, "seed": 0})
        for command in commands:
            post(url, "/step", {"action": {"command": command}})
        served_eid = post(url, "/step", {"action": {"finish": True}})["observation"]["episode"]
    finally:
        server.shutdown()
        server.server_close()
    digests = [digest(db, cli_eid), digest(db, env_eid), digest(db, served_eid)]
    if os.environ.get("DEPTHTUI_PARITY_TABLE"):  # the table the docs quote
        for way, d in zip(("cli", "env", "server"), digests, strict=True):
            print(way, {k: v for k, v in d.items() if k != "observations"})
    return digests


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    base = tmp_path_factory.mktemp("parity")
    servers = {
        "clean": ScriptedServer(endless(scripted(CLEAN))),
        "faulted": ScriptedServer(endless(scripted(FAULTED))),
    }
    owners: list[str] = []
    with servers["clean"] as clean, servers["faulted"] as faulted:
        files = {
            "clean": write_models_file(base / "clean.toml", clean, {"fixer": clean.model}),
            "faulted": write_models_file(base / "faulted.toml", faulted, {"fixer": faulted.model}),
        }
        try:
            yield base, files, owners
            assert leftovers(owners) == []
        finally:
            cleanup(owners)


def test_free_episode_env_and_server_agree(models):
    base, files, owners = models
    db = base / "clean.db"
    args = ["free", "tasks/demo/error-count", "-m", "fixer", "--attempts", "1"]
    run = run_cli([*args, "--models", str(files["clean"])], db, owners=owners)
    assert run.returncode == 0, run.stderr[-2000:]
    (cli,) = rows(db, "SELECT id FROM episodes WHERE mode = 'free'")
    free, env, served = three_ways(db, CLEAN, cli["id"], planted="none")
    assert free["reward"] == 1.0 and free["turns"] == 3 and free["events"] and free["tests"]
    assert env == free
    assert served == free


def test_faulted_episode_env_and_server_agree(models):
    base, files, owners = models
    db = base / "faulted.db"
    assert run_cli(["tasks", "import", "tasks/demo"], db, owners=owners).returncode == 0
    with Store(db) as store:
        (task,) = rows(db, "SELECT content_hash FROM tasks WHERE id = ?", (EC,))
        put_contract(
            store, EC, task_hash=task["content_hash"], env_hash="", tests_hash="", valid=True,
            reasons=[], permitted={}, tests=[], fault_targets={"perm_denied": LOG}, flags=[],
            detail={},
        )  # fmt: skip
    args = ["episodes", EC, "-m", "fixer", "--faults", "perm_denied", "--attempts", "1"]
    run = run_cli([*args, "--models", str(files["faulted"])], db, owners=owners)
    assert run.returncode == 0, run.stderr[-2000:]
    (cli,) = rows(db, "SELECT id FROM episodes WHERE mode = 'episodes'")
    episode, env, served = three_ways(db, FAULTED, cli["id"], faults="perm_denied")
    assert episode["reward"] == -1.0 and episode["collateral_call"] == 3
    assert episode["fault"] and episode["fault"][0]["observed_call"] == 1 and episode["tests"]
    assert env == episode
    assert served == episode
