"""Contracts in the reference JSONL shape, and the permit rules."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.oracle.contract import (
    Contract,
    ContractError,
    Permits,
    dumps_contracts,
    load_contracts,
    loads_contracts,
)

SAMPLE = Path("/work/shared/reference/recovery-bench-contracts-sample.jsonl")


def test_the_nine_reference_contracts_load_and_round_trip():
    contracts = load_contracts(SAMPLE)
    assert len(contracts) == 9
    by_id = {c.task_id: c for c in contracts}
    c = by_id["task_000000_50177ff1"]
    assert c.permitted == {"/home/user": ("mode_changed",)}
    assert c.fault_targets["moved_input"] == "/home/user/legacy_scripts/find_disabled_accounts.sh"
    assert c.fixture_level == "full"
    assert c.tests_hash == "7bf1a4a31991849d"
    assert len(c.tests) == 7
    assert by_id["task_000000_05af8ca3"].fixture_level == "sibling"
    assert by_id["task_000000_4fee1147"].permitted["/home/user/app1/logs"] == ("type_changed",)
    # Written back, every line is the same JSON object as the reference's.
    originals = [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]
    again = [json.loads(line) for line in dumps_contracts(contracts).splitlines()]
    assert again == originals


def test_reference_permits_behave_as_the_reference_says():
    by_id = {c.task_id: c for c in load_contracts(SAMPLE)}
    p = by_id["task_000000_4fee1147"].permits()
    # The logs folder may be replaced by another type; its files may be deleted.
    assert p.allows("/home/user/app1/logs", "type_changed", final=True)
    assert p.allows("/home/user/app1/logs/access.log", "deleted", final=True)
    assert not p.allows("/home/user/app1/logs/access.log", "content_changed", final=True)
    # Absent for a while (moved, symlink comes next call) but not at the end.
    assert p.allows("/home/user/app1/logs", "deleted", final=False)
    assert not p.allows("/home/user/app1/logs", "deleted", final=True)
    empty = by_id["task_000000_560b1d4d"].permits()
    assert not empty.allows("/home/user/anything", "deleted", final=False)


def test_folder_prefix_permits_everything_below_but_not_the_folder():
    p = Permits({"/home/user/out/": ["deleted", "content_changed"]})
    assert p.allows("/home/user/out/a.txt", "deleted", final=True)
    assert p.allows("/home/user/out/deep/er/b", "content_changed", final=True)
    assert not p.allows("/home/user/out", "deleted", final=True)
    assert not p.allows("/home/user/outside.txt", "deleted", final=True)
    assert not p.allows("/home/user/out/a.txt", "mode_changed", final=True)


def test_merged_permits_keep_both():
    p = Permits({"/home/user/a": ["deleted"]}).merged({"/home/user/a": ["mode_changed"]})
    assert p.kinds_for("/home/user/a") == {"deleted", "mode_changed"}
    assert p.to_dict() == {"/home/user/a": ["deleted", "mode_changed"]}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"permitted": {}}', "field 'task_id' is missing"),
        ('{"task_id": 7}', "field 'task_id' must be str"),
        ('{"task_id": "t", "permitted": {"/a": ["eaten"]}}', "unknown kind"),
        ('{"task_id": "t", "permitted": {"rel/path": ["deleted"]}}', "must be absolute"),
        ('{"task_id": "t", "fault_targets": {"flood": "/a"}}', "unknown family 'flood'"),
        ('{"task_id": "t", "fixture_level": "half"}', "fixture_level"),
        ('{"task_id": "t", "tests": "test_a"}', "field 'tests' must be list"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_contracts_say_where_and_what(line, message):
    with pytest.raises(ContractError, match=message) as err:
        loads_contracts("\n" + line + "\n", "contracts.jsonl")
    assert "contracts.jsonl:2" in str(err.value)


def test_unknown_keys_survive_and_tests_hash_alias():
    c = Contract.from_dict({"task_id": "t", "tests_hash": "abc", "note": {"x": 1}})
    assert c.tests_hash == "abc"
    assert c.to_dict()["note"] == {"x": 1}
    assert c.to_dict()["tests_sha"] == "abc"


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ContractError, match="cannot read"):
        load_contracts(tmp_path / "nope.jsonl")
