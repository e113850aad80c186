"""`depthtui bench ...`: speed and memory figures, each measured against a baseline in the same run.

Each benchmark lives beside the code it measures and exposes `measure(**options) -> dict` and
`render(result: dict) -> rich renderable`; this module only wires them to the command line.
"""

from __future__ import annotations

import importlib

import typer

from depthtui.commands.common import JsonOption, console, fail, print_json

bench_app = typer.Typer(help="Benchmarks that print figures (ratios against a same-run baseline).")

BENCHES = {
    "sandbox": (
        "engine.sandbox.bench",
        "Container start, per-call round trip, 1 MB output and "
        "snapshot, beside one `docker exec` per command.",
    ),
    "oracle": (
        "engine.oracle.bench",
        "Per-call safety-oracle check on 200- and 2,000-file homes, "
        "beside `find` + `sha256sum` by `docker exec`.",
    ),
    "engine": (
        "engine.jobs.bench",
        "Episodes per minute with the oracle agent at 1 and 2 workers, "
        "and harness overhead per episode by phase.",
    ),
    "tui": (
        "depthtui.bench_tui",
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


for _name, (_module, _help) in BENCHES.items():
    _make(_name, _module, _help)


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")
