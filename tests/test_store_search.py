"""Transcript search over FTS5: whatever the user types is searched for, never parsed as query
syntax, and commands full of shell metacharacters are found."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import episodes as ep
from store.db import Store, open_reader
from store.search import fts_query, search

COMMANDS = [
    "rm -rf /tmp/x",
    "echo \"it's done\" | tee 'out file.txt'",
    "cp $(ls *.csv | head -1) backup/ && wc -l < data.csv",
    "grep -E '^(ERROR|FATAL):' app.log > errors.txt; sort -u errors.txt",
    "find . -name '*.bak' -exec rm {} \\;",
]


@pytest.fixture
def store_with_calls(db_path: Path):
    with Store(db_path) as store:
        eid = ep.create_episode(
            store, run_key="k", task_id="demo/t", task_hash="h", mode="free", agent="m"
        )
        ep.record_turn(
            store,
            eid,
            {"idx": 1, "text": 'I will clean up "old" files (carefully) first.'},
            [{"idx": i + 1, "command": c, "exit_code": 0} for i, c in enumerate(COMMANDS)],
            outputs={3: b"cp: cannot stat 'x.csv': No such file or directory\n"},
        )
        yield store, eid


def refs(rows: list[dict]) -> set[tuple[str, int]]:
    return {(r["kind"], r["turn_idx"]) for r in rows}


def test_fts_query_quotes_every_term():
    assert fts_query("rm -rf /tmp/x") == '"rm" "-rf" "/tmp/x"'
    assert fts_query('say "hi"') == '"say" """hi"""'
    assert fts_query("a:b NEAR(x y) OR *") == '"a:b" "NEAR(x" "y)" "OR"'
    assert fts_query("  | $( ") == ""


@pytest.mark.parametrize(
    ("query", "command_index"),
    [
        ("rm -rf /tmp/x", 0),
        ("rm -rf", 0),
        ('"it\'s done"', 1),
        ("'out file.txt'", 1),
        ("$(ls *.csv", 2),
        ("wc -l < data.csv", 2),
        ("^(ERROR|FATAL):", 3),
        ("sort -u", 3),
        ("-exec rm {} \\;", 4),
        ("'*.bak'", 4),
    ],
)
def test_commands_with_metacharacters_are_found(store_with_calls, query, command_index):
    store, eid = store_with_calls
    calls = ep.list_calls(store, eid)
    rows = search(store, query)
    assert calls[command_index]["id"] in {r["ref_id"] for r in rows if r["kind"] == "call"}
    hit = next(r for r in rows if r["ref_id"] == calls[command_index]["id"])
    assert hit["episode_id"] == eid and hit["turn_idx"] == 1
    assert "«" in hit["snippet"] and "»" in hit["snippet"]


@pytest.mark.parametrize(
    "query", ['"', "'", "(", ")", "*", "-", ":", "NEAR(", "a OR", "AND", "^", '"unclosed', "{}"]
)
def test_syntax_characters_never_raise(store_with_calls, query):
    store, _ = store_with_calls
    assert isinstance(search(store, query), list)


def test_model_words_and_outputs_are_searched(store_with_calls):
    store, eid = store_with_calls
    assert refs(search(store, '"old" files (carefully)')) == {("turn", 1)}
    (hit,) = search(store, "No such file or directory")
    assert hit["kind"] == "call" and hit["ref_id"] == ep.list_calls(store, eid)[2]["id"]
    assert search(store, "nothing like this anywhere") == []
    assert search(store, "   ") == []


def test_punctuation_only_falls_back_to_substring(store_with_calls):
    store, eid = store_with_calls
    calls = ep.list_calls(store, eid)
    rows = search(store, "|")
    assert {r["ref_id"] for r in rows} == {calls[1]["id"], calls[2]["id"], calls[3]["id"]}
    rows = search(store, "\\;")
    assert [r["ref_id"] for r in rows] == [calls[4]["id"]]
    assert rows[0]["snippet"].endswith("«\\;»")
    assert search(store, "%") == []  # LIKE wildcards are searched for literally


def test_search_through_a_read_only_connection(store_with_calls, db_path: Path):
    reader = open_reader(db_path)
    try:
        assert refs(search(reader, "rm -rf /tmp/x", limit=5)) == {("call", 1)}
    finally:
        reader.close()
