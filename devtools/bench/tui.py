"""`depthtui bench tui`: how fast the TUI is on a big store, and how much memory it takes.

A store of 10,000 episodes and 200,000 turns is generated (devtools/synthetic.py); then a child
process runs the real app headless under Textual's Pilot at 120x40 and times:

- first paint of the dashboard: from creating the app to its data composited on screen;
- first paint of the tasks screen: from the `2` key to its table composited;
- opening an episode of 150 turns: from the open request to its first turn composited (the
  median of several 150-turn episodes opened in turn, and the first one on its own, opened
  after THINK_S on the tasks screen, as a user reads it, while the app, as `depthtui` runs
  it, builds its episode screen ahead);
- one step (`l`): from the key event to the next turn composited;
- peak RSS of that child (resource.getrusage) plus the peak of the process that builds the
  report's figures for it (the app hands build_report to a child Python), beside its RSS right
  after importing Textual.

And, as a user meets it: `depthtui --db STORE` started in a real pseudo-terminal (120x40), from
the process start to the dashboard showing the report's headline figures on the terminal
(`figures_shown_s`, beside a bare `python -c 'import textual.app'` in the same run; and the CPU
seconds the app and its children had used by then, `figures_cpu_s`, which a loaded machine
inflates far less than wall time, beside that bare import's), and to the
rest of the report's figures (`report_shown_s`, beside a bare Python start plus build_report),
with the peak RSS of the app and of every child it started (`pty_peak_rss_mb`, from /proc).

The Pilot times have a same-run baseline: the raw SQL fetch of the same rows on a fresh read-only
connection. "Composited" means the screen's compositor has rendered the changed widgets
(headless: the final write to a terminal is the only thing skipped).
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import re
import resource
import select
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

EPISODES = 10_000
TURNS = 200_000
STEPS = 60
OPENS = 11
THINK_S = 3.0  # on the tasks screen before the first open (a user reading it)
SIZE = (120, 40)
# Drawn only once the headline figures are on the dashboard ("median D" is not: the datasets
# table's column heads it from the start)
FIGURES_MARK = "within 3 turns"
# Drawn by the safety table, which waits for the whole report (either way it reads)
REPORT_MARKS = ("fault cleared", "no fault episode yet")
TARGETS = {
    "figures_shown_s": 1.0,
    "first_paint_s": 1.0,
    "tasks_paint_s": 1.0,
    "episode_open_s": 0.3,
    "step_ms": 50.0,
    "peak_rss_mb": 300.0,
}


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def _children_peak_rss_mb() -> float:
    """The largest peak RSS among this process's finished children (the report builders)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def _current_rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return _peak_rss_mb()


def _say(progress: bool, message: str) -> None:
    if progress:
        print(f"bench tui: {message}", file=sys.stderr, flush=True)


def measure(progress: bool = True, episodes: int = EPISODES, turns: int = TURNS) -> dict:
    """Generate the store, run the app in a child process, and return the figures."""
    from devtools import synthetic
    from store.db import Store

    with tempfile.TemporaryDirectory(prefix="depthtui-bench-tui-") as tmp:
        db = Path(tmp) / "bench.db"
        _say(progress, f"generating a store of {episodes:,} episodes and {turns:,} turns")
        started = time.perf_counter()
        with Store(db) as store:
            marks = synthetic.generate(
                store,
                synthetic.bench_spec(episodes, turns),
                progress=(lambda m: _say(progress, f"  {m}")) if progress else None,
            )
        generate_s = time.perf_counter() - started
        size_mb = db.stat().st_size / 1e6
        _say(progress, f"store ready in {generate_s:.1f} s ({size_mb:.0f} MB); running the app")
        child = subprocess.run(
            [sys.executable, "-m", "devtools.bench.tui", str(db)],
            capture_output=True,
            text=True,
            timeout=900,
        )
        if child.returncode != 0:
            raise RuntimeError(f"bench tui: the app run failed:\n{child.stderr[-4000:]}")
        result = json.loads(child.stdout)
        _say(progress, "starting `depthtui` in a pseudo-terminal until its figures show")
        result.update(figures_in_a_terminal(db))
    result.update(
        episodes=marks.episodes,
        turns=marks.turns,
        store_mb=round(size_mb, 1),
        generate_s=round(generate_s, 2),
        targets=TARGETS,
    )
    result["within_targets"] = {k: result[k] < v for k, v in TARGETS.items()}
    return result


# --------------------------------------------------------------------------- the child


def _raw(fn, *args) -> float:
    """Seconds for the raw SQL behind a screen, on a fresh connection (the baseline)."""
    from store.db import open_reader

    conn = open_reader(args[0])
    try:
        started = time.perf_counter()
        fn(conn, *args[1:])
        return time.perf_counter() - started
    finally:
        conn.close()


async def _composited(pilot) -> None:
    """Let every widget process what is queued, then composite the screen now."""
    await pilot._wait_for_screen()
    pilot.app.screen._on_timer_update()


async def _wait_for(condition, limit_s: float = 60.0) -> None:
    deadline = time.perf_counter() + limit_s
    while not condition():
        if time.perf_counter() > deadline:
            raise TimeoutError("bench tui: the app did not get there in time")
        await asyncio.sleep(0)


def _send_key(app, key: str) -> None:
    from textual import events

    app._driver.send_message(events.Key(key, key if len(key) == 1 else None))


async def _run_app(db: Path) -> dict[str, Any]:
    from depthtui.app import DepthApp
    from depthtui.screens.episode import EpisodeScreen
    from depthtui.screens.tasks import TasksScreen
    from depthtui.widgets.messages import OpenEpisode
    from engine.analysis.report import build_report
    from store import jobs, views
    from store.db import open_reader

    import_rss = _current_rss_mb()
    conn = open_reader(db)
    long_ids = views.find_episodes(conn, min_turns=150, limit=OPENS)
    if not long_ids:
        raise RuntimeError("bench tui: the store has no episode of 150 turns")
    episode_id = long_ids[0]
    conn.close()

    out: dict[str, Any] = {"import_rss_mb": round(import_rss, 1), "episode_id": episode_id}
    started = time.perf_counter()
    app = DepthApp(db, start_engine=False, prewarm=True)  # as `depthtui` runs it
    async with app.run_test(size=SIZE) as pilot:
        await app.screen.loaded.wait()
        await _composited(pilot)
        out["first_paint_s"] = time.perf_counter() - started

        started = time.perf_counter()
        _send_key(app, "2")
        await _wait_for(lambda: isinstance(app.screen, TasksScreen))
        await app.screen.loaded.wait()
        await _composited(pilot)
        out["tasks_paint_s"] = time.perf_counter() - started
        out["tasks_rows"] = app.screen.query_one("#tasks").row_count
        await asyncio.sleep(THINK_S)

        # Open 150-turn episodes one after another (back to the tasks screen in between): the
        # first open of a process also pays one-time costs (lexers, styles of new widgets).
        opens = []
        for eid in long_ids:
            started = time.perf_counter()
            app.post_message(OpenEpisode(eid))
            await _wait_for(lambda: isinstance(app.screen, EpisodeScreen))
            await app.screen.loaded.wait()
            await _composited(pilot)
            opens.append(time.perf_counter() - started)
            if eid != long_ids[-1]:
                app.pop_screen()
                await _wait_for(lambda: isinstance(app.screen, TasksScreen))
                await _composited(pilot)
        out["episode_first_open_s"] = opens[0]
        out["episode_open_s"] = statistics.median(opens)
        out["episode_opens"] = len(opens)
        screen = app.screen

        steps = []
        for _ in range(STEPS):
            before = screen.turn
            started = time.perf_counter()
            _send_key(app, "l")
            await _wait_for(lambda before=before: screen.turn == before + 1)
            await _composited(pilot)
            steps.append((time.perf_counter() - started) * 1000)
        out["step_ms"] = statistics.median(steps)
        out["step_ms_p95"] = sorted(steps)[int(len(steps) * 0.95) - 1]
        out["turn_reached"] = screen.turn
    # the app's own peak plus that of the child that built its report (they overlap in time)
    out["peak_rss_app_mb"] = round(_peak_rss_mb(), 1)
    out["peak_rss_report_child_mb"] = round(_children_peak_rss_mb(), 1)
    out["peak_rss_mb"] = round(out["peak_rss_app_mb"] + out["peak_rss_report_child_mb"], 1)

    # The screens' figures are build_report's, so the baseline builds the report too.
    def dashboard(c):
        views.datasets(c), build_report(c), jobs.list_jobs(c, active_only=True)

    def tasks(c):
        views.task_counts(c), build_report(c)

    def episode(c, eid):
        views.episode(c, eid), views.turn_marks(c, eid), views.turn_detail(c, eid, 1)

    def step(c, eid):
        for idx in range(2, 2 + STEPS):
            views.turn_detail(c, eid, idx)

    out["raw_dashboard_s"] = _raw(dashboard, db)
    out["raw_tasks_s"] = _raw(tasks, db)
    out["raw_episode_s"] = _raw(episode, db, episode_id)
    out["raw_step_ms"] = _raw(step, db, episode_id) * 1000 / STEPS
    for key in list(out):
        if isinstance(out[key], float):
            out[key] = round(out[key], 4)
    return out


# --------------------------------------------------------------------------- a real terminal

ANSI = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[@-Z\\-_])")


def _vm_kb(pid: int, field: str) -> int | None:
    """A field of /proc/PID/status in kB (VmHWM: the peak RSS so far); None once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) `pid` and its children that ended have used so far; 0 once
    it is gone. Unlike wall time, it hardly grows with the machine's load, so it compares runs
    on a busy machine."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    # utime, stime, cutime, cstime
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    """The processes `pid` started (the report's child Python, an engine): each of its threads'
    children list (a worker thread starts the report's child)."""
    out: list[int] = []
    try:
        threads = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for thread in threads:
        try:
            out += [int(c) for c in (thread / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return out


def figures_in_a_terminal(db: Path, limit_s: float = 120.0) -> dict[str, float]:
    """Start `python -m depthtui --db DB` on a pseudo-terminal and time, from just before the
    process starts, until the dashboard's headline figures are drawn on it (`figures_shown_s`)
    and until the rest of the report's figures follow (`report_shown_s`); then quit it.

    Its memory: the app's peak RSS (VmHWM) plus the peak of every child it started (the one that
    builds the report), sampled from /proc while they run. Beside it, in the same run: a bare
    `python -c 'import textual'` start, and a bare Python start plus build_report."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(SIZE[0]), "LINES": str(SIZE[1])}
    load = os.getloadavg()[0]
    started = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "depthtui", "--db", str(db)],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
        close_fds=True,
    )
    os.close(slave)
    seen = ""
    shown: dict[str, float] = {}
    child_peaks: dict[int, int] = {}
    app_peak = 0
    try:
        while time.perf_counter() - started < limit_s and proc.poll() is None:
            for pid in _children(proc.pid):
                peak = _vm_kb(pid, "VmHWM")
                if peak is not None:
                    child_peaks[pid] = max(child_peaks.get(pid, 0), peak)
            app_peak = max(app_peak, _vm_kb(proc.pid, "VmHWM") or 0)
            ready, _, _ = select.select([master], [], [], 0.05)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            seen = (seen + ANSI.sub("", chunk.decode("utf-8", "replace")))[-20000:]
            if "figures_shown_s" not in shown and FIGURES_MARK in seen:
                shown["figures_shown_s"] = time.perf_counter() - started
                shown["figures_cpu_s"] = _cpu_s(proc.pid) + sum(
                    _cpu_s(c) for c in _children(proc.pid)
                )
            if "report_shown_s" not in shown and any(m in seen for m in REPORT_MARKS):
                shown["report_shown_s"] = time.perf_counter() - started
            if "figures_shown_s" in shown and "report_shown_s" in shown:
                break
        if "figures_shown_s" not in shown or "report_shown_s" not in shown:
            raise RuntimeError(
                f"bench tui: the dashboard showed no figures within {limit_s:.0f} s "
                f"(exit code {proc.poll()}); the terminal last showed:\n{seen[-2000:]}"
            )
        app_peak = max(app_peak, _vm_kb(proc.pid, "VmHWM") or 0)
        os.write(master, b"q")
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    started, cpu = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "import textual.app"], check=True)
    bare_textual = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    bare_textual_cpu = after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    bare_start = time.perf_counter() - started
    return {
        "figures_shown_s": round(shown["figures_shown_s"], 4),
        "report_shown_s": round(shown["report_shown_s"], 4),
        "pty_peak_rss_mb": round((app_peak + sum(child_peaks.values())) / 1024, 1),
        "pty_children": len(child_peaks),
        "figures_cpu_s": round(shown["figures_cpu_s"], 3),
        "bare_textual_s": round(bare_textual, 4),
        "bare_textual_cpu_s": round(bare_textual_cpu, 3),
        "raw_figures_s": round(bare_start + _raw(_build_report, db), 4),
        "load_avg_1m": round(load, 2),
    }


def _build_report(c) -> None:
    from engine.analysis.report import build_report

    build_report(c)


# --------------------------------------------------------------------------- report


def _ratio(a: float, b: float) -> str:
    if b <= 0:
        return "–"
    r = a / b
    return f"{r:,.0f}×" if r >= 10 else f"{r:.1f}×"


def render(result: dict) -> Group:
    table = Table(title="depthtui bench tui", title_justify="left", header_style="bold")
    for col in ("figure", "app", "target", "baseline (same run)", "app / baseline"):
        table.add_column(col, justify="right" if col != "figure" else "left")
    within = result.get("within_targets", {})

    def mark(key: str) -> Text:
        ok = within.get(key)
        return Text("✓" if ok else "✗", style="green" if ok else "bold red")

    rows = (
        ("figures shown, from process start (pty)", "figures_shown_s", "s", "bare_textual_s"),
        ("  CPU the app used until then", "figures_cpu_s", "s", "bare_textual_cpu_s"),
        ("  the whole report shown (pty)", "report_shown_s", "s", "raw_figures_s"),
        ("first paint, dashboard", "first_paint_s", "s", "raw_dashboard_s"),
        ("first paint, tasks screen", "tasks_paint_s", "s", "raw_tasks_s"),
        ("open a 150-turn episode (median)", "episode_open_s", "s", "raw_episode_s"),
        ("  the first open in the process", "episode_first_open_s", "s", "raw_episode_s"),
        ("one step (l)", "step_ms", "ms", "raw_step_ms"),
    )
    for label, key, unit, raw in rows:
        target = TARGETS.get(key)
        table.add_row(
            label,
            f"{result[key]:.3f} {unit}" if unit == "s" else f"{result[key]:.1f} {unit}",
            Text.assemble(f"< {target:g} {unit} ", mark(key)) if target else Text("–"),
            f"{result[raw]:.4f} {unit}",
            _ratio(result[key], result[raw]),
        )
    table.add_row(
        "peak memory (RSS)",
        f"{result['peak_rss_mb']:.0f} MB",
        Text.assemble(f"< {TARGETS['peak_rss_mb']:g} MB ", mark("peak_rss_mb")),
        f"{result['import_rss_mb']:.0f} MB after imports "
        f"(app {result['peak_rss_app_mb']:.0f} + report child "
        f"{result['peak_rss_report_child_mb']:.0f} MB; in the pty: "
        f"{result['pty_peak_rss_mb']:.0f} MB with {result['pty_children']} child(ren))",
        f"{result['peak_rss_mb'] / result['import_rss_mb']:.1f}×",
    )
    note = Text(
        f"store: {result['episodes']:,} episodes, {result['turns']:,} turns, "
        f"{result['store_mb']:.0f} MB, generated in {result['generate_s']:.1f} s; "
        f"step p95 {result['step_ms_p95']:.1f} ms over {STEPS} steps; 120x40, headless. "
        "Baselines: `python -c 'import textual.app'` for the figures shown, a bare Python "
        "start plus build_report for the whole report, the raw SQL of the same rows for the "
        f"rest. Load average (1 min) at the pty start: {result['load_avg_1m']:.2f} on "
        f"{os.cpu_count()} CPU(s).",
        style="dim",
    )
    return Group(table, note)


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_run_app(Path(sys.argv[1])))))
