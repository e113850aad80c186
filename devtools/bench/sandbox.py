"""`depthtui bench sandbox`: what an episode pays for its sandbox, beside the peers' ways of
running a command (one `docker exec` per command; the recovery bench's pipe shell; Harbor's tmux),
all measured in the same run on the local base image. The headline ratio is against the fastest
of them (docs/bench.md)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
from rich.console import Console
from rich.table import Table

from devtools.bench.sandbox_peers import PipeShell, TmuxTerminal, tmux_image
from engine.sandbox.containers import DockerSandbox
from engine.sandbox.dockerapi import connect
from engine.sandbox.gc import remove_image
from engine.sandbox.images import BASE_IMAGE
from engine.sandbox.start import start_sandbox
from engine.tasks.model import Environment, Limits, Segment, Task

LABELS = {"depthtui.bench": "1"}
CALLS = 500  # per way of a persistent shell, over ROUNDS alternating rounds
ROUNDS = 5
EXECS = 40
TMUX_CALLS = 20
BIG_RUNS = 10
STARTS = 5
SNAPSHOTS = 5
ONE_MB = 1_000_000
BIG_COMMAND = f"head -c {ONE_MB} /dev/zero | tr '\\0' a"
TARGET_SPEEDUP = 20.0  # against one docker exec per command
TARGET_VS_STRONGEST = 1.0  # at or under the fastest peer's round trip
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


def _times_ms(fn: Callable[[], object], n: int) -> list[float]:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return times


def _median_ms(fn: Callable[[], object], n: int) -> float:
    return statistics.median(_times_ms(fn, n))


def _alternated_ms(ways: dict[str, Callable[[], object]], n: int) -> dict[str, float]:
    """The median of `n` runs of each way, taken in ROUNDS rounds that alternate the ways, so
    that load from other processes falls on all of them alike."""
    samples: dict[str, list[float]] = {name: [] for name in ways}
    per_round = max(n // ROUNDS, 1)
    for i in range(ROUNDS):
        order = list(ways.items()) if i % 2 == 0 else list(reversed(ways.items()))
        for name, fn in order:
            samples[name] += _times_ms(fn, per_round)
    return {name: statistics.median(times) for name, times in samples.items()}


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
    # The pipe shell gets a container of its own, as in the recovery bench: one shell each.
    peer = start_sandbox(task, BASE_IMAGE, labels=LABELS, client=client)
    pipe = PipeShell(peer.container_id, str(peer.agent_uid), task.workdir)
    try:
        for _ in range(20):  # warm every path
            sb.run("true")
            pipe.run("true")
            _docker_exec(sb, ["true"])
        if pipe.run("echo hi; false") != (b"hi\n", 1):
            raise RuntimeError("the pipe shell baseline does not answer as expected")
        say(f"`true` through depthtui's shell and the pipe shell, {CALLS} times each ...")
        both = _alternated_ms(
            {"shell": lambda: sb.run("true"), "pipe": lambda: pipe.run("true")}, CALLS
        )
        call_ms, pipe_ms = both["shell"], both["pipe"]
        say(f"`true` by one docker exec per command, {EXECS} times ...")
        exec_ms = _median_ms(lambda: _docker_exec(sb, ["true"]), EXECS)
        say(f"a command printing 1 MB, {BIG_RUNS} times each way ...")
        big = sb.run(BIG_COMMAND)
        if big.output_bytes != ONE_MB:
            raise RuntimeError(f"the 1 MB command printed {big.output_bytes} bytes")
        if len(pipe.run(BIG_COMMAND)[0]) != ONE_MB:
            raise RuntimeError("the 1 MB command through the pipe shell lost bytes")
        big_ms = _median_ms(lambda: sb.run(BIG_COMMAND), BIG_RUNS)
        big_pipe_ms = _median_ms(lambda: pipe.run(BIG_COMMAND), BIG_RUNS)
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
        pipe.close()
        peer.close()
        sb.close(remove_snapshots=True)

    tmux_ms, tmux_looks, tmux_skipped = _tmux_roundtrip(client, task, say)
    baselines = {"pipe shell": pipe_ms, "docker exec": exec_ms}
    if tmux_ms is not None:
        baselines["tmux"] = tmux_ms
    strongest = min(baselines, key=lambda name: baselines[name])
    vs_strongest = baselines[strongest] / call_ms
    ready_s = statistics.median(ready)
    return {
        "container_ready_s": round(ready_s, 4),
        "docker_run_s": round(statistics.median(plain), 4),
        "call_roundtrip_ms": round(call_ms, 4),
        "pipe_shell_roundtrip_ms": round(pipe_ms, 4),
        "docker_exec_roundtrip_ms": round(exec_ms, 3),
        "tmux_roundtrip_ms": None if tmux_ms is None else round(tmux_ms, 2),
        "tmux_pane_reads": tmux_looks,
        "tmux_skipped": tmux_skipped,
        "speedup_vs_pipe_shell": round(pipe_ms / call_ms, 2),
        "speedup_vs_docker_exec": round(exec_ms / call_ms, 1),
        "speedup_vs_tmux": None if tmux_ms is None else round(tmux_ms / call_ms, 1),
        "strongest_baseline": strongest,
        "speedup_vs_strongest": round(vs_strongest, 2),
        "output_1mb_ms": round(big_ms, 2),
        "pipe_shell_1mb_ms": round(big_pipe_ms, 2),
        "docker_exec_1mb_ms": round(big_exec_ms, 2),
        "snapshot_s": round(statistics.median(snaps), 4),
        "repetitions": {
            "starts": STARTS,
            "calls": CALLS,
            "rounds": ROUNDS,
            "execs": EXECS,
            "tmux_calls": TMUX_CALLS if tmux_ms is not None else 0,
            "1mb": BIG_RUNS,
            "snapshots": SNAPSHOTS,
        },
        "targets": {
            "speedup_vs_strongest": TARGET_VS_STRONGEST,
            "speedup_vs_docker_exec": TARGET_SPEEDUP,
            "container_ready_s": TARGET_READY_S,
        },
        "targets_met": vs_strongest >= TARGET_VS_STRONGEST
        and exec_ms / call_ms >= TARGET_SPEEDUP
        and ready_s < TARGET_READY_S,
    }


def _tmux_roundtrip(
    client: docker.DockerClient, task: Task, say: Callable[..., object]
) -> tuple[float | None, float | None, str]:
    """Harbor's way in its own container (the base image plus tmux): the median round trip,
    the median number of pane reads per command, or why it was skipped."""
    image = tmux_image(client, BASE_IMAGE)
    if image.tag is None:
        say(f"[yellow]Harbor's tmux baseline skipped:[/] {image.why}")
        return None, None, image.why
    say(f"`true` through tmux send-keys + capture-pane, {TMUX_CALLS} times ...")
    sb = start_sandbox(task, image.tag, labels=LABELS, client=client)
    try:
        term = TmuxTerminal(sb.api, sb.container_id, str(sb.agent_uid), task.home)
        for _ in range(3):
            term.run("true")
        looks: list[int] = []
        times = _times_ms(lambda: looks.append(term.run("true")), TMUX_CALLS)
    finally:
        sb.close()
    return statistics.median(times), statistics.median(looks), ""


def render(result: dict[str, Any]) -> Table:
    table = Table(title="depthtui bench sandbox (medians)")
    table.add_column("what")
    table.add_column("depthtui", justify="right")
    table.add_column("baseline", justify="right")
    table.add_column("ratio", justify="right")

    def ok(good: bool) -> str:
        return "[green]✓[/]" if good else "[red]✗[/]"

    call = result["call_roundtrip_ms"]
    strongest = result["strongest_baseline"]
    head = result["speedup_vs_strongest"]
    table.add_row(
        f"`true` round trip vs strongest ({strongest})",
        f"{call:.3f} ms",
        f"{call * head:.3f} ms ({strongest})",
        f"{head:.2f}x {ok(head >= TARGET_VS_STRONGEST)} (≥ {TARGET_VS_STRONGEST:g}x)",
    )
    table.add_row(
        "  vs recovery bench pipe shell",
        "",
        f"{result['pipe_shell_roundtrip_ms']:.3f} ms (exec -i bash)",
        f"{result['speedup_vs_pipe_shell']:.2f}x",
    )
    speedup = result["speedup_vs_docker_exec"]
    table.add_row(
        "  vs one docker exec each",
        "",
        f"{result['docker_exec_roundtrip_ms']:.2f} ms (docker exec)",
        f"{speedup:.0f}x {ok(speedup >= TARGET_SPEEDUP)} (≥ {TARGET_SPEEDUP:g}x)",
    )
    if result["tmux_roundtrip_ms"] is None:
        table.add_row("  vs Harbor's tmux", "", "skipped", result["tmux_skipped"][:60])
    else:
        table.add_row(
            "  vs Harbor's tmux",
            "",
            f"{result['tmux_roundtrip_ms']:.1f} ms (send-keys, capture)",
            f"{result['speedup_vs_tmux']:.0f}x",
        )
    table.add_row(
        "command printing 1 MB",
        f"{result['output_1mb_ms']:.2f} ms",
        f"{result['pipe_shell_1mb_ms']:.2f} ms (pipe shell)",
        f"{result['pipe_shell_1mb_ms'] / result['output_1mb_ms']:.1f}x",
    )
    table.add_row(
        "",
        "",
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
