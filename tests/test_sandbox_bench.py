"""`depthtui bench sandbox` runs end to end and reports every figure (small repetition counts;
the figures themselves are for people, not assertions)."""

from __future__ import annotations

import json

import pytest
from rich.console import Console
from typer.testing import CliRunner

from devtools.bench import sandbox as bench

pytestmark = pytest.mark.docker


def test_bench_reports_every_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = [("CALLS", 20), ("ROUNDS", 2), ("EXECS", 3), ("TMUX_CALLS", 2)]
    counts += [("BIG_RUNS", 2), ("STARTS", 1), ("SNAPSHOTS", 1)]
    for name, n in counts:
        monkeypatch.setattr(bench, name, n)
    monkeypatch.setattr(bench, "LABELS", {**bench.LABELS, "depthtui.test": "1"})
    from depthtui.cli import _register, app

    _register()
    result = CliRunner().invoke(app, ["bench", "sandbox", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    for key in (
        "call_roundtrip_ms",
        "pipe_shell_roundtrip_ms",
        "speedup_vs_pipe_shell",
        "speedup_vs_strongest",
        "pipe_shell_1mb_ms",
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
    # Harbor's tmux way runs when tmux could be installed into the bench image, else says why.
    if doc["tmux_roundtrip_ms"] is None:
        assert doc["tmux_skipped"] and doc["speedup_vs_tmux"] is None
    else:
        assert doc["tmux_roundtrip_ms"] > 0 and doc["tmux_pane_reads"] >= 1
        assert not doc["tmux_skipped"]
    # The headline is against the fastest baseline measured.
    baselines = {
        "pipe shell": doc["pipe_shell_roundtrip_ms"],
        "docker exec": doc["docker_exec_roundtrip_ms"],
    }
    if doc["tmux_roundtrip_ms"] is not None:
        baselines["tmux"] = doc["tmux_roundtrip_ms"]
    assert doc["strongest_baseline"] == min(baselines, key=baselines.__getitem__)
    want = baselines[doc["strongest_baseline"]] / doc["call_roundtrip_ms"]
    assert abs(doc["speedup_vs_strongest"] - want) <= 0.01 * want + 0.01
    table = Console(width=120, record=True)
    table.print(bench.render(doc))
    text = table.export_text()
    assert "round trip" in text and "docker exec" in text and "snapshot" in text
    assert "pipe shell" in text and "tmux" in text
