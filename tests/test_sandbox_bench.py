"""`depthtui bench sandbox` runs end to end and reports every figure (small repetition counts;
the figures themselves are for people, not assertions)."""

from __future__ import annotations

import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

from engine.sandbox import bench

pytestmark = pytest.mark.docker


def test_bench_reports_every_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, n in [("CALLS", 20), ("EXECS", 3), ("BIG_RUNS", 2), ("STARTS", 1), ("SNAPSHOTS", 1)]:
        monkeypatch.setattr(bench, name, n)
    monkeypatch.setattr(bench, "LABELS", {**bench.LABELS, "depthtui.test": "1"})
    from depthtui.cli import _register, app

    _register()
    result = CliRunner().invoke(app, ["bench", "sandbox", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    for key in (
        "call_roundtrip_ms",
        "docker_exec_roundtrip_ms",
        "speedup_vs_docker_exec",
        "container_ready_s",
        "snapshot_s",
        "output_1mb_ms",
        "docker_exec_1mb_ms",
        "docker_run_s",
    ):
        assert isinstance(doc[key], float) and doc[key] > 0, key
    assert doc["repetitions"]["calls"] == 20
    table = Console(width=120, record=True)
    table.print(bench.render(doc))
    text = table.export_text()
    assert "call round trip" in text and "docker exec" in text and "snapshot" in text
