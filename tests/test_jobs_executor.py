"""The executor seam's small parts, without a cluster: the choice of executor, a node's copy of a
task it lacks (engine/jobs/ray_executor.py), the key variable a Ray task gets, and the recorder
replay that applies a node's records to the store."""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import pytest

from engine.agents.registry import ModelConfig
from engine.jobs.executor import ExecutorChoice, make_executor
from engine.jobs.ray_executor import key_environment, node_task
from engine.protocol.episode import LOCAL
from engine.protocol.execute import EpisodeWork, StoreRecorder, apply_record
from engine.protocol.spec import EpisodeSpec
from engine.tasks.loader import load_task
from store.db import Store
from store.queue import claim_episode
from tests.conftest import DEMO


def test_the_executor_choice_names_what_is_wrong() -> None:
    assert make_executor(ExecutorChoice()) is LOCAL
    assert ExecutorChoice("ray", "h:6379").argv() == [
        "--executor",
        "ray",
        "--ray-address",
        "h:6379",
    ]
    with pytest.raises(ValueError, match="expected one of local, ray, got 'dask'"):
        ExecutorChoice("dask")
    with pytest.raises(ValueError, match="--ray-address: only with --executor ray"):
        ExecutorChoice("local", "h:6379")


def _tar(folder: Path) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(folder, arcname=folder.name)
    return buf.getvalue()


def test_a_node_without_the_task_folder_unpacks_the_drivers_copy(tmp_path: Path) -> None:
    source = tmp_path / "driver" / "demo" / "error-count"
    shutil.copytree(DEMO / "error-count", source)
    task = load_task(source)
    archive = _tar(source)
    shutil.rmtree(source)  # the node does not have it
    fetched: list[int] = []

    def fetch() -> bytes:
        fetched.append(1)
        return archive

    got = node_task(task, fetch, cache=tmp_path / "cache")
    assert (got.id, got.dataset, got.content_hash) == (task.id, task.dataset, task.content_hash)
    assert got.source_path.is_relative_to(tmp_path / "cache" / "ray-tasks" / task.content_hash)
    assert node_task(task, fetch, cache=tmp_path / "cache").source_path == got.source_path
    assert fetched == [1]  # unpacked once, then reused
    # A node that has the folder at the same path with the same content uses it as it is.
    here = load_task(DEMO / "error-count")
    assert node_task(here, fetch, cache=tmp_path / "cache") is here


def _work(model: ModelConfig) -> EpisodeWork:
    task = load_task(DEMO / "error-count")
    spec = EpisodeSpec(task.id, task.content_hash, "free", model.name)
    return EpisodeWork(task, spec, model, "prompt", 1, None, Path("/tmp"))


def test_a_ray_task_gets_only_the_key_variable_the_model_names(monkeypatch) -> None:
    monkeypatch.setenv("ALPHA_KEY", "sk-test")
    monkeypatch.setenv("OTHER_SECRET", "nope")
    assert key_environment(_work(ModelConfig(name="a", api_key_env="ALPHA_KEY"))) == {
        "ALPHA_KEY": "sk-test"
    }
    assert key_environment(_work(ModelConfig(name="a", api_key_env="UNSET_KEY_X"))) == {}
    assert key_environment(_work(ModelConfig(name="a"))) == {}


def test_forwarded_records_are_applied_to_the_store_and_nothing_else(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        fields = {"task_id": "t", "task_hash": "h", "mode": "free", "agent": "a"}
        claim = claim_episode(store, "key", "me", fields)
        rec = StoreRecorder(store, claim.episode_id, "me")
        apply_record(rec, "update_running", (), {"container_id": "abc"})
        apply_record(rec, "interrupt", ("node lost",), {})
        row = store.query("SELECT status, container_id, error_detail FROM episodes")[0]
        assert (row["status"], row["container_id"], row["error_detail"]) == (
            "interrupted", "abc", "node lost",
        )  # fmt: skip
        with pytest.raises(ValueError, match="not a recorder method: 'close'"):
            apply_record(rec, "close", (), {})


def test_bench_engine_on_ray_without_the_ray_extra_says_what_to_install(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    # A Python where `import ray` fails as it does without the extra installed.
    (tmp_path / "ray.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'ray'\", name='ray')\n"
    )
    path = os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "depthtui", "bench", "engine", "--executor", "ray", "--tasks", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "PYTHONPATH": path, "COLUMNS": "200"},
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "--executor ray needs Ray: pip install 'depthtui[ray]'" in done.stderr
