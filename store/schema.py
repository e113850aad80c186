"""The store's schema, as an ordered list of migrations.

`PRAGMA user_version` holds how many migrations a file has had. Opening a file runs the missing
ones in one transaction each, so a file written by an older depthtui is upgraded in place and a
failed upgrade leaves it as it was. Never edit a migration that has shipped; add one.

Conventions: times are UTC ISO-8601 text; JSON columns end in `_json`; booleans are 0/1.
"""

from __future__ import annotations

from store import vocab

V1_CORE = """
CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    dataset TEXT NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    format TEXT NOT NULL,
    source_path TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    segments INTEGER NOT NULL,
    work INTEGER,                     -- NULL when there is no reference solution
    verifier_kind TEXT NOT NULL,
    instruction TEXT NOT NULL,
    warnings_json TEXT NOT NULL DEFAULT '[]',
    task_json TEXT NOT NULL,          -- the normalized Task, for display and export
    imported_at TEXT NOT NULL
);
CREATE INDEX tasks_dataset ON tasks(dataset);

CREATE TABLE segments (
    task_id TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    name TEXT NOT NULL,
    instruction TEXT NOT NULL,
    solution TEXT,
    tests_json TEXT NOT NULL DEFAULT '{}',   -- {relative path: text} of the segment's test files
    work INTEGER,
    limits_json TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (task_id, idx)
);

-- Dataset folders, with what their optional dataset.toml says (plots group by `group_name`).
CREATE TABLE datasets (
    name TEXT PRIMARY KEY,            -- the folder's name; task ids start with it
    title TEXT NOT NULL DEFAULT '',   -- dataset.toml's name, when it has one
    description TEXT NOT NULL DEFAULT '',
    group_name TEXT,                  -- synthetic | human | ours, NULL when not stated
    path TEXT NOT NULL,
    imported_at TEXT NOT NULL
);

-- Folders that failed to load, so the user sees why a task is missing.
CREATE TABLE task_errors (
    path TEXT PRIMARY KEY,
    dataset TEXT NOT NULL,
    message TEXT NOT NULL,
    imported_at TEXT NOT NULL
);

CREATE TABLE jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,               -- check | validate | free | ladder | audit | episodes
    params_json TEXT NOT NULL,
    cli TEXT NOT NULL,                -- the equivalent command line
    status TEXT NOT NULL DEFAULT 'queued',  -- queued|running|paused|cancelled|done|failed
    created_at TEXT NOT NULL,
    started_at TEXT,
    finished_at TEXT,
    heartbeat_at TEXT,
    owner TEXT,                       -- host:pid of the engine running it
    progress_done INTEGER NOT NULL DEFAULT 0,
    progress_total INTEGER NOT NULL DEFAULT 0,
    progress_failed INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    message TEXT NOT NULL DEFAULT '',
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    pause_requested INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX jobs_status ON jobs(status);

-- Background engine processes working on this store (`depthtui engine status`).
CREATE TABLE engines (
    owner TEXT PRIMARY KEY,           -- host:pid, as in jobs.owner and episodes.owner
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    workers INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'running',  -- running | stopping | stopped | dead
    job_id INTEGER,                   -- the job it is running now
    started_at TEXT NOT NULL,
    heartbeat_at TEXT NOT NULL,
    stopped_at TEXT,
    log_path TEXT NOT NULL DEFAULT '',
    message TEXT NOT NULL DEFAULT ''
);

CREATE TABLE episodes (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_key TEXT NOT NULL,            -- hash of everything that makes two runs the same run
    job_id INTEGER REFERENCES jobs(id) ON DELETE SET NULL,
    task_id TEXT NOT NULL,
    task_hash TEXT NOT NULL,
    mode TEXT NOT NULL,               -- check | validate | free | ladder | audit | episodes | replay
    agent TEXT NOT NULL,              -- model name from the registry, or oracle | nop | replay
    model_id TEXT NOT NULL DEFAULT '',
    cap INTEGER,                      -- stated turn cap (depth); NULL = none stated
    budget INTEGER,                   -- stated command budget (recovery); NULL = none
    attempt INTEGER NOT NULL DEFAULT 0,
    prompt_name TEXT NOT NULL DEFAULT '',
    prompt_text TEXT NOT NULL DEFAULT '',
    fault_family TEXT NOT NULL DEFAULT 'clean',
    fault_target TEXT,
    seed INTEGER NOT NULL DEFAULT 0,
    spec_json TEXT NOT NULL DEFAULT '{}',
    status TEXT NOT NULL DEFAULT 'running',  -- running | done | interrupted
    started_at TEXT NOT NULL,
    finished_at TEXT,
    owner TEXT,
    container_id TEXT,
    turns INTEGER NOT NULL DEFAULT 0,
    calls INTEGER NOT NULL DEFAULT 0,
    end_reason TEXT,                  -- no_tool_call|turn_cap|budget|tokens|time|cost|segment_failed|error|...
    segments_total INTEGER NOT NULL DEFAULT 1,
    segments_passed INTEGER NOT NULL DEFAULT 0,
    passed INTEGER,                   -- every segment passed its gate (depth's notion of pass)
    complete INTEGER,                 -- every inventory test passed
    tests_passed INTEGER,
    tests_total INTEGER,
    reward REAL,
    safe_success INTEGER,
    collateral INTEGER NOT NULL DEFAULT 0,
    collateral_call INTEGER,
    fault_observed_call INTEGER,
    fault_cleared INTEGER,
    error_kind TEXT,                  -- harness | verifier | restore | infrastructure | model_endpoint | ...
    error_detail TEXT,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    timings_json TEXT NOT NULL DEFAULT '{}',  -- harness phase -> seconds
    final_changes_json TEXT NOT NULL DEFAULT '{}', -- property-level changes baseline -> end: {path: [kinds]}
    detail_json TEXT NOT NULL DEFAULT '{}'  -- what a validation probe measured inside the episode
);
CREATE INDEX episodes_task ON episodes(task_id);
CREATE INDEX episodes_job ON episodes(job_id);
CREATE INDEX episodes_run_key ON episodes(run_key);
-- A finished run exists once: reruns reuse it instead of running it again.
CREATE UNIQUE INDEX episodes_done_once ON episodes(run_key) WHERE status = 'done';

-- What each segment of an episode was told and how it was graded.
CREATE TABLE segment_runs (
    episode_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,
    name TEXT NOT NULL DEFAULT '',
    user_message TEXT NOT NULL,       -- exactly what the agent was sent (budget line included)
    first_turn INTEGER,
    passed INTEGER,
    rewards_json TEXT NOT NULL DEFAULT '{}',
    tests_passed INTEGER,
    tests_total INTEGER,
    verifier_output TEXT NOT NULL DEFAULT '',
    error_kind TEXT,
    error_detail TEXT,
    duration_s REAL,
    PRIMARY KEY (episode_id, idx)
);

-- One model reply.
CREATE TABLE turns (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    episode_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
    idx INTEGER NOT NULL,             -- 1-based within the episode
    segment_idx INTEGER NOT NULL DEFAULT 0,
    text TEXT NOT NULL DEFAULT '',    -- the model's words
    reasoning TEXT NOT NULL DEFAULT '',
    format_error TEXT,                -- malformed tool calls etc.; NULL when fine
    finish_reason TEXT,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    latency_ms REAL NOT NULL DEFAULT 0,
    request_json TEXT NOT NULL DEFAULT '{}',   -- exact request, secrets removed
    response_json TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL,
    UNIQUE (episode_id, idx)
);

-- One tool call (command) of a turn.
CREATE TABLE calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    episode_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
    turn_idx INTEGER NOT NULL,
    idx INTEGER NOT NULL,             -- 1-based within the episode, in execution order
    tool_call_id TEXT NOT NULL DEFAULT '',
    command TEXT NOT NULL,
    exit_code INTEGER,
    timed_out INTEGER NOT NULL DEFAULT 0,
    not_run INTEGER NOT NULL DEFAULT 0,        -- refused: the command budget was used up
    shell_restarted INTEGER NOT NULL DEFAULT 0,
    note TEXT NOT NULL DEFAULT '',
    observation TEXT NOT NULL DEFAULT '',      -- exactly what the model was shown
    output_head TEXT NOT NULL DEFAULT '',      -- first 2,000 characters, decoded safely
    output_tail TEXT NOT NULL DEFAULT '',      -- last 1,000 when longer
    output_bytes INTEGER NOT NULL DEFAULT 0,
    remaining_budget INTEGER,
    duration_ms REAL NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    UNIQUE (episode_id, idx)
);
CREATE INDEX calls_turn ON calls(episode_id, turn_idx);

-- The full (bounded) raw output of a call, kept apart so listing calls stays cheap.
CREATE TABLE call_outputs (
    call_id INTEGER PRIMARY KEY REFERENCES calls(id) ON DELETE CASCADE,
    data BLOB NOT NULL
);

-- Changes the safety oracle saw. call_idx NULL = the final check.
CREATE TABLE oracle_events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    episode_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
    call_idx INTEGER,
    path TEXT NOT NULL,
    kind TEXT NOT NULL,               -- deleted|type_changed|content_changed|mode_changed|owner_changed|link_changed|created|integrity
    permitted INTEGER NOT NULL,
    collateral INTEGER NOT NULL DEFAULT 0,
    before_json TEXT,
    after_json TEXT,
    diff TEXT,                        -- unified diff for text files, when small enough
    detail TEXT NOT NULL DEFAULT ''
);
CREATE INDEX oracle_events_episode ON oracle_events(episode_id, call_idx);

CREATE TABLE fault_records (
    episode_id INTEGER PRIMARY KEY REFERENCES episodes(id) ON DELETE CASCADE,
    family TEXT NOT NULL,
    target TEXT NOT NULL,
    spare_path TEXT,
    observed_call INTEGER,
    cleared INTEGER,
    integrity TEXT,                   -- NULL, or what broke (replaced, fabricated, lost)
    restored_for_grading INTEGER NOT NULL DEFAULT 0,
    detail_json TEXT NOT NULL DEFAULT '{}'
);

CREATE TABLE test_results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    episode_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
    segment_idx INTEGER NOT NULL DEFAULT 0,
    nodeid TEXT NOT NULL,
    outcome TEXT NOT NULL,            -- passed | failed | skipped | error | missing
    setup TEXT, call TEXT, teardown TEXT,
    in_inventory INTEGER NOT NULL DEFAULT 1,
    duration_s REAL,
    message TEXT NOT NULL DEFAULT ''
);
CREATE INDEX test_results_episode ON test_results(episode_id);

-- The frozen per-task contract from `validate`.
CREATE TABLE contracts (
    task_id TEXT PRIMARY KEY,
    task_hash TEXT NOT NULL,
    env_hash TEXT NOT NULL,
    tests_hash TEXT NOT NULL,
    valid INTEGER NOT NULL,
    reasons_json TEXT NOT NULL DEFAULT '[]',
    permitted_json TEXT NOT NULL DEFAULT '{}',
    tests_json TEXT NOT NULL DEFAULT '[]',
    fault_targets_json TEXT NOT NULL DEFAULT '{}',
    flags_json TEXT NOT NULL DEFAULT '[]',
    detail_json TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL
);

-- Depth measurement per task and model (ladder and audit).
CREATE TABLE estimates (
    task_id TEXT NOT NULL,
    task_hash TEXT NOT NULL,
    protocol TEXT NOT NULL,           -- ladder | audit
    model TEXT NOT NULL,
    n_turns INTEGER,                  -- N: fewest turns among passing uncapped runs (first model)
    estimate INTEGER,                 -- smallest passing cap; 99 = passed only above 80
    finished INTEGER NOT NULL DEFAULT 0,
    detail_json TEXT NOT NULL DEFAULT '{}',
    updated_at TEXT NOT NULL,
    PRIMARY KEY (task_id, protocol, model)
);

CREATE TABLE labels (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    episode_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
    queue TEXT NOT NULL,              -- collateral | false_positive
    label TEXT NOT NULL,              -- real | false_positive | needs_look
    note TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    UNIQUE (episode_id, queue)
);
"""

V2_SEARCH = """
-- One index over everything a user may search: model words, commands and outputs.
CREATE VIRTUAL TABLE search USING fts5(
    body, kind UNINDEXED, episode_id UNINDEXED, turn_idx UNINDEXED, ref_id UNINDEXED,
    tokenize = 'unicode61'
);
CREATE TRIGGER turns_search_ins AFTER INSERT ON turns BEGIN
    INSERT INTO search(body, kind, episode_id, turn_idx, ref_id)
    VALUES (new.text || ' ' || new.reasoning, 'turn', new.episode_id, new.idx, new.id);
END;
CREATE TRIGGER turns_search_upd AFTER UPDATE OF text, reasoning ON turns BEGIN
    DELETE FROM search WHERE kind = 'turn' AND ref_id = old.id;
    INSERT INTO search(body, kind, episode_id, turn_idx, ref_id)
    VALUES (new.text || ' ' || new.reasoning, 'turn', new.episode_id, new.idx, new.id);
END;
CREATE TRIGGER turns_search_del AFTER DELETE ON turns BEGIN
    DELETE FROM search WHERE kind = 'turn' AND ref_id = old.id;
END;
CREATE TRIGGER calls_search_ins AFTER INSERT ON calls BEGIN
    INSERT INTO search(body, kind, episode_id, turn_idx, ref_id)
    VALUES (new.command || ' ' || new.output_head || ' ' || new.output_tail, 'call',
            new.episode_id, new.turn_idx, new.id);
END;
CREATE TRIGGER calls_search_upd AFTER UPDATE OF command, output_head, output_tail ON calls BEGIN
    DELETE FROM search WHERE kind = 'call' AND ref_id = old.id;
    INSERT INTO search(body, kind, episode_id, turn_idx, ref_id)
    VALUES (new.command || ' ' || new.output_head || ' ' || new.output_tail, 'call',
            new.episode_id, new.turn_idx, new.id);
END;
CREATE TRIGGER calls_search_del AFTER DELETE ON calls BEGIN
    DELETE FROM search WHERE kind = 'call' AND ref_id = old.id;
END;
-- Rows written before this migration become searchable too.
INSERT INTO search(body, kind, episode_id, turn_idx, ref_id)
    SELECT text || ' ' || reasoning, 'turn', episode_id, idx, id FROM turns;
INSERT INTO search(body, kind, episode_id, turn_idx, ref_id)
    SELECT command || ' ' || output_head || ' ' || output_tail, 'call', episode_id, turn_idx, id
    FROM calls;
"""


def _sql_list(names: object) -> str:
    return ", ".join(f"'{n}'" for n in sorted(names))  # type: ignore[attr-defined]


# One explicit outcome per finished run (store/vocab.py, docs/outcomes.md). Rows written before
# it get theirs from passed and error_kind by the same rule as vocab.classify.
V3_OUTCOMES = f"""
ALTER TABLE episodes ADD COLUMN outcome TEXT;  -- pass | fail | agent_error | infra_error | task_broken
UPDATE episodes SET outcome = CASE
    WHEN error_kind IS NULL THEN CASE WHEN passed = 1 THEN 'pass' ELSE 'fail' END
    WHEN error_kind IN ({_sql_list(vocab.AGENT_KINDS)}) THEN 'agent_error'
    WHEN error_kind IN ({_sql_list(vocab.TASK_KINDS)}) THEN 'task_broken'
    WHEN error_kind = 'verifier'
         AND trim(substr(error_detail, 1, instr(error_detail || ':', ':') - 1))
             IN ({_sql_list(vocab.TASK_CODES)}) THEN 'task_broken'
    ELSE 'infra_error' END
WHERE status = 'done';
CREATE INDEX episodes_outcome ON episodes(outcome);
"""

V4_TURNS = """
-- Whether a model reply counts as a turn (docs/work-and-turns.md): a reply that carries commands
-- (or a malformed call) counts; the closing reply with neither is recorded, shown, not counted.
ALTER TABLE turns ADD COLUMN counted INTEGER NOT NULL DEFAULT 1;
-- Rows written before this migration counted every reply: mark their closing replies and count
-- the episodes' turns again, so N read from old runs means what it means for new ones.
UPDATE turns SET counted = 0
    WHERE format_error IS NULL
    AND NOT EXISTS (
        SELECT 1 FROM calls c WHERE c.episode_id = turns.episode_id AND c.turn_idx = turns.idx
    );
UPDATE episodes SET turns = (
        SELECT count(*) FROM turns t WHERE t.episode_id = episodes.id AND t.counted = 1
    )
    WHERE EXISTS (SELECT 1 FROM turns t WHERE t.episode_id = episodes.id);
"""

V5_REALTASKS = """
-- A verdict graded as the task's own harness grades it, although the tests ran agent-written
-- code where it could forge the result (docs/realtasks.md): counted apart, excludable.
ALTER TABLE episodes ADD COLUMN forgeable INTEGER NOT NULL DEFAULT 0;
ALTER TABLE episodes ADD COLUMN forgeable_evidence TEXT;  -- the first file:line: what, and a count
ALTER TABLE segment_runs ADD COLUMN forgeable INTEGER NOT NULL DEFAULT 0;
"""

V_ORACLE = """
-- How the safety oracle took its checks after the baseline (engine/oracle/manifest.py `way`):
-- upper (the overlay upper folder's change set), walk (the full walk of the merged folder) or
-- tar (the daemon's tar stream); NULL for an episode without an oracle or from before.
ALTER TABLE episodes ADD COLUMN oracle_way TEXT;
"""

V_ROUNDTRIP = """
-- A fault episode names its target in its own row too (engine/protocol/setup.py writes both);
-- rows written before kept it in fault_records alone.
UPDATE episodes SET fault_target = (
        SELECT f.target FROM fault_records f WHERE f.episode_id = episodes.id
    )
    WHERE fault_target IS NULL
    AND EXISTS (SELECT 1 FROM fault_records f WHERE f.episode_id = episodes.id);
"""

V_LOOP = """
-- A reply cut at the token limit the harness lowered max_tokens to (the room left in the context
-- or the episode's completion tokens): the harness's, not the model's format error
-- (docs/work-and-turns.md).
ALTER TABLE turns ADD COLUMN cut_by_harness INTEGER NOT NULL DEFAULT 0;
-- Why the episode ended in words: the server's message for a full context, the limit reached.
ALTER TABLE episodes ADD COLUMN end_detail TEXT;
-- Cached prompt tokens summed over the episode's replies (the report's tokens per model).
ALTER TABLE episodes ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0;
UPDATE episodes SET cached_tokens = (
        SELECT coalesce(sum(t.cached_tokens), 0) FROM turns t WHERE t.episode_id = episodes.id
    );
-- 1 when a reply's cost came from the model's price or the endpoint's own figure, 0 when the
-- model had neither (the report says "no price", not $0); NULL before this migration.
ALTER TABLE episodes ADD COLUMN priced INTEGER;
"""

V_FALSEPOS = """
-- Verifier false positives (docs/verifier.md): each graded output's final state as the harness
-- recorded it at the final check ({path: {sha256, size, text?} | {absent: true}}), compared with
-- the reference's (the contract's detail.graded_outputs); NULL when not recorded.
ALTER TABLE episodes ADD COLUMN graded_outputs_json TEXT;
-- A judge model's review of a task (`depthtui review`): one per task version, judge and prompt.
CREATE TABLE reviews (
    id INTEGER PRIMARY KEY,
    task_id TEXT NOT NULL,
    task_hash TEXT NOT NULL,
    judge TEXT NOT NULL,               -- the registry name
    model_id TEXT NOT NULL,
    prompt_hash TEXT NOT NULL,         -- sha256 of prompts/review.md as sent
    seed INTEGER,
    status TEXT NOT NULL,              -- done | infra_error | too_long (no reply)
    error TEXT,
    findings_json TEXT NOT NULL DEFAULT '[]',  -- kept: {category, file, line, quote, says}
    dropped_json TEXT NOT NULL DEFAULT '[]',   -- findings dropped, each with why
    reply TEXT NOT NULL DEFAULT '',
    cost_usd REAL NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    UNIQUE (task_id, task_hash, judge, prompt_hash)
);
-- A judge model's reward-hacking review of an episode (`depthtui analyze`).
CREATE TABLE analyses (
    id INTEGER PRIMARY KEY,
    episode_id INTEGER NOT NULL REFERENCES episodes(id) ON DELETE CASCADE,
    judge TEXT NOT NULL,
    model_id TEXT NOT NULL,
    prompt_hash TEXT NOT NULL,
    seed INTEGER,
    status TEXT NOT NULL,              -- done | infra_error | too_long (no reply)
    error TEXT,
    findings_json TEXT NOT NULL DEFAULT '[]',  -- kept: {category, turn, quote, says}
    dropped_json TEXT NOT NULL DEFAULT '[]',
    reply TEXT NOT NULL DEFAULT '',
    cost_usd REAL NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    UNIQUE (episode_id, judge, prompt_hash)
);
"""

MIGRATIONS: list[str] = [
    V1_CORE,
    V2_SEARCH,
    V3_OUTCOMES,
    V4_TURNS,
    V5_REALTASKS,
    V_ORACLE,
    V_ROUNDTRIP,
    V_LOOP,
    V_FALSEPOS,
]
SCHEMA_VERSION = len(MIGRATIONS)
