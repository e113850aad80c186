"""`depthtui review TASKS -m JUDGE` (engine/judges/): the real CLI, a real SQLite file and a
scripted judge on loopback speaking OpenAI chat-completions.

The judge reads tests/fixtures/falsepos/line-count (its tests only count lines) and cites one
real line (kept), one line past the end of the file (dropped, saying why) and a quote that is
not on its line (dropped). The review is stored with the prompt's hash, its seed and its cost; a
rerun reuses it; --max-cost stops new calls; an endpoint error is an infrastructure error (exit
1, asked again next time)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from devtools.scripted_server import ScriptedReply, ScriptedServer, text
from tests.conftest import ROOT
from tests.fixtures_measure import endless, rows, run_cli, write_models

TASK = ROOT / "tests" / "fixtures" / "falsepos" / "line-count"
TESTS = "tests/test_final_state.py"
WEAK = "len(OUT.read_text().splitlines()) == 5"


def judge(body: dict[str, Any]) -> ScriptedReply:
    """Cites the line of the task's tests that holds WEAK, as the user message numbers it."""
    shown = body["messages"][1]["content"]
    section = shown.split(f"=== {TESTS} ")[1].split("\n=== ")[0]
    line = next(int(m.group(1)) for m in re.finditer(r"^ *(\d+)\| (.*)$", section, re.M)
                if WEAK in m.group(2))  # fmt: skip
    findings = [
        {"category": "presence_only_tests", "file": TESTS, "line": line, "quote": WEAK,
         "says": "only the line count is checked"},
        {"category": "presence_only_tests", "file": TESTS, "line": 99, "says": "made up"},
        {"category": "hardcoded_solution", "file": "solution/solve.sh", "line": 2,
         "quote": "echo 42", "says": "misquoted"},
    ]  # fmt: skip
    return text("```json\n" + json.dumps({"findings": findings}) + "\n```")


def test_review_keeps_findings_whose_lines_exist_and_says_why_others_drop(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with ScriptedServer(endless(judge), models=("judge-model",)) as server:
        models = write_models(tmp_path / "models.toml", server, {"judge": "judge-model"}, (1, 2))
        args = ["review", str(TASK), "-m", "judge", "--models", str(models), "--json"]
        first = run_cli(args, db)
        assert first.returncode == 0, first.stderr[-2000:]
        (row,) = first.json()
        again = run_cli(args, db)
        asked = len([r for r in server.requests if r.path.endswith("/chat/completions")])
        sent = server.requests[-1].body
    assert row["status"] == "done" and row["reused"] is False
    (kept,) = row["findings"]
    assert kept["category"] == "presence_only_tests" and kept["file"] == TESTS
    source = (TASK / TESTS).read_text().splitlines()
    assert WEAK in source[kept["line"] - 1]  # the cited line exists and says it
    whys = sorted(d["dropped"] for d in row["dropped"])
    n = len(source)
    assert whys == [
        f"cites {TESTS}:99, which does not exist ({TESTS} has {n} lines)",
        "quotes 'echo 42', which is not on solution/solve.sh:2",
    ]
    # Judge cost counted (the registry's price), a seed per call, no tools offered.
    assert row["cost_usd"] > 0 and isinstance(row["seed"], int)
    assert sent["seed"] == row["seed"] and "tools" not in sent
    # The rerun reused the stored review: one request in all.
    assert again.returncode == 0 and again.json()[0]["reused"] is True and asked == 1
    (stored,) = rows(db, "SELECT * FROM reviews")
    prompt = (ROOT / "prompts" / "review.md").read_text()
    assert stored["prompt_hash"] == hashlib.sha256(prompt.encode()).hexdigest()
    assert json.loads(stored["findings_json"]) == [kept]
    # The report's verifier audit counts the judge's findings, said as the judge's.
    report = run_cli(["report", "--json"], db).json()
    (audit,) = report["verifier"]
    assert audit["review_findings"] == {"presence_only_tests": 1}
    assert "the judge says: presence_only_tests 1" in run_cli(["report"], db).stdout


def test_max_cost_and_endpoint_errors(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    refuse = ScriptedReply(status=401, error_message="bad key")
    with ScriptedServer(endless(refuse), models=("judge-model",)) as server:
        models = write_models(tmp_path / "models.toml", server, {"judge": "judge-model"})
        args = ["review", str(TASK), "-m", "judge", "--models", str(models), "--json"]
        broken = run_cli(args, db)
        # --max-cost 0: nothing spent yet is still "reached": no call starts.
        capped = run_cli([*args, "--max-cost", "0"], db)
        asked = len(server.requests)
    assert broken.returncode == 1, broken.stderr[-2000:]
    (row,) = broken.json()
    assert row["status"] == "infra_error" and row["findings"] == [] and "401" in row["error"]
    assert capped.json()[0]["status"] == "skipped" and asked == 1
    # An infrastructure error is no review: the next run asks again, and keeps the answer.
    with ScriptedServer(endless(judge), models=("judge-model",)) as server:
        models = write_models(tmp_path / "models.toml", server, {"judge": "judge-model"})
        fixed = run_cli(["review", str(TASK), "-m", "judge", "--models", str(models)], db)
    assert fixed.returncode == 0, fixed.stderr[-2000:]
    assert "presence_only_tests" in fixed.stdout and "the judge says" in fixed.stdout
    assert [r["status"] for r in rows(db, "SELECT status FROM reviews")] == ["done"]


def test_task_detail_shows_the_judges_findings_as_theirs() -> None:
    from rich.console import Console

    from depthtui.screens.task_detail import review_view

    review = {
        "judge": "judge",
        "status": "done",
        "findings": [
            {"category": "answer_exposed", "file": "environment/Dockerfile", "line": 3,
             "says": "the answer is copied in"},
        ],
        "dropped": [{"dropped": "cites x:9, which does not exist"}],
    }  # fmt: skip
    console = Console(width=200, record=True)
    console.print(review_view([review, {**review, "status": "infra_error", "findings": []}]))
    shown = console.export_text()
    assert "their words, not a verdict" in shown
    assert "answer_exposed" in shown and "environment/Dockerfile:3" in shown
    assert "1 finding(s) dropped" in shown and shown.count("answer_exposed") == 1


LEAKY = ROOT / "tests" / "fixtures" / "falsepos" / "leaky-answer"


def leak_judge(body: dict[str, Any]) -> ScriptedReply:
    """Cites the environment's line that writes the answer, as the user message numbers it."""
    shown = body["messages"][1]["content"]
    section = shown.split("=== environment/Dockerfile ")[1].split("\n=== ")[0]
    line = next(int(m.group(1)) for m in re.finditer(r"^ *(\d+)\| (.*)$", section, re.M)
                if ".expected_total" in m.group(2))  # fmt: skip
    finding = {
        "category": "answer_exposed",
        "file": "environment/Dockerfile",
        "line": line,
        "quote": "echo 12 > /home/user/.expected_total",
        "says": "the answer is in the home",
    }
    return text(json.dumps({"findings": [finding]}))


def test_review_reads_the_environment_and_cites_a_leaked_answer(tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    with ScriptedServer(endless(leak_judge), models=("judge-model",)) as server:
        models = write_models(tmp_path / "models.toml", server, {"judge": "judge-model"})
        done = run_cli(["review", str(LEAKY), "-m", "judge", "--models", str(models), "--json"], db)
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = done.json()
    (finding,) = row["findings"]
    assert (finding["category"], finding["file"]) == ("answer_exposed", "environment/Dockerfile")
    dockerfile = (LEAKY / "environment" / "Dockerfile").read_text().splitlines()
    assert ".expected_total" in dockerfile[finding["line"] - 1] and row["dropped"] == []


def test_a_long_transcript_is_cut_and_findings_on_unshown_turns_say_so(tmp_path: Path) -> None:
    from engine.judges import analyze
    from store.db import Store, now

    store = Store(tmp_path / "t.db")
    with store.tx() as conn:
        eid = conn.execute(
            "INSERT INTO episodes (run_key, task_id, task_hash, mode, agent, status, outcome, "
            "passed, started_at) VALUES ('k', 't/x', 'h', 'free', 'm', 'done', 'pass', 1, ?)",
            (now(),),
        ).lastrowid
        for i in range(1, 400):
            conn.execute(
                "INSERT INTO turns (episode_id, idx, text, created_at) VALUES (?, ?, ?, ?)",
                (eid, i, f"turn {i} " + "x" * 1000, now()),
            )
    tr = analyze.transcript(store.conn, eid)
    store.close()
    assert tr is not None and len(tr.text) < analyze.TEXT_MAX + 5000
    assert "are not shown: the transcript is too long" in tr.text
    cut = max(tr.turns) + 1
    checked = analyze.check(
        [
            {"category": "tests_read", "turn": 3, "quote": "turn 3 xx"},
            {"category": "tests_read", "turn": cut},
            {"category": "tests_read", "turn": 900},
        ],
        tr,
    )
    assert [f["turn"] for f in checked.kept] == [3]
    assert [d["dropped"] for d in checked.dropped] == [
        f"cites turn {cut}, which the judge was not shown (the transcript was cut)",
        "cites turn 900, which the episode does not have (399 turns)",
    ]
