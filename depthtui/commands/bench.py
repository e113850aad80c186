"""`depthtui bench ...`: speed and memory figures, each measured against a baseline in the same run.

Each benchmark is a module of devtools/bench/ exposing `measure(**options) -> dict` and
`render(result: dict) -> rich renderable`; this module only wires them to the command line, and
imports one only when its command runs (devtools is development code: nothing else in depthtui,
engine or store imports it).
"""

from __future__ import annotations

import importlib
from functools import partial

import typer

from depthtui.commands.common import JsonOption, console, fail, print_json
from depthtui.commands.executor_opts import ExecutorOpt, RayAddressOpt, executor_choice

bench_app = typer.Typer(help="Benchmarks that print figures (ratios against a same-run baseline).")

BENCHES = {
    "sandbox": (
        "devtools.bench.sandbox",
        "Per-call round trip beside the recovery bench's pipe shell, one `docker exec` per "
        "command and Harbor's tmux (headline: the fastest); 1 MB output, container start, "
        "snapshot.",
    ),
    "oracle": (
        "devtools.bench.oracle",
        "Per-call safety-oracle check and the full hash on 200- and 2,000-file homes (and "
        "after a flood of new files), beside `find` + `sha256sum` by `docker exec`.",
    ),
    "engine": (
        "devtools.bench.engine",
        "Episodes per minute with the oracle agent at 1 and 2 workers (alternated passes, "
        "medians), harness overhead per episode by phase, beside the bare Docker floor.",
    ),
    "search": (
        "devtools.bench.search",
        "Runs, turns and agreement on D of the protocol's cap search and of bisection, "
        "on a few thousand simulated tasks (shallow, deep, noisy).",
    ),
    "tui": (
        "devtools.bench.tui",
        "Figures shown from process start in a real terminal, first paint, episode open, step "
        "time and peak memory (with the report's child process) on a generated store of "
        "10,000 episodes.",
    ),
}


def _make(name: str, module: str, help_text: str) -> None:
    @bench_app.command(name=name, help=help_text)
    def _run(json_out: JsonOption = False) -> None:
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            fail(f"benchmark '{name}' is not available: {exc}")
        result = mod.measure(progress=not json_out)
        if json_out:
            print_json(result)
        else:
            console.print(mod.render(result))


def _make_engine(module: str, help_text: str) -> None:
    """`bench engine` also takes --executor: with ray, the local executor beside Ray."""

    @bench_app.command(
        name="engine",
        help=help_text + " With --executor ray: the local executor beside the Ray executor on "
        "a local Ray instance in the same run (ray_overhead_ratio; docs/ray.md).",
    )
    def _run(
        json_out: JsonOption = False,
        executor: ExecutorOpt = "local",
        ray_address: RayAddressOpt = None,
        tasks: int | None = typer.Option(
            None,
            "--tasks",
            min=1,
            help="Only the first N single-segment demo tasks (a shorter run); default all.",
        ),
    ) -> None:
        choice = executor_choice(executor, ray_address)
        name = "devtools.bench.ray" if choice.kind == "ray" else module
        if choice.kind == "ray":
            from engine.jobs.ray_executor import RayUnavailable, import_ray

            try:
                import_ray()  # without the `ray` extra: what to install, not a traceback
            except RayUnavailable as exc:
                fail(str(exc))
        try:
            mod = importlib.import_module(name)
        except ImportError as exc:
            fail(f"benchmark 'engine' is not available: {exc}")
        extra = {"address": choice.ray_address} if choice.kind == "ray" else {}
        result = mod.measure(progress=not json_out, limit=tasks, **extra)
        if json_out:
            print_json(result)
        else:
            console.print(mod.render(result))


for _name, (_module, _help) in BENCHES.items():
    (_make_engine if _name == "engine" else partial(_make, _name))(_module, _help)


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")
