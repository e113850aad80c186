"""Static checks of the bundled demo dataset (tasks/demo/): the files each task needs, task.toml
contents, what the Dockerfiles may and may not do, instructions that name real inputs, and the
spread of W. No Docker needed; the real-container checks of these tasks live with the engine."""

from __future__ import annotations

import ast
import json
import re
import shlex
import sys
import tomllib
from pathlib import Path, PurePosixPath

import pytest

from engine.tasks.model import count_work

DEMO = Path(__file__).resolve().parents[1] / "tasks" / "demo"
HOME = "/home/user"
BASE_IMAGE = "depthtui/base:bookworm"
SINGLE_FILES = (
    "task.toml",
    "instruction.md",
    "environment/Dockerfile",
    "environment/task.json",
    "tests/test_final_state.py",
    "tests/test.sh",
    "solution/solve.sh",
)
STEP_FILES = ("instruction.md", "tests/test.sh", "tests/test_state.py", "solution/solve.sh")
# Files the verifier or the oracle sees and the agent must never see.
PRIVATE_NAMES = {"task.json", "test_final_state.py", "test_initial_state.py", "solve.sh"}
# Commands that reach the network: a demo image must build and test offline.
NETWORK_WORDS = re.compile(r"\b(apt-get|apt|curl|wget|pip3?|uv|uvx|git clone|npm)\b")
# Calls through which a test could run or import agent-written code.
FORBIDDEN_CALLS = {
    "exec", "eval", "compile", "__import__", "system", "popen", "spawnl", "spawnv", "execv",
    "execl", "execvp", "import_module", "run_path", "run_module", "spec_from_file_location",
}  # fmt: skip
FORBIDDEN_MODULES = {"subprocess", "importlib", "runpy", "ctypes", "multiprocessing", "pty"}


def task_dirs() -> list[Path]:
    return sorted(p for p in DEMO.iterdir() if p.is_dir())


def config(task: Path) -> dict:
    return tomllib.loads((task / "task.toml").read_text())


def is_multi(task: Path) -> bool:
    return "steps" in config(task)


def single_tasks() -> list[Path]:
    return [t for t in task_dirs() if not is_multi(t)]


def multi_tasks() -> list[Path]:
    return [t for t in task_dirs() if is_multi(t)]


def step_names(task: Path) -> list[str]:
    return [step["name"] for step in config(task)["steps"]]


def solutions(task: Path) -> list[Path]:
    if is_multi(task):
        return [task / "steps" / name / "solution" / "solve.sh" for name in step_names(task)]
    return [task / "solution" / "solve.sh"]


def verifier_files(task: Path) -> list[Path]:
    if is_multi(task):
        return [task / "steps" / name / "tests" / "test_state.py" for name in step_names(task)]
    return [task / "tests" / "test_final_state.py"]


def task_work(task: Path) -> int:
    return sum(count_work(path.read_text()) for path in solutions(task))


def dockerfile_instructions(task: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = (task / "environment" / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            pairs.append((word.upper(), rest.strip()))
    return pairs


def provided_paths(task: Path) -> dict[str, Path]:
    """Path in the image -> file in the build context, for every file the Dockerfile COPYs."""
    context = task / "environment"
    provided: dict[str, Path] = {}
    for word, args in dockerfile_instructions(task):
        if word not in ("COPY", "ADD"):
            continue
        parts = [p for p in shlex.split(args) if not p.startswith("--")]
        *sources, dest = parts
        for source in sources:
            src = context / source
            if src.is_dir():
                for file in sorted(p for p in src.rglob("*") if p.is_file()):
                    provided[str(PurePosixPath(dest) / file.relative_to(src).as_posix())] = file
            elif dest.endswith("/"):
                provided[str(PurePosixPath(dest) / src.name)] = src
            else:
                provided[dest] = src
    return provided


def named_in(path: str, text: str) -> bool:
    """The instruction names an input by its full path, or by its exact base name (in backticks)
    together with a folder above it, so a fault injector and a reader can both find it."""
    if path in text:
        return True
    pure = PurePosixPath(path)
    return f"`{pure.name}`" in text and any(
        f"{parent}/" in text for parent in pure.parents if str(parent).startswith(HOME + "/")
    )


# --- the dataset as a whole -------------------------------------------------------------------


def test_dataset_toml():
    data = tomllib.loads((DEMO / "dataset.toml").read_text())
    assert data["name"] == "demo"
    assert data["group"] == "ours"
    assert data["description"].strip()


def test_enough_tasks_of_each_kind():
    assert len(single_tasks()) >= 10, (
        f"single-instruction tasks: {[t.name for t in single_tasks()]}"
    )
    multi = multi_tasks()
    assert len(multi) >= 3, f"multi-segment tasks: {[t.name for t in multi]}"
    for task in multi:
        assert len(step_names(task)) >= 3, f"{task.name} has fewer than 3 segments"


def test_work_spread():
    works = {task.name: task_work(task) for task in task_dirs()}
    assert min(works.values()) <= 5, f"no shallow task: {works}"
    assert max(works.values()) >= 30, f"no large task: {works}"


def test_readme_lists_every_task_with_its_work():
    readme = (DEMO / "README.md").read_text()
    for task in task_dirs():
        row = re.search(rf"^\| {re.escape(task.name)} \| (\d+) \| (\d+) \|", readme, re.M)
        assert row, f"README.md has no table row for {task.name}"
        segments = len(step_names(task)) if is_multi(task) else 1
        assert (int(row.group(1)), int(row.group(2))) == (segments, task_work(task)), (
            f"README.md row of {task.name} should say {segments} segment(s), W {task_work(task)}"
        )


def test_a_deep_task_draws_values_at_run_time():
    """At least one multi-segment task depends on a value nobody can know before it runs."""
    generators = [
        path
        for task in multi_tasks()
        for path in (task / "environment").rglob("*")
        if path.is_file() and "/dev/urandom" in path.read_text(errors="replace")
    ]
    assert generators, "no multi-segment task draws a value from /dev/urandom"


# --- every task ---------------------------------------------------------------------------------


@pytest.mark.parametrize("task", task_dirs(), ids=lambda p: p.name)
def test_required_files(task: Path):
    if is_multi(task):
        wanted = ["task.toml", "environment/Dockerfile"] + [
            f"steps/{name}/{file}" for name in step_names(task) for file in STEP_FILES
        ]
    else:
        wanted = list(SINGLE_FILES)
    missing = [name for name in wanted if not (task / name).is_file()]
    assert not missing, f"{task.name} lacks {missing}"


@pytest.mark.parametrize("task", task_dirs(), ids=lambda p: p.name)
def test_task_toml(task: Path):
    cfg = config(task)
    assert cfg["task"]["name"] == f"depthtui-demo/{task.name}"
    assert cfg["task"]["description"].strip()
    assert cfg["task"]["keywords"] and all(isinstance(k, str) for k in cfg["task"]["keywords"])
    assert cfg["metadata"]["difficulty"] in ("easy", "medium", "hard")
    assert cfg["metadata"]["category"].strip()
    assert cfg["agent"]["timeout_sec"] == 300
    assert cfg["verifier"]["timeout_sec"] == 300
    env = cfg["environment"]
    assert (env["build_timeout_sec"], env["cpus"], env["memory_mb"]) == (600, 1, 2048)
    assert env["workdir"] == HOME


@pytest.mark.parametrize("task", multi_tasks(), ids=lambda p: p.name)
def test_steps_toml(task: Path):
    cfg = config(task)
    assert cfg["multi_step_reward_strategy"] in ("mean", "final")
    assert cfg["agent"]["user"] == "user"
    names = step_names(task)
    assert len(set(names)) == len(names), f"{task.name}: step names repeat: {names}"
    on_disk = sorted(p.name for p in (task / "steps").iterdir() if p.is_dir())
    assert on_disk == sorted(names), f"{task.name}: steps/ holds {on_disk}, task.toml names {names}"
    for step in cfg["steps"]:
        if "min_reward" in step:
            assert isinstance(step["min_reward"], float), f"{task.name}: min_reward must be a float"


@pytest.mark.parametrize("task", task_dirs(), ids=lambda p: p.name)
def test_dockerfile_is_offline_and_keeps_private_files_out(task: Path):
    instructions = dockerfile_instructions(task)
    assert instructions[0] == ("FROM", BASE_IMAGE), f"{task.name}: must build FROM {BASE_IMAGE}"
    assert ("RUN", "chown -R 1000:1000 /home/user") in instructions
    assert ("WORKDIR", HOME) in instructions
    assert "USER" not in [word for word, _ in instructions]
    for word, args in instructions:
        assert word in ("FROM", "COPY", "RUN", "WORKDIR", "ENV"), f"{task.name}: unexpected {word}"
        if word == "RUN":
            assert not NETWORK_WORDS.search(args), f"{task.name}: RUN needs the network: {args}"
    provided = provided_paths(task)
    assert provided, f"{task.name}: the Dockerfile copies no input files"
    context = (task / "environment").resolve()
    for image_path, source in provided.items():
        # tests/ and solution/ sit beside environment/: a source outside the context is one of them.
        assert source.resolve().is_relative_to(context), f"{task.name}: COPY reaches out: {source}"
        assert source.name not in PRIVATE_NAMES, (
            f"{task.name}: {source.name} must not enter the image"
        )
        assert image_path.startswith(HOME + "/"), f"{task.name}: {image_path} is outside {HOME}"


@pytest.mark.parametrize("task", task_dirs(), ids=lambda p: p.name)
def test_task_json_is_private_and_well_formed(task: Path):
    data = json.loads((task / "environment" / "task.json").read_text())
    assert isinstance(data.get("description"), str) and data["description"].strip()
    assert isinstance(data.get("truth"), str) and data["truth"].strip()


@pytest.mark.parametrize("task", single_tasks(), ids=lambda p: p.name)
def test_instruction_names_an_input_the_image_provides(task: Path):
    instruction = (task / "instruction.md").read_text()
    named = [path for path in provided_paths(task) if named_in(path, instruction)]
    assert named, f"{task.name}: the instruction names no input file under {HOME}"


@pytest.mark.parametrize("task", multi_tasks(), ids=lambda p: p.name)
def test_step_instructions_name_paths_under_home(task: Path):
    for name in step_names(task):
        text = (task / "steps" / name / "instruction.md").read_text()
        assert f"{HOME}/" in text, f"{task.name}/{name}: the instruction names no path under {HOME}"


@pytest.mark.parametrize("task", task_dirs(), ids=lambda p: p.name)
def test_test_sh_is_offline_and_writes_the_reward(task: Path):
    scripts = (
        [task / "steps" / n / "tests" / "test.sh" for n in step_names(task)]
        if is_multi(task)
        else [task / "tests" / "test.sh"]
    )
    for script, tests in zip(scripts, verifier_files(task), strict=True):
        text = script.read_text()
        assert text.startswith("#!/bin/bash\n"), f"{script}: needs a bash shebang"
        assert f"/tests/{tests.name}" in text, f"{script}: does not run {tests.name}"
        assert "/logs/verifier/reward.txt" in text, f"{script}: does not write reward.txt"
        assert not NETWORK_WORDS.search(text), f"{script}: reaches for the network"


@pytest.mark.parametrize("task", task_dirs(), ids=lambda p: p.name)
def test_solutions_are_bash_and_executable(task: Path):
    for solve in solutions(task):
        assert solve.read_text().startswith("#!/bin/bash\n"), f"{solve}: needs a bash shebang"
        assert solve.stat().st_mode & 0o100, f"{solve}: is not executable"
        assert count_work(solve.read_text()) >= 1


@pytest.mark.parametrize("task", task_dirs(), ids=lambda p: p.name)
def test_tests_only_read_files(task: Path):
    """A verifier that imports or runs agent-written code can be forged by the agent."""
    allowed = set(sys.stdlib_module_names) - FORBIDDEN_MODULES | {"pytest"}
    for path in verifier_files(task):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                names = []
            for name in names:
                assert name.split(".")[0] in allowed, f"{path}:{node.lineno}: imports {name}"
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                assert called not in FORBIDDEN_CALLS, f"{path}:{node.lineno}: calls {called}()"
