"""What one reply may cost and what the harness owns, through the console script on real Docker
with the scripted OpenAI-compatible server on loopback (docs/work-and-turns.md):

- a reply of 200 calls printing 1 MB each runs 32 of them, keeps 32 KiB + 32 KiB of each, and
  grows the store by a few MB (it grew by ~1 GB for 1,000 such calls before the bounds);
- bash's `line N:` of the harness's framing never reaches the model, the raw output keeps it;
- a reply cut at the room the harness left in the context is recorded as the harness's, not a
  format error, and the run ends `context_length` with the reason stored and shown;
- `report --json` gives tokens per model, and "no price" for a model without one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from depthtui.widgets.turn_view import turn_header
from depthtui.widgets.verdict_strip import strip_text, verdict_facts
from devtools.scripted_server import ScriptedReply, ScriptedServer, calls, error, text
from engine.agents.actions import CALLS_PER_REPLY
from engine.sandbox.output import HEAD_BYTES, TAIL_BYTES
from store import views
from store.db import open_reader
from tests.conftest import DEMO
from tests.fixtures_measure import cleanup, leftovers, reply_number, rows, run_cli

pytestmark = [pytest.mark.docker, pytest.mark.slow]

FLOOD_CALLS = 200
MB = 1_000_000
FLOOD = f"head -c {MB} /dev/zero | tr '\\0' a"
MISSING = "start.sh"
SOLVE = (
    "mkdir -p /home/user/reports && awk '$3 == \"ERROR\"' /home/user/logs/app.log "
    "| wc -l > /home/user/reports/error_count.txt"
)
PARTIAL_MARKUP = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls -'
CACHED = {"prompt_tokens_details": {"cached_tokens": 300}}


REFUSAL = "This model's maximum context length is 1024 tokens. However, you requested 1500 tokens."


def policy(body: dict[str, Any]) -> ScriptedReply:
    n = reply_number(body)
    if body["model"] == "refusing-model":
        return calls("ls") if n == 1 else error(400, REFUSAL)
    if body["model"] == "flood-model":
        script = [
            calls(*[FLOOD] * FLOOD_CALLS, content="Printing a lot."),
            calls(MISSING),
            calls(SOLVE),
            text("Done."),
        ]
        return script[min(n, len(script)) - 1]
    # "tight": a 1,000-token context; the second reply gets the 50 tokens left and uses them.
    if n == 1:
        return calls("ls", usage={"prompt_tokens": 900, "completion_tokens": 50, **CACHED})
    return ScriptedReply(
        content=PARTIAL_MARKUP,
        finish_reason="length",
        usage={"prompt_tokens": 950, "completion_tokens": 50, **CACHED},
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("loop")
    db = work / "depthtui.db"
    owners: list[str] = []
    served = ("flood-model", "tight-model", "refusing-model")
    with ScriptedServer([policy] * 20, models=served) as server:
        models = work / "models.toml"
        models.write_text(
            f'[models.flood]\nbase_url = "{server.base_url}"\nmodel = "flood-model"\n\n'
            f'[models.tight]\nbase_url = "{server.base_url}"\nmodel = "tight-model"\n'
            "max_total_tokens = 1000\n"
            "[models.tight.price]\nprompt_usd_per_mtok = 1.0\ncompletion_usd_per_mtok = 2.0\n\n"
            f'[models.refusing]\nbase_url = "{server.base_url}"\nmodel = "refusing-model"\n'
        )
        base = ["free", str(DEMO / "error-count"), "--attempts", "1", "--models", str(models)]
        try:
            # The store exists with the task in it before the flood, so the growth is the run's.
            tight = run_cli([*base, "-m", "tight"], db, owners=owners)
            refusing = run_cli([*base, "-m", "refusing"], db, owners=owners)
            size_before = _size(db)
            flood = run_cli([*base, "-m", "flood"], db, owners=owners)
            size_after = _size(db)
        finally:
            cleanup(owners)
        requests = [r.body for r in server.chat_requests]
    assert tight.returncode == 0, tight.stderr[-3000:]
    assert refusing.returncode == 0, refusing.stderr[-3000:]
    assert flood.returncode == 0, flood.stderr[-3000:]
    return {
        "db": db,
        "growth": size_after - size_before,
        "requests": requests,
        "owners": owners,
    }


def _size(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))


def _episode(db: Path, agent: str) -> dict[str, Any]:
    [ep] = rows(db, "SELECT * FROM episodes WHERE agent = ?", (agent,))
    return ep


def test_a_reply_of_200_calls_of_a_megabyte_runs_32_and_grows_the_store_by_a_few_mb(runs) -> None:
    db = runs["db"]
    ep = _episode(db, "flood")
    calls_ = rows(db, "SELECT * FROM calls WHERE episode_id = ? ORDER BY idx", (ep["id"],))
    first = [c for c in calls_ if c["turn_idx"] == 1]
    assert len(first) == FLOOD_CALLS
    ran, refused = first[:CALLS_PER_REPLY], first[CALLS_PER_REPLY:]
    assert all(c["exit_code"] == 0 and c["output_bytes"] == MB for c in ran)
    assert all(c["not_run"] and c["note"] == "per_reply" for c in refused)
    assert all(c["command"] == FLOOD for c in refused)  # shorter than the 200 kept
    kept = rows(
        db,
        "SELECT length(o.data) AS n FROM call_outputs o JOIN calls c ON c.id = o.call_id "
        "WHERE c.episode_id = ?",
        (ep["id"],),
    )
    assert {k["n"] for k in kept if k["n"] > 1000} == {HEAD_BYTES + TAIL_BYTES}
    # The done-when of issue 24: at most 50 MB for the whole reply (32 x 64 KiB is 2 MiB).
    print(f"store growth for {FLOOD_CALLS} calls x 1 MB: {runs['growth'] / 2**20:.1f} MiB")
    assert runs["growth"] <= 50 * 2**20, runs["growth"]
    # The model was told, in one line, and the run went on to pass.
    second = next(r for r in runs["requests"] if r["model"] == "flood-model" and
                  sum(m["role"] == "assistant" for m in r["messages"]) == 1)  # fmt: skip
    told = [m["content"] for m in second["messages"] if m["role"] == "user"][1:]
    assert told == [
        f"[{FLOOD_CALLS - CALLS_PER_REPLY} command(s) of this reply were not run: at most "
        f"{CALLS_PER_REPLY} commands of one reply are run]"
    ]
    assert ep["outcome"] == "pass"


def test_the_framings_line_numbers_never_reach_the_model(runs) -> None:
    db = runs["db"]
    ep = _episode(db, "flood")
    [call] = rows(
        db, "SELECT * FROM calls WHERE episode_id = ? AND command = ?", (ep["id"], MISSING)
    )
    assert call["exit_code"] == 127
    # The raw output keeps what bash printed, line number of the framing and all...
    assert "bash: line " in call["output_head"], call["output_head"]
    # ...the model saw it as an interactive shell prints it.
    assert call["observation"].startswith(f"bash: {MISSING}: command not found")
    sent = [m["content"] for r in runs["requests"] for m in r["messages"] if m["role"] == "tool"]
    assert any(f"bash: {MISSING}: command not found" in s for s in sent)
    assert not any("bash: line " in s for s in sent)


def test_the_harnesss_own_cut_off_is_no_format_error_and_the_full_context_is_stated(runs) -> None:
    db = runs["db"]
    ep = _episode(db, "tight")
    turns = rows(db, "SELECT * FROM turns WHERE episode_id = ? ORDER BY idx", (ep["id"],))
    assert [t["cut_by_harness"] for t in turns] == [0, 1]
    assert [t["format_error"] for t in turns] == [None, None]
    assert ep["turns"] == 1 and ep["end_reason"] == "context_length"
    assert "50 token(s) left" in ep["end_detail"]
    shown = run_cli(["show", str(ep["id"])], db)
    assert shown.returncode == 0, shown.stderr
    assert "cut off by the harness (not counted)" in shown.stdout
    assert "[format error]" not in shown.stdout
    assert f"ended by context_length ({ep['end_detail']}" in " ".join(shown.stdout.split())
    doc = run_cli(["show", str(ep["id"]), "--json"], db).json()
    assert doc["episode"]["end_detail"] == ep["end_detail"]
    assert [t["cut_by_harness"] for t in doc["turns"]] == [False, True]
    # The TUI's verdict strip says it too, and the replay heads the reply as the harness's.
    conn = open_reader(db)
    try:
        info = views.episode(conn, ep["id"])
        facts = verdict_facts(info, (), (), None, None)
        cut = views.turn_detail(conn, ep["id"], 2)
    finally:
        conn.close()
    assert f"context full: {ep['end_detail']}" in strip_text(facts).plain
    assert cut is not None and cut.cut_by_harness
    assert turn_header(info, cut).plain.startswith("Cut off by the harness (not a turn)")


def test_a_prompt_the_server_refuses_ends_context_length_with_its_words_kept(runs) -> None:
    db = runs["db"]
    ep = _episode(db, "refusing")
    assert ep["end_reason"] == "context_length" and ep["error_kind"] is None
    assert ep["end_detail"] == REFUSAL
    shown = run_cli(["show", str(ep["id"])], db)
    assert shown.returncode == 0, shown.stderr
    assert f"ended by context_length ({REFUSAL})" in " ".join(shown.stdout.split())


def test_report_gives_tokens_per_model_and_no_price_without_one(runs) -> None:
    db = runs["db"]
    report = run_cli(["report", "--json"], db).json()
    spend = {r["model"]: r for r in report["spend"]}
    tight = _episode(db, "tight")
    assert spend["tight"]["runs"] == 1
    assert (
        spend["tight"]["prompt_tokens"],
        spend["tight"]["completion_tokens"],
        spend["tight"]["cached_tokens"],
    ) == (1850, 100, 600)
    assert spend["tight"]["cost_usd"] == pytest.approx(tight["cost_usd"]) and tight["cost_usd"] > 0
    flood = _episode(db, "flood")
    assert spend["flood"]["prompt_tokens"] == flood["prompt_tokens"] > 0
    assert spend["flood"]["cost_usd"] is None
    models = {m["model"]: m for m in report["models"]}
    assert models["flood"]["cost_usd"] is None
    table = run_cli(["report"], db)
    assert table.returncode == 0, table.stderr
    assert "Tokens per model" in table.stdout and "no price" in table.stdout
    assert "1,850" in table.stdout
    assert leftovers(runs["owners"]) == []
