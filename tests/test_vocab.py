"""The shared names (store/vocab.py) are the ones every layer keys on: a kind, a cap or a fault
family added in one place and not another fails here, not in a user's job."""

from __future__ import annotations

import pytest

from engine.jobs.params import PARAMS
from engine.oracle import faults
from engine.oracle.contract import Permits
from engine.oracle.manifest import Manifest
from engine.protocol import ladder, spec
from engine.protocol.registry import KIND_MODULES, get_kind
from store import vocab


def test_every_job_kind_has_its_parameters_and_its_module() -> None:
    assert tuple(KIND_MODULES) == vocab.JOB_KINDS
    assert tuple(PARAMS) == vocab.JOB_KINDS
    assert [get_kind(k).name for k in vocab.JOB_KINDS] == list(vocab.JOB_KINDS)


def test_the_protocol_states_the_vocabularys_caps() -> None:
    assert ladder.CAPS == vocab.CAPS == tuple(sorted(vocab.CAPS))
    assert ladder.format_depth(vocab.ABOVE_LARGEST_CAP) == vocab.ABOVE_LARGEST_CAP_TEXT
    assert vocab.CAPS[-1] < vocab.ABOVE_LARGEST_CAP
    assert ladder.smallest_cap_at_least(vocab.CAPS[-1] + 1) == vocab.ABOVE_LARGEST_CAP


def test_every_fault_family_is_selectable_and_injectable() -> None:
    assert spec.families_for("mix") == ("clean", *vocab.FAULT_FAMILIES)
    assert spec.families_for("train") + spec.families_for("heldout") == vocab.FAULT_FAMILIES
    empty = Manifest(home="/home/user", entries={})
    for family in vocab.FAULT_FAMILIES:
        assert spec.families_for(family) == (family,)
        # A known family with no input to fault is planned as no fault, never refused.
        assert faults.plan_fault("t", family, empty, "", Permits()) is None
    with pytest.raises(faults.FaultError, match="unknown fault family 'no_such'"):
        faults.plan_fault("t", "no_such", empty, "", Permits())
