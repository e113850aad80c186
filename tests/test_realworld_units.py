"""The real-world fixture tasks (tests/fixtures/realworld) through the parts that need no Docker:
loaders, the offline rewrite of their test.sh, the scan for agent-written code, and the
rewrite of BuildKit-only Dockerfile syntax for the classic builder."""

from __future__ import annotations

import base64
import shutil

import pytest

from engine.protocol import common
from engine.protocol.episode import EpisodeResult
from engine.protocol.spec import EpisodeSpec
from engine.sandbox.buildkit import to_classic
from engine.tasks import dockerfile
from engine.tasks.loader import load_task, load_tasks
from engine.verify.agent_code import scan_tests
from engine.verify.harbor_verifier import graded_tests
from engine.verify.preamble import OfflineError, rewrite_test_sh
from store import vocab
from tests.conftest import ROOT

REALWORLD = ROOT / "tests" / "fixtures" / "realworld"


def task(name: str):
    return load_task(REALWORLD / name)


# --- loaders --------------------------------------------------------------------------------


def test_terminal_bench_task_with_schema_1_1_fields():
    t = task("harbor/status-counts")
    assert (t.format, t.verifier_kind, t.agent_user, t.agent_uid) == ("harbor", "harbor", "root", 0)
    assert t.workdir == "/app" and t.home == "/root"
    # The prebuilt image cannot be pulled here; the Dockerfile beside it is what gets built.
    assert t.environment.image == "depthtui-fixtures/status-counts:20251031"
    assert t.environment.dockerfile == REALWORLD / "harbor/status-counts/environment/Dockerfile"
    assert t.metadata["authors"] == [
        {"name": "depthtui fixtures", "email": "fixtures@example.invalid"}
    ]
    assert t.instruction.startswith("The web server")  # the canary comment is not shown
    assert t.limits.verifier_timeout_sec == 180.0 and t.limits.agent_timeout_sec == 600.0
    assert any("asks for network access" in w for w in t.warnings)
    assert not any("unknown keys" in w for w in t.warnings)
    assert t.work == 5


def test_old_spellings_and_unknown_keys_are_tolerated():
    t = task("harbor/legacy-config")
    assert t.limits.memory_mb == 2048 and t.limits.storage_mb == 10240
    assert t.metadata["schema_version"] == "1.0"
    assert t.segments[0].solution_env == {"DEBIAN_FRONTEND": "noninteractive"}
    unknown = next(w for w in t.warnings if "unknown keys" in w)
    for key in ("parser_name", "run_tests_in_same_shell", "verifier.restart_environment"):
        assert key in unknown
    assert "agent.max_episodes" in unknown


def test_multi_step_task():
    t = task("harbor/inventory-migration")
    assert [s.name for s in t.segments] == ["01-normalise", "02-valuation"]
    assert (t.agent_user, t.workdir, t.home) == ("agent", "/app", "/home/agent")
    first, second = t.segments
    assert first.min_reward == 1.0 and second.min_reward == {"reward": 1.0}
    assert first.setup_script is not None and first.workdir_dir is not None
    # The shared tests/ helper goes to every step, beside the step's own test.sh.
    assert set(first.tests) == {"check_lib.sh", "test.sh"}
    assert first.tests["test.sh"] != second.tests["test.sh"]
    assert t.reward_strategy == "mean" and t.work == 8


def test_adapter_compose_file_builds_the_task_dockerfile():
    t = task("harbor/notes-index")
    env = t.environment
    assert env.image is None  # ${MAIN_IMAGE_NAME} is Harbor's tag for the build
    assert env.context_dir == REALWORLD / "harbor/notes-index/environment"
    assert env.dockerfile == env.context_dir / "Dockerfile"
    assert env.env == {"TEST_DIR": "/tests", "NOTES_DIR": "/app/notes"}
    assert t.workdir == "/app"


def test_endless_harbor_layout():
    t = task("endless/task_000000_3f9c1a7e")
    assert (t.format, t.verifier_kind) == ("endless", "pytest")
    assert (t.agent_user, t.agent_uid, t.workdir, t.home) == (
        "user",
        1000,
        "/home/user",
        "/home/user",
    )
    assert {"task.json", "test_initial_state.py"} <= set(t.environment.private_files)
    assert t.metadata["o3_summary"]["num_runs"] == 16
    assert set(t.segments[0].tests) == {"test.sh", "test_final_state.py"}


def test_endless_generator_output():
    t = task("endless/task_000000_8b2d4e60")
    assert (t.format, t.verifier_kind, t.agent_uid) == ("endless-native", "pytest", 1000)
    text = t.environment.dockerfile_text or ""
    assert "FROM ubuntu:22.04" in text  # read from `Bootstrap: localimage ./ubuntu_22.04.sif`
    assert "ENV LC_ALL=" in text and "LABEL" in text
    assert {"task.json", "test_initial_state.py", "test_final_state.py"} <= set(
        t.environment.private_files
    )
    assert t.instruction.startswith("A CSV of newsletter contacts")


def test_broken_folders_each_give_one_clear_error_and_the_rest_load():
    tasks, errors = load_tasks([REALWORLD / "broken"])
    by_folder = {e.folder.name: str(e) for e in errors}
    assert set(by_folder) == {"no-tests", "step-without-instruction", "task_000000_e5e5e5e5"}
    assert "no-tests/tests: missing: expected tests/test.sh (Harbor)" in by_folder["no-tests"]
    assert (
        "steps/apply/instruction.md: field 'steps[1]': missing: expected the instruction of "
        "step 'apply'" in by_folder["step-without-instruction"]
    )
    assert "container.def: the definition is empty" in by_folder["task_000000_e5e5e5e5"]
    assert len(tasks) == 7
    assert {t.id for t in tasks} >= {"broken/build-fails", "broken/task_000000_50150150"}
    assert next(t for t in tasks if t.id == "broken/task_000000_50150150").work is None


# --- test.sh offline --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "harbor/status-counts",
        "harbor/sensor-summary",
        "harbor/legacy-config",
        "harbor/notes-index",
        "endless/task_000000_3f9c1a7e",
        "broken/task_000000_0bad0b0e",
    ],
)
def test_every_published_preamble_shape_runs_offline(name: str):
    test_sh = task(name).segments[0].tests["test.sh"]
    rewrite = rewrite_test_sh(test_sh.read_text())
    assert rewrite.runs_pytest
    # The reward lines stay as they were.
    assert "/logs/verifier/reward." in rewrite.script
    assert "astral.sh" not in rewrite.script.replace("true", "")


def test_tests_that_need_a_package_from_the_network_are_refused_by_name():
    test_sh = task("broken/needs-network").segments[0].tests["test.sh"]
    with pytest.raises(OfflineError, match=r"line 9: .*the tests need requests from the network"):
        rewrite_test_sh(test_sh.read_text())


@pytest.mark.parametrize("name", ["harbor/status-counts", "harbor/notes-index"])
def test_the_uv_preamble_is_not_agent_code_once_rewritten(name: str):
    t = task(name)
    tests = t.segments[0].tests
    as_written = scan_tests(tests, home=t.home, workdir=t.workdir)
    assert any(".local/bin/env" in e.detail for e in as_written.evidence)
    as_run = scan_tests(graded_tests(tests), home=t.home, workdir=t.workdir)
    assert as_run.evidence == ()


# --- retries ------------------------------------------------------------------------------------


def _result(kind: str | None, detail: str | None) -> EpisodeResult:
    return EpisodeResult(
        episode_id=1,
        reused=False,
        status="done",
        passed=False,
        turns=0,
        error_kind=kind,
        error_detail=detail,
        cost_usd=0.0,
        reward=0.0,
        collateral=False,
        outcome=vocab.classify(False, kind, detail),  # as the store classifies what it finished
    )


@pytest.mark.parametrize(
    ("kind", "detail", "tries"),
    [
        ("verifier", "needs_network: test.sh line 9: the tests need requests", 1),
        ("verifier", "missing_module: the tests import yaml", 1),
        ("verifier", "timeout: test.sh ran past 60 s", 3),
        ("harness", "docker: the engine went away", 3),
    ],
)
def test_only_errors_of_the_task_files_skip_the_retries(monkeypatch, kind, detail, tries):
    seen: list[int] = []

    def fake_run(ctx, task, spec, **kw):  # the Docker boundary
        seen.append(spec.retry)
        return _result(kind, detail)

    monkeypatch.setattr(common, "run_episode", fake_run)
    spec = EpisodeSpec(task_id="t", task_hash="h", mode="check", agent="nop")
    common.run_with_retries(None, None, spec)
    assert seen == list(range(tries))


# --- BuildKit heredocs for the classic builder --------------------------------------------------

HEREDOCS = """\
# syntax=docker/dockerfile:1.4
FROM ubuntu:22.04
RUN --mount=type=cache,target=/var/cache/apt apt-get update
RUN mkdir -p /home/user && cat <<'EOF' > /home/user/a.csv && \\
    chmod 0644 /home/user/a.csv
x,y
WORKDIR /inside-a-heredoc
EOF
COPY --chmod=755 <<'EOF' /usr/local/bin/hi
#!/bin/sh
echo "hi $1"
EOF
RUN echo "a << b" > /tmp/shift.txt
WORKDIR /home/user
"""


def test_heredoc_bodies_are_not_read_as_instructions():
    info = dockerfile.parse(HEREDOCS)
    assert info.workdir == "/home/user"
    keywords = [i.keyword for i in info.instructions]
    assert keywords == ["FROM", "RUN", "RUN", "COPY", "RUN", "WORKDIR"]
    run = info.instructions[2]
    assert run.heredocs[0].body == "x,y\nWORKDIR /inside-a-heredoc\n"
    assert run.heredocs[0].quoted and (run.line, run.end) == (4, 8)


def test_heredocs_become_one_line_runs():
    text, notes = to_classic(HEREDOCS)
    lines = text.splitlines()
    assert lines[:2] == ["# syntax=docker/dockerfile:1.4", "FROM ubuntu:22.04"]
    assert lines[2] == "RUN apt-get update"  # the cache mount only sped builds up
    assert lines[3].startswith('RUN eval "$(echo ') and lines[3].endswith(' | base64 -d)"')
    assert lines[4].startswith('RUN eval "$(echo ')
    assert lines[5:] == ['RUN echo "a << b" > /tmp/shift.txt', "WORKDIR /home/user"]
    assert [n.split(":")[0] for n in notes] == ["line 3", "line 4", "line 9"]


def test_the_rewritten_script_is_the_heredoc_as_written():
    text, _ = to_classic(HEREDOCS)
    encoded = text.splitlines()[3].split("echo ")[1].split(" |")[0]
    script = base64.b64decode(encoded).decode()
    assert script == (
        "mkdir -p /home/user && cat <<'EOF' > /home/user/a.csv && chmod 0644 /home/user/a.csv\n"
        "x,y\nWORKDIR /inside-a-heredoc\nEOF\n"
    )
    encoded = text.splitlines()[4].split("echo ")[1].split(" |")[0]
    copy = base64.b64decode(encoded).decode()
    assert "cat > /usr/local/bin/hi <<'EOF'\n#!/bin/sh\necho \"hi $1\"\nEOF\n" in copy
    assert "chmod 755 /usr/local/bin/hi" in copy


@pytest.mark.parametrize(
    "text",
    [
        "FROM ubuntu:24.04\nRUN apt-get update && apt-get install -y jq\nWORKDIR /app\n",
        # no delimiter line: not a heredoc Docker could build either way; left as written
        "FROM ubuntu:24.04\nRUN cat <<EOF > /x\nhello\n",
        'FROM ubuntu:24.04\nRUN ["sh", "-c", "cat <<EOF"]\n',
    ],
)
def test_dockerfiles_without_buildkit_syntax_are_unchanged(text: str):
    assert to_classic(text) == (text, [])


def test_every_fixture_dockerfile_reads():
    for path in sorted(REALWORLD.glob("*/*/environment/Dockerfile")):
        info = dockerfile.parse(path.read_text())
        assert any(i.keyword == "FROM" for i in info.instructions), path


def test_a_separate_verifier_environment_is_warned_about(tmp_path):
    folder = tmp_path / "ds" / "separate"
    shutil.copytree(REALWORLD / "harbor/legacy-config", folder)
    toml = folder / "task.toml"
    toml.write_text(
        toml.read_text().replace("[verifier]\n", '[verifier]\nenvironment_mode = "separate"\n')
    )
    warnings = load_task(folder).warnings
    assert any("environment_mode = 'separate' is not supported" in w for w in warnings)
