"""A writer and a reader in two processes on one store (WAL): the engine records turns while a
viewer polls, searches and reads; neither ever sees "database is locked", and the reader never
sees half a turn."""

from __future__ import annotations

import multiprocessing as mp
import traceback
from pathlib import Path

TURNS = 300


def _writer(path: str, ready, done, results) -> None:
    from store import episodes as ep
    from store.db import Store

    try:
        ready.wait(60)
        with Store(path) as store:
            eid = ep.create_episode(
                store, run_key="w", task_id="demo/t", task_hash="h", mode="free", agent="m"
            )
            for i in range(1, TURNS + 1):
                ep.record_turn(
                    store,
                    eid,
                    {"idx": i, "text": f"turn {i}: removing scratch", "prompt_tokens": 1},
                    [
                        {"idx": 2 * i - 1, "command": f"rm -rf /tmp/x{i}", "exit_code": 0},
                        {"idx": 2 * i, "command": f"echo 'done {i}' | wc -c", "exit_code": 0},
                    ],
                    outputs={2 * i: f"{7 + len(str(i))}\n".encode()},
                )
            ep.finish_episode(store, eid, passed=True)
        results.put(("writer", "ok", TURNS))
    except BaseException:
        results.put(("writer", "error", traceback.format_exc()))
    finally:
        done.set()


def _reader(path: str, ready, done, results) -> None:
    from store import episodes as ep
    from store.db import data_version, open_reader
    from store.search import search

    try:
        conn = open_reader(path)
        reads = 0
        changes = 0
        last_version = data_version(conn)
        ready.set()
        while True:
            finished = done.is_set()
            conn.execute("BEGIN")  # one snapshot for the whole check
            turns = conn.execute("SELECT count(*) FROM turns").fetchone()[0]
            calls = conn.execute("SELECT count(*) FROM calls").fetchone()[0]
            outputs = conn.execute("SELECT count(*) FROM call_outputs").fetchone()[0]
            row = conn.execute("SELECT id, turns, calls FROM episodes").fetchone()
            conn.execute("COMMIT")
            # A turn is written whole or not at all.
            assert calls == 2 * turns and outputs == turns, (turns, calls, outputs)
            if row is not None:
                assert (row[1], row[2]) == (turns, calls), (row, turns, calls)
                if turns:
                    hits = search(conn, f"rm -rf /tmp/x{turns}")
                    assert any(h["turn_idx"] == turns for h in hits), (turns, hits)
                    assert ep.list_calls(conn, row[0], turn_idx=turns)
            version = data_version(conn)
            changes += version != last_version
            last_version = version
            reads += 1
            if finished:
                break
        conn.close()
        results.put(("reader", "ok", (reads, changes, turns)))
    except BaseException:
        ready.set()
        results.put(("reader", "error", traceback.format_exc()))


def test_writer_and_reader_processes_never_lock_each_other(db_path: Path):
    from store.db import Store

    with Store(db_path):  # create and migrate before either process starts
        pass
    ctx = mp.get_context("spawn")
    ready, done, results = ctx.Event(), ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(str(db_path), ready, done, results)),
        ctx.Process(target=_reader, args=(str(db_path), ready, done, results)),
    ]
    for p in procs:
        p.start()
    outcome = {}
    for _ in procs:
        who, status, detail = results.get(timeout=300)
        outcome[who] = (status, detail)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert outcome["writer"] == ("ok", TURNS), outcome["writer"]
    status, detail = outcome["reader"]
    assert status == "ok", detail
    reads, changes, last_turns = detail
    # The reader really ran while the writer wrote, saw it progress, and saw the end.
    assert last_turns == TURNS
    assert reads >= 10 and changes >= 2, detail
