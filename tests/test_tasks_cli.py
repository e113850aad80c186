"""`depthtui tasks import|list|show`, run as a user runs it: the installed console script, a
real SQLite file chosen with --db or $DEPTHTUI_DB."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

DEPTHTUI = str(Path(sys.executable).parent / "depthtui")
FIXTURES = ROOT / "tests" / "fixtures" / "tasks"


def run(*args: str, db: Path | None = None, env_db: Path | None = None):
    env = {k: v for k, v in os.environ.items() if k != "DEPTHTUI_DB"}
    env["COLUMNS"] = "200"
    if env_db is not None:
        env["DEPTHTUI_DB"] = str(env_db)
    argv = [DEPTHTUI, "tasks", *args] + (["--db", str(db)] if db is not None else [])
    return subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def test_import_list_show_round_trip(db_path: Path):
    out = run("import", str(FIXTURES / "formats"), str(FIXTURES / "broken"), db=db_path)
    assert out.returncode == 0, out.stderr
    n_formats = len([p for p in (FIXTURES / "formats").iterdir() if p.is_dir()])
    n_broken = len([p for p in (FIXTURES / "broken").iterdir() if p.is_dir()])
    assert f"Imported {n_formats} task(s) from 1 dataset(s); {n_broken} failed" in " ".join(
        out.stdout.split()
    )
    # Each broken folder is listed with its reason.
    assert out.stderr.count("✗") == n_broken
    assert "tests/fixtures/tasks/broken/bad-toml/task.toml: not valid TOML" in out.stderr
    assert "field 'steps[1]'" in out.stderr

    listed = run("list", "--json", db=db_path)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert len(rows) == n_formats
    steps = next(r for r in rows if r["id"] == "formats/harbor-steps")
    assert {k: steps[k] for k in ("dataset", "segments", "work")} == {
        "dataset": "formats",
        "segments": 3,
        "work": 6,
    }

    table = run("list", "--dataset", "formats", db=db_path)
    assert table.returncode == 0, table.stderr
    line = next(x for x in table.stdout.splitlines() if x.startswith("formats/harbor-steps"))
    assert line.split() == ["formats/harbor-steps", "formats", "harbor", "3", "6", "harbor"]
    native = next(x for x in table.stdout.splitlines() if "deadbeef" in x)
    assert native.split()[2:5] == ["endless-native", "1", "?"]
    assert f"{n_broken} folder(s) failed to load" not in table.stdout  # none in this dataset
    assert "formats (synthetic)" in table.stdout

    shown = run("show", "harbor-steps", db=db_path)
    assert shown.returncode == 0, shown.stderr
    for words in [
        "formats/harbor-steps",
        "segment 2/3: extend",
        "min_reward {'reward': 0.5, 'style': 1.0}",
        "healthcheck `test -f /home/user/state.txt`",
        "Step extend: see ~/state.txt.",
        "reward strategy final",
    ]:
        assert words in shown.stdout, words

    doc = json.loads(run("show", "formats/task_000000_deadbeef", "--json", db=db_path).stdout)
    assert doc["format"] == "endless-native" and doc["work"] is None
    assert doc["segment_rows"][0]["tests"]["test_final_state.py"].startswith("from pathlib")


def test_import_with_nothing_loadable_exits_1(tmp_path: Path):
    db = tmp_path / "x.db"
    out = run("import", str(FIXTURES / "broken" / "bad-toml"), str(tmp_path / "none"), db=db)
    assert out.returncode == 1
    assert "bad-toml" in out.stderr and "does not exist" in out.stderr
    assert "Imported 0 task(s)" in out.stdout


def test_import_json_and_env_var_store(tmp_path: Path):
    db = tmp_path / "env.db"
    out = run("import", "--json", str(FIXTURES / "formats" / "harbor-old"), env_db=db)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["loaded"] == ["formats/harbor-old"] and doc["failed"] == []
    assert doc["store"] == str(db)
    assert any("unknown keys ignored" in w for w in doc["warnings"]["formats/harbor-old"])
    assert json.loads(run("list", "--json", env_db=db).stdout)[0]["id"] == "formats/harbor-old"


def test_clear_errors_for_unknown_ids_datasets_and_stores(tmp_path: Path):
    db = tmp_path / "s.db"
    missing = run("list", db=db)
    assert missing.returncode == 1 and "no store here yet" in missing.stderr
    run("import", str(FIXTURES / "formats"), db=db)
    unknown = run("show", "nope", db=db)
    assert unknown.returncode == 1 and "no task 'nope'" in unknown.stderr
    bad_dataset = run("list", "--dataset", "nope", db=db)
    assert bad_dataset.returncode == 1
    assert "no dataset 'nope' in the store (datasets: formats)" in bad_dataset.stderr


def test_help_texts_explain_each_verb():
    out = run("--help")
    assert out.returncode == 0
    for verb in ("import", "list", "show"):
        assert verb in out.stdout
    assert "--dataset" in run("list", "--help").stdout
    assert "dataset.toml" in " ".join(run("import", "--help").stdout.split())
