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


def test_every_option_a_jobs_command_names_is_an_option_of_its_verb() -> None:
    """A job's equivalent command (engine/jobs/params.py) spells the verbs' options
    (depthtui/commands/run.py) once more; a rename on one side only would store commands that
    do not run."""
    import typer
    import typer.main

    from depthtui.commands import registry

    app = typer.Typer()
    registry.register(app)
    verbs = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    for kind, params in PARAMS.items():
        options = {o for p in verbs[kind].params for o in getattr(p, "opts", ())}
        named = {*params.FLAGS.values(), *params.COMMON_FLAGS.values()}
        if kind == "replay":  # replay's command names its own few options
            named = {"--workers", "--accept-risk"}
        assert named <= options, (kind, sorted(named - options))
