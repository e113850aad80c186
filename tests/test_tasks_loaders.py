"""Task loaders on the bundled demo dataset and on one fixture per format and per way of being
broken (tests/fixtures/tasks/)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.tasks import hashing
from engine.tasks.dataset import read_dataset_info
from engine.tasks.loader import datasets_of, load_task, load_tasks
from engine.tasks.model import TaskError, count_work
from tests.conftest import DEMO, ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "tasks"
FORMATS = FIXTURES / "formats"
BROKEN = FIXTURES / "broken"
DEMO_TASKS = sorted(p for p in DEMO.iterdir() if p.is_dir()) if DEMO.is_dir() else []


def copy_fixture(name: str, tmp_path: Path, dataset: str = "ds") -> Path:
    dest = tmp_path / dataset / Path(name).name
    shutil.copytree(FIXTURES / name, dest)
    return dest


# --- the demo dataset -----------------------------------------------------------------------


def test_demo_dataset_has_tasks_to_load():
    assert len(DEMO_TASKS) >= 1


@pytest.mark.parametrize("folder", DEMO_TASKS, ids=lambda p: p.name)
def test_every_demo_task_loads_cleanly(folder: Path):
    task = load_task(folder)
    assert task.id == f"demo/{folder.name}"
    assert task.dataset == "demo"
    assert task.source_path == folder
    # Bundled tasks are written for offline use: nothing to substitute, no network preamble,
    # no private file copied into the image.
    assert task.warnings == ()
    assert task.work is not None and task.work > 0
    for segment in task.segments:
        assert segment.instruction.strip()
        assert segment.tests
        assert all(p.is_file() for p in segment.tests.values())
    assert task.agent_user == "user" and task.agent_uid == 1000
    assert task.workdir == "/home/user"
    if task.multi_segment:
        assert task.format == "harbor" and task.verifier_kind == "harbor"
        assert len(task.segments) >= 3
    else:
        assert task.format == "endless" and task.verifier_kind == "pytest"
        assert "test_final_state.py" in task.segments[0].tests
        assert "task.json" in task.environment.private_files


def test_demo_dataset_loads_as_a_whole():
    tasks, errors = load_tasks([DEMO])
    assert errors == []
    assert sorted(t.id for t in tasks) == sorted(f"demo/{p.name}" for p in DEMO_TASKS)


# --- Harbor ---------------------------------------------------------------------------------


def test_harbor_single_reads_every_field():
    task = load_task(FORMATS / "harbor-single")
    assert task.id == "formats/harbor-single"
    assert (task.format, task.verifier_kind) == ("harbor", "harbor")
    assert task.name == "samples/harbor-single"
    assert task.description == "Write a greeting file."
    assert task.metadata["difficulty"] == "easy"
    assert task.metadata["keywords"] == ["files"]
    assert task.metadata["schema_version"] == "1.1"
    # The Dockerfile creates `agent` with uid 1001; [environment].workdir beats its WORKDIR.
    assert (task.agent_user, task.agent_uid, task.home) == ("agent", 1001, "/home/agent")
    assert task.workdir == "/app"
    lim = task.limits
    assert (lim.cpus, lim.memory_mb, lim.storage_mb) == (2.0, 1024, 4096)
    assert (lim.agent_timeout_sec, lim.verifier_timeout_sec) == (120.0, 90.0)
    env = task.environment
    assert env.dockerfile == FORMATS / "harbor-single" / "environment" / "Dockerfile"
    assert env.build_timeout_sec == 300.0
    assert env.env == {"APP_MODE": "test"}
    assert env.healthcheck is not None and env.healthcheck.command == "test -d /app"
    assert (env.healthcheck.interval_sec, env.healthcheck.retries) == (1.0, 2)
    assert env.allow_internet is False
    (segment,) = task.segments
    # Harbor strips leading canary comments from the instruction.
    assert segment.instruction == "Write `hello` to /app/greeting.txt.\n"
    assert sorted(segment.tests) == ["test.sh", "test_outputs.py"]
    assert segment.verifier_env == {"GREETING": "hello"}
    assert segment.solution_env == {"DEBIAN_FRONTEND": "noninteractive"}
    assert segment.solution_dir == FORMATS / "harbor-single" / "solution"
    assert task.work == 1  # shebang, comment and blank lines do not count
    assert task.warnings == ()


def test_harbor_steps_with_per_step_overrides():
    task = load_task(FORMATS / "harbor-steps")
    assert task.multi_segment and [s.name for s in task.segments] == ["create", "extend", "finish"]
    assert task.reward_strategy == "final"
    create, extend, finish = task.segments
    # Agent timeout falls back to the task's; the verifier timeout does not (600 unless set).
    assert (create.agent_timeout_sec, create.verifier_timeout_sec) == (200.0, 600.0)
    assert (extend.agent_timeout_sec, extend.verifier_timeout_sec) == (50.0, 30.0)
    assert task.limits.verifier_timeout_sec == 100.0
    assert create.min_reward == 1.0
    assert extend.min_reward == {"reward": 0.5, "style": 1.0}
    assert finish.min_reward is None
    assert extend.healthcheck is not None and extend.healthcheck.retries == 1
    assert create.healthcheck is None
    # A step's test files override the shared ones file by file.
    shared, own = FORMATS / "harbor-steps" / "tests", FORMATS / "harbor-steps" / "steps" / "extend"
    assert extend.tests == {
        "test.sh": shared / "test.sh",
        "helper.py": shared / "helper.py",
        "test_outputs.py": own / "tests" / "test_outputs.py",
    }
    assert create.tests["test_outputs.py"] == shared / "test_outputs.py"
    assert extend.verifier_env == {"SHARED": "1", "STEP": "extend"}
    assert create.verifier_env == {"SHARED": "1"}
    assert extend.workdir_dir == own / "workdir"
    assert extend.setup_script == own / "workdir" / "setup.sh"
    assert create.workdir_dir is None and create.setup_script is None
    # Each step's own solution: W = 1 + 2 + 3.
    assert [s.work for s in task.segments] == [1, 2, 3]
    assert task.work == 6
    assert (task.agent_user, task.agent_uid, task.workdir) == ("user", 1000, "/home/user")


def test_harbor_compose_main_service_and_sidecars():
    task = load_task(FORMATS / "harbor-compose")
    env = task.environment
    app = FORMATS / "harbor-compose" / "environment" / "app"
    assert env.context_dir == app and env.dockerfile == app / "App.Dockerfile"
    assert task.agent_user == "nobody"  # the Dockerfile's last USER, as Harbor does
    assert any("services db are not started" in w for w in task.warnings)
    assert any("FROM python:3.13-slim-bookworm may need substituting" in w for w in task.warnings)
    assert task.work is None  # no solution/solve.sh


def test_old_spellings_and_unknown_keys_are_tolerated_with_warnings():
    task = load_task(FORMATS / "harbor-old")
    assert task.metadata["schema_version"] == "1.0"  # `version` is the old schema_version
    assert task.limits.memory_mb == 4096  # memory = "4G"
    assert task.limits.storage_mb == 512  # storage = "512M"
    assert task.environment.allow_internet is True  # allow_internet = true
    assert task.environment.image == "ghcr.io/example/tool:1.2"
    assert task.environment.dockerfile is None
    assert (task.agent_user, task.agent_uid, task.home) == ("root", 0, "/root")
    assert task.workdir == "/"
    warnings = "\n".join(task.warnings)
    assert "unknown keys ignored: colour, agent.mood" in warnings
    assert "asks for network access" in warnings
    assert "docker_image ghcr.io/example/tool:1.2 may need substituting" in warnings
    assert "tests/test.sh reaches for the network" in warnings
    assert "set [environment].workdir" in warnings


def test_memory_and_memory_mb_must_agree(tmp_path: Path):
    folder = copy_fixture("formats/harbor-single", tmp_path)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace("memory_mb = 1024", 'memory_mb = 1024\nmemory = "2G"'))
    with pytest.raises(TaskError) as info:
        load_task(folder)
    assert info.value.field == "environment.memory"
    assert "task.toml" in str(info.value) and "memory_mb = 1024" in str(info.value)


def test_dockerfile_that_copies_a_private_file_is_warned(tmp_path: Path):
    folder = copy_fixture("formats/harbor-single", tmp_path)
    (folder / "environment" / "task.json").write_text('{"truth": "secret"}')
    dockerfile = folder / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "COPY . /app/\n")
    task = load_task(folder)
    assert task.environment.private_files == ("task.json",)
    assert any(
        "line 4: COPY . takes private task.json into the agent's image" in w for w in task.warnings
    )


# --- Endless Terminals ------------------------------------------------------------------------


def test_endless_terminals_harbor_layout():
    folder = FORMATS / "task_000000_0a1b2c3d"
    task = load_task(folder)
    assert (task.format, task.verifier_kind) == ("endless", "pytest")
    assert (task.agent_user, task.agent_uid, task.home, task.workdir) == (
        "user",
        1000,
        "/home/user",
        "/home/user",
    )
    assert task.environment.private_files == ("task.json", "test_initial_state.py")
    assert task.metadata["o3_summary"] == {
        "num_runs": 16,
        "num_success": 12,
        "pass_at_k": {"1": 0.75},
    }
    assert task.metadata["author_name"] == "Endless Terminals"
    assert (task.limits.agent_timeout_sec, task.limits.verifier_timeout_sec) == (300.0, 300.0)
    assert sorted(task.segments[0].tests) == ["test.sh", "test_final_state.py"]
    assert task.work == 1
    warnings = "\n".join(task.warnings)
    assert "environment/Dockerfile line 1: FROM ubuntu:22.04 may need substituting" in warnings
    assert "line 5: COPY task.json takes private task.json" in warnings
    assert "tests/test.sh reaches for the network" in warnings


def test_endless_terminals_generator_variant_translates_apptainer():
    folder = FORMATS / "task_000000_deadbeef"
    task = load_task(folder)
    assert (task.format, task.verifier_kind) == ("endless-native", "pytest")
    assert task.instruction == (
        "Count the lines of /home/user/input.txt into /home/user/count.txt.\n"
    )
    assert task.work is None and task.segments[0].solution_script is None
    assert task.segments[0].tests == {"test_final_state.py": folder / "test_final_state.py"}
    env = task.environment
    assert env.context_dir == folder and env.dockerfile is None
    assert env.private_files == (
        "task.json",
        "test_initial_state.py",
        "test_final_state.py",
        "solutions",
    )
    text = env.dockerfile_text or ""
    assert text.splitlines()[1] == "FROM ubuntu:22.04"
    assert 'COPY ["input.txt", "/home/user/input.txt"]' in text
    assert 'ENV LC_ALL="C.UTF-8"' in text and 'ENV PYTHONDONTWRITEBYTECODE="1"' in text
    # %runscript and %help have no meaning for a task image.
    assert "exec /bin/bash" not in text and "A generated task" not in text
    assert task.metadata["summary"] == {"num_runs": 4, "num_success": 1}
    assert any("was not translated" in w for w in task.warnings)


# --- broken tasks -----------------------------------------------------------------------------

BROKEN_CASES = {
    # folder: (file the error names, field or None, words the message must hold)
    "missing-instruction": ("instruction.md", None, "missing"),
    "bad-toml": ("task.toml", None, "not valid TOML: Invalid value (at line 5, column 15)"),
    "empty-dockerfile": ("environment/Dockerfile", None, "is empty"),
    "missing-dockerfile": ("environment/Dockerfile", None, "docker_image"),
    "missing-tests": ("tests", None, "missing: expected tests/test.sh"),
    "step-without-instruction": ("steps/second/instruction.md", "steps[1]", "step 'second'"),
    "unknown-verifier": ("tests", None, "unknown verifier layout"),
    "compose-without-main": ("environment/docker-compose.yaml", "services.main", "'main'"),
    "et-empty-def": ("container.def", None, "empty"),
    "et-bad-def": ("container.def", None, "no 'Bootstrap:' header"),
    "bad-field-type": ("task.toml", "agent.timeout_sec", "expected a number, got 'ten minutes'"),
    "bad-memory": ("task.toml", "environment.memory", "'2G'"),
    "not-a-task": ("", None, "unknown task layout"),
}


@pytest.mark.parametrize("name", sorted(BROKEN_CASES))
def test_broken_task_gives_one_clear_error(name: str):
    rel, field, words = BROKEN_CASES[name]
    folder = BROKEN / name
    with pytest.raises(TaskError) as info:
        load_task(folder)
    error = info.value
    expected_path = folder / rel if rel else folder
    assert error.path == expected_path
    assert error.field == field
    message = str(error)
    assert message.startswith(str(expected_path))
    if field:
        assert f"field '{field}'" in message
    assert words in message


def test_every_broken_fixture_is_covered():
    assert sorted(p.name for p in BROKEN.iterdir() if p.is_dir()) == sorted(BROKEN_CASES)


def test_load_tasks_carries_on_past_broken_folders():
    tasks, errors = load_tasks([FORMATS, BROKEN, BROKEN / "bad-toml", FIXTURES / "nowhere"])
    assert sorted(t.id for t in tasks) == sorted(
        f"formats/{p.name}" for p in FORMATS.iterdir() if p.is_dir()
    )
    by_folder = {e.folder.name for e in errors if e.folder is not None}
    assert by_folder == set(BROKEN_CASES)
    # bad-toml was named twice: one error per folder, not two.
    assert len([e for e in errors if e.folder == BROKEN / "bad-toml"]) == 1
    (missing,) = [e for e in errors if e.folder is None]
    assert missing.path == FIXTURES / "nowhere" and "does not exist" in str(missing)


def test_a_folder_of_datasets_expands_two_levels(tmp_path: Path):
    root = tmp_path / "all"
    shutil.copytree(FORMATS, root / "formats")
    shutil.copytree(FORMATS / "harbor-single", root / "other" / "harbor-single")
    tasks, errors = load_tasks([root])
    assert errors == []
    assert {t.dataset for t in tasks} == {"formats", "other"}
    assert "other/harbor-single" in {t.id for t in tasks}


def test_an_empty_dataset_folder_is_an_error(tmp_path: Path):
    tasks, errors = load_tasks([tmp_path])
    assert tasks == [] and len(errors) == 1
    assert errors[0].path == tmp_path and "no task folders here" in str(errors[0])


# --- datasets ---------------------------------------------------------------------------------


def test_dataset_toml(tmp_path: Path):
    info = read_dataset_info(FORMATS)
    assert (info.name, info.title, info.group) == ("formats", "Format samples", "synthetic")
    bare = read_dataset_info(BROKEN)
    assert (bare.name, bare.title, bare.group) == ("broken", "", None)
    (tmp_path / "dataset.toml").write_text('group = "mine"\n')
    with pytest.raises(TaskError) as info_error:
        read_dataset_info(tmp_path)
    assert info_error.value.field == "group"
    assert "dataset.toml" in str(info_error.value) and "'ours'" in str(info_error.value)


def test_datasets_of_reports_a_bad_dataset_toml_but_keeps_the_tasks(tmp_path: Path):
    folder = copy_fixture("formats/harbor-single", tmp_path, dataset="mine")
    (folder.parent / "dataset.toml").write_text("group = [1]\n")
    tasks, errors = load_tasks([folder.parent])
    assert errors == [] and len(tasks) == 1
    infos, dataset_errors = datasets_of(tasks)
    assert [i.name for i in infos] == ["mine"]
    assert len(dataset_errors) == 1 and dataset_errors[0].field == "group"


# --- work and hashes --------------------------------------------------------------------------


def test_work_counts_non_blank_non_comment_lines():
    script = """#!/bin/bash
# set things up
set -euo pipefail

cd ~/data   # inline comments do not matter
   # indented comment
for f in *.csv; do
    sort "$f" > "sorted/$f"
done
"""
    assert count_work(script) == 5
    assert count_work("") == 0
    assert count_work("#!/bin/sh\n\n# nothing\n") == 0
    assert count_work("echo one\n\n\necho two") == 2


def test_content_hash_follows_the_files(tmp_path: Path):
    folder = copy_fixture("formats/harbor-single", tmp_path)
    first = hashing.content_hash(folder)
    assert first == load_task(FORMATS / "harbor-single").content_hash
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (folder / "tests" / "helper.pyc").write_bytes(b"\0")
    assert hashing.content_hash(folder) == first
    (folder / "instruction.md").write_text("Something else.\n")
    assert hashing.content_hash(folder) != first
    (folder / "instruction.md").rename(folder / "instructions.md")
    assert hashing.content_hash(folder) != first


def test_env_and_tests_hashes_change_with_what_they_cover(tmp_path: Path):
    folder = copy_fixture("formats/task_000000_0a1b2c3d", tmp_path)

    def hashes() -> tuple[str, str]:
        task = load_task(folder)
        return hashing.env_hash(task), hashing.tests_hash(task)

    env0, tests0 = hashes()
    # The private truth is not part of the environment the agent gets.
    (folder / "environment" / "task.json").write_text('{"truth": "changed"}')
    assert hashes() == (env0, tests0)
    (folder / "tests" / "test_final_state.py").write_text("def test_other():\n    pass\n")
    env1, tests1 = hashes()
    assert env1 == env0 and tests1 != tests0
    (folder / "environment" / "data" / "a.txt").write_text("changed\n")
    env2, tests2 = hashes()
    assert env2 != env1 and tests2 == tests1
