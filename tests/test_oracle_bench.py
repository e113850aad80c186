"""`depthtui bench oracle` runs end to end on a tiny home and reports every figure per case
(small repetition counts; the figures are for people, not assertions)."""

from __future__ import annotations

import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

from devtools.bench import oracle as bench

pytestmark = pytest.mark.docker


def test_bench_reports_the_check_and_the_full_hash_beside_the_peer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bench, "HOMES", ((20, 200_000),))
    for name, n in [("REPEATS", 2), ("FULL_REPEATS", 2), ("FLOOD", 30)]:
        monkeypatch.setattr(bench, name, n)
    from depthtui.cli import _register, app

    _register()
    result = CliRunner().invoke(app, ["bench", "oracle", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    cases = doc["cases"]
    # Unchanged, 10 changed, and the flood of new files on the (only, so largest) home.
    assert [(c["changed"], c["new_files"]) for c in cases] == [(0, 0), (10, 0), (0, 30)]
    for c in cases:
        keys = ("check_ms", "walk_check_ms", "baseline_ms", "full_ms", "walk_full_ms", "tar_ms")
        for key in (*keys, "peer_full_ms"):
            assert isinstance(c[key], float) and c[key] > 0, key
        assert c["peer_full_ms"] == c["baseline_ms"]  # the peer hashes in full every time
        assert c["full_speedup"] == round(c["peer_full_ms"] / c["full_ms"], 1)
        assert c["speedup"] == round(c["baseline_ms"] / c["check_ms"], 1)
        # Both ways in the one run: the upper folder's change set and the full walk.
        assert c["oracle_way"] == "upper"
        assert c["walk_full_speedup"] == round(c["peer_full_ms"] / c["walk_full_ms"], 1)
        assert c["walk_speedup"] == round(c["baseline_ms"] / c["walk_check_ms"], 1)
    assert len(doc["load_avg"]) == 3
    console = Console(width=200, record=True)
    console.print(bench.render(doc))
    text = console.export_text()
    assert "walk final" in text and "30 new" in text and "10 changed" in text
