"""Tasks in the store: import, list, show, datasets and load errors, on a real SQLite file, read
back through a viewer's read-only connection."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from engine.tasks.loader import datasets_of, load_task, load_tasks
from store import tasks as task_store
from store.db import Store, open_reader
from tests.conftest import ROOT

FORMATS = ROOT / "tests" / "fixtures" / "tasks" / "formats"
BROKEN = ROOT / "tests" / "fixtures" / "tasks" / "broken"


def import_into(store: Store, paths: list[Path]) -> tuple[list, list]:
    tasks, errors = load_tasks(paths)
    infos, _ = datasets_of(tasks)
    for info in infos:
        task_store.upsert_dataset(store, info.name, info.path, title=info.title, group=info.group)
    for task in tasks:
        task_store.upsert_task(store, task)
    for error in errors:
        if error.folder is not None:
            task_store.record_task_error(store, error.folder, error.folder.parent.name, str(error))
    return tasks, errors


def test_round_trip_through_a_read_only_connection(db_path: Path):
    with Store(db_path) as store:
        tasks, errors = import_into(store, [FORMATS, BROKEN])
    reader = open_reader(db_path)
    try:
        rows = task_store.list_tasks(reader)
        assert [r["id"] for r in rows] == sorted(t.id for t in tasks)
        steps = next(r for r in rows if r["id"] == "formats/harbor-steps")
        assert (steps["segments"], steps["work"], steps["format"]) == (3, 6, "harbor")
        assert steps["verifier_kind"] == "harbor" and steps["warnings"] == []
        assert task_store.list_tasks(reader, "broken") == []

        shown = task_store.get_task(reader, "harbor-steps")  # a unique folder name is enough
        assert shown is not None and shown["id"] == "formats/harbor-steps"
        assert shown["task"]["reward_strategy"] == "final"
        assert shown["task"]["segments"][1]["min_reward"] == {"reward": 0.5, "style": 1.0}
        assert shown["task"]["work"] == 6
        segs = shown["segment_rows"]
        assert [s["name"] for s in segs] == ["create", "extend", "finish"]
        assert [s["work"] for s in segs] == [1, 2, 3]
        assert segs[1]["limits"]["verifier_timeout_sec"] == 30.0
        assert segs[1]["limits"]["healthcheck"]["command"] == "test -f /home/user/state.txt"
        # Test texts are kept for display; the step's own file wins over the shared one.
        assert "def test_extend" in segs[1]["tests"]["test_outputs.py"]
        assert "def test_shared" in segs[0]["tests"]["test_outputs.py"]
        assert segs[2]["solution"].startswith("#!/bin/bash")

        native = task_store.get_task(reader, "formats/task_000000_deadbeef")
        assert native is not None and native["work"] is None
        assert native["task"]["environment"]["dockerfile_text"].startswith("# Generated")
        assert native["task"]["environment"]["context_dir"] == str(FORMATS / "task_000000_deadbeef")
        json.dumps(native)  # the whole record is plain JSON

        by_name = {d["name"]: d for d in task_store.datasets(reader)}
        assert by_name["formats"]["group"] == "synthetic"
        assert by_name["formats"]["title"] == "Format samples"
        assert by_name["formats"]["tasks"] == len(tasks)
        assert by_name["broken"]["tasks"] == 0
        assert by_name["broken"]["errors"] == len([e for e in errors if e.folder is not None])
        recorded = task_store.task_errors(reader, "broken")
        assert {Path(r["path"]).name for r in recorded} == {
            p.name for p in BROKEN.iterdir() if p.is_dir()
        }
        bad = next(r for r in recorded if r["path"].endswith("bad-toml"))
        assert "line 5, column 15" in bad["message"]
    finally:
        reader.close()


def test_get_task_by_id_suffix_and_ambiguity(db_path: Path, tmp_path: Path):
    for dataset in ("one", "two"):
        shutil.copytree(FORMATS / "harbor-single", tmp_path / dataset / "harbor-single")
    shutil.copytree(FORMATS / "harbor-steps", tmp_path / "two" / "harbor_steps")
    with Store(db_path) as store:
        import_into(store, [tmp_path / "one", tmp_path / "two"])
        assert task_store.get_task(store, "one/harbor-single")["id"] == "one/harbor-single"
        assert task_store.get_task(store, "harbor-single") is None  # two tasks have it
        assert task_store.find_task_ids(store, "harbor-single") == [
            "one/harbor-single",
            "two/harbor-single",
        ]
        # `_` is a LIKE wildcard: it must match itself only.
        assert task_store.find_task_ids(store, "harbor_steps") == ["two/harbor_steps"]
        assert task_store.find_task_ids(store, "harbor-steps") == []
        assert task_store.get_task(store, "nothing") is None


def test_reimport_replaces_and_a_fixed_folder_clears_its_error(db_path: Path, tmp_path: Path):
    folder = tmp_path / "mine" / "harbor-steps"
    shutil.copytree(FORMATS / "harbor-steps", folder)
    broken_instruction = folder / "steps" / "finish" / "instruction.md"
    text = broken_instruction.read_text()
    broken_instruction.unlink()
    with Store(db_path) as store:
        tasks, errors = import_into(store, [folder])
        assert tasks == [] and len(errors) == 1
        assert len(task_store.task_errors(store)) == 1

        broken_instruction.write_text(text)
        tasks, errors = import_into(store, [folder])
        assert len(tasks) == 1 and errors == []
        assert task_store.task_errors(store) == []
        first_hash = task_store.get_task(store, "mine/harbor-steps")["content_hash"]

        # Drop a step: the row and its segments are replaced, not added to.
        toml = folder / "task.toml"
        toml.write_text(toml.read_text().split('[[steps]]\nname = "finish"')[0])
        import_into(store, [folder])
        row = task_store.get_task(store, "mine/harbor-steps")
        assert row["segments"] == 2 and len(row["segment_rows"]) == 2
        assert row["content_hash"] != first_hash
        assert row["work"] == 3
        count = store.query("SELECT count(*) FROM segments")[0][0]
        assert count == 2


def test_task_record_is_plain_json():
    task = load_task(FORMATS / "harbor-single")
    record = task_store.task_record(task)
    again = json.loads(json.dumps(record))
    assert again == record
    assert record["source_path"] == str(FORMATS / "harbor-single")
    assert record["segments"][0]["tests"]["test.sh"].endswith("tests/test.sh")
    assert record["environment"]["healthcheck"]["retries"] == 2
    assert record["work"] == 1 and record["segments"][0]["work"] == 1
