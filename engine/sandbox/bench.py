"""`depthtui bench sandbox`: what an episode pays for its sandbox, beside the baseline of one
`docker exec` per command, both measured in the same run on the local base image."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from engine.sandbox.containers import DockerSandbox, start_sandbox
from engine.sandbox.dockerapi import connect
from engine.sandbox.gc import remove_image
from engine.sandbox.images import BASE_IMAGE
from engine.tasks.model import Environment, Limits, Segment, Task

LABELS = {"depthtui.bench": "1"}
CALLS = 500
EXECS = 40
BIG_RUNS = 10
STARTS = 5
SNAPSHOTS = 5
ONE_MB = 1_000_000
BIG_COMMAND = f"head -c {ONE_MB} /dev/zero | tr '\\0' a"
TARGET_SPEEDUP = 20.0
TARGET_READY_S = 1.0


def _task() -> Task:
    return Task(
        id="bench/sandbox",
        dataset="bench",
        format="depthtui",
        source_path=Path("/nonexistent"),
        content_hash="bench",
        segments=(Segment("main", "bench", {}, None, None),),
        environment=Environment(context_dir=None, dockerfile=None, image=BASE_IMAGE),
        limits=Limits(),
        verifier_kind="pytest",
    )


def _median_ms(fn: Callable[[], object], n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def _docker_exec(sb: DockerSandbox, argv: list[str]) -> bytes:
    """The baseline: one exec per command, as `docker exec` does (create, start, inspect)."""
    api = sb.api
    exec_id = api.exec_create(sb.container_id, argv, user="1000")["Id"]
    out = api.exec_start(exec_id)
    api.exec_inspect(exec_id)
    return out


def measure(progress: bool = True) -> dict[str, Any]:
    say = Console(stderr=True).print if progress else (lambda *a, **k: None)
    client = connect()
    task = _task()

    say(f"container start to ready (shell answering), {STARTS} times ...")
    ready, plain = [], []
    for _ in range(STARTS):
        t = time.perf_counter()
        sb = start_sandbox(task, BASE_IMAGE, labels=LABELS, client=client)
        ready.append(time.perf_counter() - t)
        sb.close()
        t = time.perf_counter()
        c = client.api.create_container(BASE_IMAGE, ["sleep", "60"], labels=LABELS)
        client.api.start(c["Id"])
        plain.append(time.perf_counter() - t)
        client.api.remove_container(c["Id"], force=True)

    sb = start_sandbox(task, BASE_IMAGE, labels=LABELS, client=client)
    try:
        for _ in range(20):  # warm both paths
            sb.run("true")
            _docker_exec(sb, ["true"])
        say(f"`true` through the persistent shell, {CALLS} times ...")
        call_ms = _median_ms(lambda: sb.run("true"), CALLS)
        say(f"`true` by one docker exec per command, {EXECS} times ...")
        exec_ms = _median_ms(lambda: _docker_exec(sb, ["true"]), EXECS)
        say(f"a command printing 1 MB, {BIG_RUNS} times each way ...")
        big = sb.run(BIG_COMMAND)
        if big.output_bytes != ONE_MB:
            raise RuntimeError(f"the 1 MB command printed {big.output_bytes} bytes")
        big_ms = _median_ms(lambda: sb.run(BIG_COMMAND), BIG_RUNS)
        big_exec_ms = _median_ms(lambda: _docker_exec(sb, ["sh", "-c", BIG_COMMAND]), BIG_RUNS)
        say(f"snapshot (docker commit), {SNAPSHOTS} times ...")
        sb.run("head -c 4000000 /dev/urandom > ~/state.bin")
        snaps = []
        for _ in range(SNAPSHOTS):
            t = time.perf_counter()
            image_id = sb.snapshot()
            snaps.append(time.perf_counter() - t)
            remove_image(client, image_id)
        sb.snapshots.clear()
    finally:
        sb.close(remove_snapshots=True)

    return {
        "container_ready_s": round(statistics.median(ready), 4),
        "docker_run_s": round(statistics.median(plain), 4),
        "call_roundtrip_ms": round(call_ms, 4),
        "docker_exec_roundtrip_ms": round(exec_ms, 3),
        "speedup_vs_docker_exec": round(exec_ms / call_ms, 1),
        "output_1mb_ms": round(big_ms, 2),
        "docker_exec_1mb_ms": round(big_exec_ms, 2),
        "snapshot_s": round(statistics.median(snaps), 4),
        "repetitions": {
            "starts": STARTS,
            "calls": CALLS,
            "execs": EXECS,
            "1mb": BIG_RUNS,
            "snapshots": SNAPSHOTS,
        },
        "targets": {
            "speedup_vs_docker_exec": TARGET_SPEEDUP,
            "container_ready_s": TARGET_READY_S,
        },
        "targets_met": exec_ms / call_ms >= TARGET_SPEEDUP
        and statistics.median(ready) < TARGET_READY_S,
    }


def render(result: dict[str, Any]) -> Table:
    table = Table(title="depthtui bench sandbox (medians)")
    table.add_column("what")
    table.add_column("depthtui", justify="right")
    table.add_column("baseline", justify="right")
    table.add_column("ratio", justify="right")

    def ok(good: bool) -> str:
        return "[green]✓[/]" if good else "[red]✗[/]"

    speedup = result["speedup_vs_docker_exec"]
    table.add_row(
        "call round trip (`true`)",
        f"{result['call_roundtrip_ms']:.3f} ms",
        f"{result['docker_exec_roundtrip_ms']:.2f} ms (docker exec)",
        f"{speedup:.0f}x {ok(speedup >= TARGET_SPEEDUP)} (target ≥ {TARGET_SPEEDUP:g}x)",
    )
    table.add_row(
        "command printing 1 MB",
        f"{result['output_1mb_ms']:.2f} ms",
        f"{result['docker_exec_1mb_ms']:.2f} ms (docker exec)",
        f"{result['docker_exec_1mb_ms'] / result['output_1mb_ms']:.1f}x",
    )
    ready = result["container_ready_s"]
    table.add_row(
        "container start to ready",
        f"{ready:.3f} s {ok(ready < TARGET_READY_S)}",
        f"{result['docker_run_s']:.3f} s (docker run, no shell)",
        f"target < {TARGET_READY_S:g} s",
    )
    table.add_row("snapshot (docker commit)", f"{result['snapshot_s']:.3f} s", "", "")
    return table
