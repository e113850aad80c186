"""`depthtui check` on third-party-shaped tasks (tests/fixtures/realtasks, one folder per shape;
its README says what each holds) through the real CLI, runner, images, containers and verifiers.

One check of the whole tree runs once for the module; each test reads what it says of one task."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from engine.sandbox.images import build_image, remove_task_images
from engine.tasks.loader import load_task, load_tasks
from store.db import Store
from tests.conftest import ROOT
from tests.fixtures_sandbox import TEST_LABELS

pytestmark = [pytest.mark.docker, pytest.mark.slow]

REALTASKS = ROOT / "tests" / "fixtures" / "realtasks"


class Run:
    def __init__(self, done: subprocess.CompletedProcess, db: Path) -> None:
        self.code = done.returncode
        self.stderr = " ".join(done.stderr.split())  # undo rich's wrapping
        self.rows = {r["task"].split("/", 1)[1]: r for r in json.loads(done.stdout)}
        self.db = db

    def problems(self, task: str) -> str:
        return " | ".join(self.rows[task]["problems"])

    def episodes(self, task: str) -> list[dict]:
        with Store(self.db) as store:
            sql = "SELECT * FROM episodes WHERE task_id LIKE ? ORDER BY id"
            return [dict(r) for r in store.query(sql, (f"%/{task}",))]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory):
    db = tmp_path_factory.mktemp("realtasks") / "check.db"
    argv = ["check", str(REALTASKS), "--workers", "2", "--json", "--db", str(db)]
    done = subprocess.run(
        [sys.executable, "-m", "depthtui", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=900,
        env={**os.environ, "COLUMNS": "500"},
    )
    try:
        yield Run(done, db)
    finally:
        tasks, _ = load_tasks([REALTASKS])
        client = docker.from_env()
        for task in tasks:
            remove_task_images(client, task)
        client.close()


def test_every_heredoc_form_builds_and_checks_out(run: Run) -> None:
    row = run.rows["heredoc-forms"]
    assert row["ok"] and row["reference_passed"] is True and row["noop_failed"] is True, row


def test_the_image_entrypoint_runs_before_the_agent(run: Run) -> None:
    # The reference reaches a service by a name that only the entrypoint sets up (/etc/hosts).
    row = run.rows["entrypoint-service"]
    assert row["ok"] and row["reference_passed"] is True and row["noop_failed"] is True, row


def test_an_entrypoint_that_exits_is_named(run: Run) -> None:
    row = run.rows["entrypoint-exits"]
    assert not row["ok"]
    text = run.problems("entrypoint-exits")
    assert "ENTRYPOINT /usr/local/bin/entrypoint.sh exited with code 3" in text, text
    assert "license server unreachable" in text, text
    assert {e["error_kind"] for e in run.episodes("entrypoint-exits")} == {"entrypoint"}


def test_endless_native_homes_belong_to_the_agent(run: Run) -> None:
    # The reference writes into folders %post made as root: it passes only if they are the
    # agent's, as Endless Terminals' runner gives them.
    row = run.rows["task_000000_4e57ed01"]
    assert row["ok"] and row["reference_passed"] is True and row["noop_failed"] is True, row


def test_what_post_makes_under_the_home_is_the_agents_unless_it_chowns_it(tmp_path: Path) -> None:
    task = load_task(REALTASKS / "task_000000_4e57ed01")
    client = docker.from_env()
    try:
        tag = build_image(task, tmp_path, labels=TEST_LABELS, client=client).tag
        out = subprocess.run(
            [
                "docker",
                "run",
                "--rm",
                "--network",
                "none",
                "--label",
                "depthtui.test=1",
                tag,
                "sh",
                "-c",
                "cd /home/user && find projects | sort | xargs stat -c '%u %a %n'",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    finally:
        remove_task_images(client, task)
        client.close()
    assert out.splitlines() == [
        "1000 755 projects",
        "0 444 projects/POLICY.txt",  # %post chowned it itself: the task's choice
        "1000 755 projects/site",
        "1000 755 projects/site/assets",
        "1000 755 projects/site/assets/img",
        "1000 644 projects/site/assets/img/.keep",
        "1000 644 projects/site/assets/manifest.txt",
        "1000 755 projects/site/logs",
    ]


def cli(db: Path, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "depthtui", *argv, "--db", str(db)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        env={**os.environ, "COLUMNS": "500"},
    )


def test_tests_running_agent_code_are_graded_and_marked_forgeable(run: Run) -> None:
    # test.sh runs /app/greet.sh; test_outputs.py puts /app on sys.path and imports the agent's
    # module (once a missing_module): both graded as Harbor grades them, the reference included.
    for task in ("greet-script", "dedupe-module"):
        row = run.rows[task]
        assert row["ok"] and row["reference_passed"] is True and row["noop_failed"] is True, row
        assert row["forgeable"] is True, task
        marks = {(e["agent"], e["forgeable"]) for e in run.episodes(task)}
        assert marks == {("oracle", 1), ("nop", 1)}, task
    [oracle] = [e for e in run.episodes("dedupe-module") if e["agent"] == "oracle"]
    assert oracle["forgeable_evidence"].startswith(
        "test_outputs.py:5: imports 'deduplicate' from a folder the tests put on sys.path "
        "('/app'): agent-written code runs in the test process"
    )
    [oracle] = [e for e in run.episodes("greet-script") if e["agent"] == "oracle"]
    # Both lines that run it, given once (issue 25.8).
    assert oracle["forgeable_evidence"] == "test.sh:4,5: runs agent-writable code '/app/greet.sh'"
    # Tests that import nothing the agent wrote keep the strict mode: not forgeable.
    for task in ("heredoc-forms", "task_000000_4e57ed01"):
        assert not run.rows[task]["forgeable"]
        assert {e["forgeable"] for e in run.episodes(task)} == {0}


def test_the_report_counts_forgeable_verdicts_apart_and_can_leave_them_out(run: Run) -> None:
    every = json.loads(cli(run.db, "report", "--json").stdout)
    forgeable = ["realtasks/dedupe-module", "realtasks/greet-script"]
    assert every["forgeable"] == {"runs": 4, "tasks": forgeable, "excluded": False}
    assert set(forgeable) <= {c["task"] for c in every["checks"]}
    kept = json.loads(cli(run.db, "report", "--json", "--exclude-forgeable").stdout)
    assert kept["forgeable"]["excluded"] is True
    left = {c["task"] for c in kept["checks"]}
    assert left == {c["task"] for c in every["checks"]} - set(forgeable) and left
    text = cli(run.db, "report").stdout
    assert "Forgeable by agent code: 4 run(s) on 2 task(s)" in " ".join(text.split())


def test_exports_mark_forgeable_trials(run: Run, tmp_path: Path) -> None:
    done = cli(run.db, "export", "harbor", "--out", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    ids = {e["id"] for t in ("greet-script", "dedupe-module") for e in run.episodes(t)}
    assert set(doc["forgeable"]) == ids
    job = Path(doc["job_dir"])
    assert set(json.loads((job / "config.json").read_text())["forgeable_episodes"]) == ids
    marked = {}
    for result in job.glob("*/result.json"):
        trial = json.loads(result.read_text())
        episode = int(trial["trial_name"].rsplit("__", 1)[1])
        marked[episode] = trial["agent_result"]["metadata"]["forgeable_by_agent_code"]
    assert {e for e, m in marked.items() if m} == ids and len(marked) > len(ids)


def test_a_stored_refusal_is_not_reused_by_a_rerun(run: Run, tmp_path: Path) -> None:
    # An older depthtui stored its refusal to grade as a finished run; a rerun grades instead.
    db = tmp_path / "old.db"
    db.write_bytes(run.db.read_bytes())
    with Store(db) as store, store.tx() as conn:
        conn.execute(
            "UPDATE episodes SET passed = 0, forgeable = 0, error_kind = 'verifier', "
            "error_detail = 'agent_code: the tests execute agent-written code' "
            "WHERE task_id = 'realtasks/greet-script'"
        )
    task = str(REALTASKS / "greet-script")
    done = cli(db, "check", task, "--json", "--accept-risk", "--retry-errors")
    assert done.returncode == 0, done.stderr
    [row] = json.loads(done.stdout)
    assert row["ok"] and row["forgeable"], row
    with Store(db) as store:
        rows = store.query(
            "SELECT status, error_kind FROM episodes WHERE task_id = ? ORDER BY id",
            ("realtasks/greet-script",),
        )
    statuses = [(r["status"], r["error_kind"]) for r in rows]
    assert statuses == [("superseded", "verifier")] * 2 + [("done", None)] * 2


NEEDS = {
    "needs-desktop": "needs a GUI (environment/Dockerfile line 4: exposes a remote display port)",
    "needs-windows": "needs a Windows machine (environment/Dockerfile line 1: a Windows base",
    "needs-mcp": "needs service mcp-server (docker-compose.yaml starts it beside main",
    "needs-internet": "needs the network (solution/solve.sh line 2: curl -fsSL https://example.com",
}


def test_what_one_offline_container_cannot_give_is_said_by_check(run: Run) -> None:
    for task, why in NEEDS.items():
        row = run.rows[task]
        assert not row["ok"], row  # the MCP and GUI references pass by echoing a constant
        assert why in run.problems(task), (task, row["problems"])
    assert "needs service inventory-tools (an MCP server task.toml declares" in run.problems(
        "needs-mcp"
    )


def test_import_says_what_a_task_needs(tmp_path: Path) -> None:
    done = cli(tmp_path / "import.db", "tasks", "import", str(REALTASKS), "--json")
    assert done.returncode == 0, done.stderr
    needs = json.loads(done.stdout)["needs"]
    assert set(needs) == {f"realtasks/{t}" for t in NEEDS}
    for task, why in NEEDS.items():
        assert any(line.startswith(why) for line in needs[f"realtasks/{task}"]), task
    text = cli(tmp_path / "import2.db", "tasks", "import", str(REALTASKS / "needs-mcp"))
    assert "realtasks/needs-mcp cannot be measured here: needs service mcp-server" in " ".join(
        text.stderr.split()
    )


@pytest.fixture(scope="module")
def exported(run: Run, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("export")
    done = cli(run.db, "export", "harbor", "--out", str(out), "--name", "realtasks", "--json")
    assert done.returncode == 0, done.stderr
    return Path(json.loads(done.stdout)["job_dir"])


def test_an_exported_job_imports_back_with_its_verdicts(run: Run, exported: Path) -> None:
    # Oracle and nop trials written by depthtui (their trajectories hold no agent turns).
    fresh = exported.parent / "back.db"
    done = cli(fresh, "import", "harbor", str(exported), "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    with Store(run.db) as store:
        total = store.query("SELECT count(*) FROM episodes WHERE status = 'done'")[0][0]
    assert doc["errors"] == [] and len(doc["imported"]) == total
    with Store(fresh) as store:
        back = {
            (r["task_id"], r["reward"])
            for r in store.query("SELECT task_id, reward FROM episodes WHERE error_kind IS NULL")
        }
    assert ("realtasks/greet-script", 1.0) in back and ("realtasks/greet-script", 0.0) in back


HARBOR_MODELS = {
    "trial": "harbor.models.trial.result",
    "trial_config": "harbor.models.trial.config",
    "job": "harbor.models.job.result",
    "job_config": "harbor.models.job.config",
    "trajectory": "harbor.models.trajectories.trajectory",
}


def test_exports_validate_with_harbors_own_models(exported: Path) -> None:
    # Only where Harbor (Python >= 3.12) is installed; what CI runs asserts the shapes above.
    trial_result = pytest.importorskip(HARBOR_MODELS["trial"]).TrialResult
    trial_config = pytest.importorskip(HARBOR_MODELS["trial_config"]).TrialConfig
    job_result = pytest.importorskip(HARBOR_MODELS["job"]).JobResult
    job_config = pytest.importorskip(HARBOR_MODELS["job_config"]).JobConfig
    trajectory = pytest.importorskip(HARBOR_MODELS["trajectory"]).Trajectory
    job_result.model_validate_json((exported / "result.json").read_text())
    job_config.model_validate_json((exported / "config.json").read_text())
    trials = sorted(p for p in exported.iterdir() if p.is_dir())
    assert trials
    for trial in trials:
        trial_result.model_validate_json((trial / "result.json").read_text())
        trial_config.model_validate_json((trial / "config.json").read_text())
        trajectory.model_validate_json((trial / "agent" / "trajectory.json").read_text())
