"""The bare Docker floor `bench engine` measures: a real run + commit + verifier container with
the trusted pytest on a demo task, leaving nothing behind."""

from __future__ import annotations

from pathlib import Path

import pytest

from devtools.bench.engine import single_segment_tasks
from devtools.bench.engine_floor import LABELS, floor_seconds
from engine.sandbox.dockerapi import connect

pytestmark = pytest.mark.docker


def test_floor_runs_one_bare_episode_and_removes_what_it_made(tmp_path: Path) -> None:
    client = connect()
    task = single_segment_tasks()[0]
    seconds = floor_seconds(client, task, tmp_path / "logs")
    assert 0 < seconds < 300
    label = [f"{k}={v}" for k, v in LABELS.items()]
    assert client.api.containers(all=True, filters={"label": label}) == []
    assert client.api.images(filters={"label": label}) == []
