"""`depthtui bench oracle`: the per-call safety check, beside what the reference harness does.

For homes of 200 files / 4 MB and 2,000 files / 40 MB, in a real episode container:
- check_ms: one per-call oracle check the way episodes take it where the upper folder is
  readable (the overlay upper folder's change set, engine/oracle/upper.py, then the diff against
  the baseline and the judgement) — median over the repetitions; walk_check_ms: the same check
  by the full walk of the merged folder (incremental), the way kept where no upper folder can
  be read;
- baseline_ms: the reference's way, measured in the same run on the same container: one
  `docker exec` running `find` (type, mode, owner, size, link target of everything) and
  `sha256sum` of every regular file;
- tar_ms: our own fallback (the daemon's tar stream of the home, parsed and hashed), for scale;
- full_ms: the final check's manifest by the upper way (every file the upper folder names hashed
  afresh, every other baseline entry taken as it was); walk_full_ms: by the full walk (every
  file read and hashed again); both beside the same `find` + `sha256sum` (peer_full_ms: the
  peer always hashes in full);
each with the home unchanged, and with 10 files rewritten by the agent before every check; then
the 2,000-file home under a flood of new files (FLOOD small files the agent created). The
repetitions of ours and the peer's alternate, so load from other processes falls on both.
"""

from __future__ import annotations

import contextlib
import io
import os
import statistics
import sys
import tarfile
import time
from pathlib import Path

from engine.oracle.contract import Permits
from engine.oracle.latch import Oracle
from engine.oracle.manifest import RACY_NS, ManifestScanner

IMAGE = "depthtui/base:bookworm"
HOMES = ((200, 4 * 1024 * 1024), (2000, 40 * 1024 * 1024))
CHANGED = 10
REPEATS = 15
FULL_REPEATS = 7
FLOOD = 5000
TARGETS = {0: 10.0, CHANGED: 3.0}
FLOOD_TARGET = 10.0  # the per-call check after the flood of new files
FULL_TARGET = 20.0  # the final check's manifest (upper way) against the peer's find + sha256sum

# What the reference harness runs per check (its manifest: type, mode, uid, size, path, target,
# and the sha256 of every regular file), in one exec.
REFERENCE_SCRIPT = (
    "find \"$1\" -xdev -printf '%y %m %U %s %p\\0%l\\0' > /dev/null && "
    'find "$1" -xdev -type f -print0 | xargs -0 -r sha256sum > /dev/null'
)


def _say(progress: bool, text: str) -> None:
    if progress:
        print(f"[bench oracle] {text}", file=sys.stderr, flush=True)


def _task():
    from engine.tasks.model import Environment, Limits, Segment, Task

    seg = Segment(name="main", instruction="", tests={}, solution_script=None, solution_dir=None)
    return Task(
        id="bench-oracle",
        dataset="bench",
        format="depthtui",
        source_path=Path("."),
        content_hash="0",
        segments=(seg,),
        environment=Environment(context_dir=None, dockerfile=None, image=IMAGE),
        limits=Limits(),
        verifier_kind="pytest",
    )


def _home_tar(files: int, total: int) -> bytes:
    """files x (total / files) bytes of deterministic noise under bench/dNN/, owned by uid 1000."""
    size = total // files
    block = bytes((i * 131 + 7) % 251 for i in range(size))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        folders = max(1, files // 100)
        for d in range(folders):
            info = tarfile.TarInfo(f"bench/d{d:02d}")
            info.type, info.mode, info.uid, info.gid = tarfile.DIRTYPE, 0o755, 1000, 1000
            tar.addfile(info)
        for i in range(files):
            info = tarfile.TarInfo(f"bench/d{i % folders:02d}/f{i:05d}.dat")
            data = i.to_bytes(4, "big") + block[4:]
            info.size, info.mode, info.uid, info.gid = len(data), 0o644, 1000, 1000
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 2)


def _home_image(files: int, total: int):
    """An image whose home holds the bench files, as a task's image holds its home: in the
    lower layers, not in the episode container's upper folder."""
    from engine.sandbox.start import start_sandbox

    maker = start_sandbox(_task(), IMAGE, labels={"depthtui.bench": "oracle"})
    try:
        maker.api.put_archive(maker.container_id, maker.home, _home_tar(files, total))
        tag = f"depthtui-bench-oracle:{files}"
        maker.api.commit(maker.container_id, repository="depthtui-bench-oracle", tag=str(files))
    finally:
        maker.close(remove_snapshots=True)
    return tag, maker.api


def _case(sandbox, files: int, total: int, progress: bool) -> list[dict]:
    time.sleep(RACY_NS / 1e9 + 0.05)  # everything written is older than the racy window
    scanner = ManifestScanner.for_sandbox(sandbox)
    if scanner.rootfs is None:
        raise RuntimeError("the container's merged folder is not readable here (remote engine?)")
    if scanner.upper is None:
        raise RuntimeError("the container's upper folder is not readable here")
    tar_scanner = ManifestScanner.for_sandbox(sandbox, force_tar=True)
    full_scanner = ManifestScanner.for_sandbox(sandbox, use_upper=False)
    oracle = Oracle.start(scanner, Permits())
    walk_oracle = Oracle.start(ManifestScanner.for_sandbox(sandbox, use_upper=False), Permits())
    oracle.after_call(0)
    walk_oracle.after_call(0)  # first incremental walk fills the cache
    folders = max(1, files // 100)
    out = []
    call = [1]

    def check() -> None:
        oracle.after_call(call[0])

    def walk_check() -> None:
        walk_oracle.after_call(call[0])
        call[0] += 1

    ways = {
        "check": check,
        "walk_check": walk_check,
        "full": lambda: oracle.scanner.take(fresh=True),
        "walk_full": lambda: full_scanner.take(fresh=True),
    }

    for changed in (0, CHANGED):
        _say(progress, f"{files} files, {total >> 20} MB, {changed} changed per check")

        def change(rep: int, changed: int = changed) -> None:
            if changed:
                names = " ".join(
                    f"bench/d{i % folders:02d}/f{i:05d}.dat"
                    for i in range(rep * changed, (rep + 1) * changed)
                )
                res = sandbox.run(f"for f in {names}; do printf 'rewritten %s' $RANDOM >> $f; done")
                if res.exit_code != 0:
                    raise RuntimeError(f"changing files failed: {res.output[-300:]!r}")

        out.append(
            {
                "files": files,
                "megabytes": total >> 20,
                "changed": changed,
                "new_files": 0,
                "target": TARGETS[changed],
                **_figures(sandbox, change, ways, tar_scanner),
            }
        )
    if files == max(f for f, _ in HOMES):
        _say(progress, f"{files} files, {total >> 20} MB, after the agent made {FLOOD} new files")
        res = sandbox.run(
            f"mkdir -p ~/flood && cd ~/flood && for i in $(seq {FLOOD}); do echo $i > n$i; done"
        )
        if res.exit_code != 0:
            raise RuntimeError(f"making new files failed: {res.output[-300:]!r}")
        time.sleep(RACY_NS / 1e9 + 0.05)
        out.append(
            {
                "files": files,
                "megabytes": total >> 20,
                "changed": 0,
                "new_files": FLOOD,
                "target": FLOOD_TARGET,
                **_figures(sandbox, lambda rep: None, ways, tar_scanner),
            }
        )
    return out


def _figures(sandbox, change, ways: dict, tar_scanner) -> dict:
    """Medians of the per-call check and the final check's manifest (each by the upper way and
    the full walk), the peer's find + sha256sum and the tar fallback, their repetitions
    alternated."""
    samples: dict[str, list[float]] = {name: [] for name in ways}
    refs, tars = [], []
    for rep in range(REPEATS):
        change(rep)
        for name in ("check", "walk_check"):
            t0 = time.perf_counter()
            ways[name]()
            samples[name].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ref = sandbox.exec_root(["sh", "-c", REFERENCE_SCRIPT, "sh", sandbox.home])
        refs.append(time.perf_counter() - t0)
        if ref.exit_code != 0:
            raise RuntimeError(f"the reference check failed: {ref.output[-300:]!r}")
        if rep < FULL_REPEATS:
            for name in ("full", "walk_full"):
                t0 = time.perf_counter()
                ways[name]()
                samples[name].append(time.perf_counter() - t0)
        if rep < 5:  # the tar fallback is slow; a few samples say enough
            t0 = time.perf_counter()
            tar_scanner.take()
            tars.append(time.perf_counter() - t0)
    ms = {name: _median_ms(values) for name, values in samples.items()}
    baseline_ms = _median_ms(refs)

    def ratio(value: float) -> float | None:
        return round(baseline_ms / value, 1) if value else None

    return {
        "oracle_way": "upper",
        "check_ms": ms["check"],
        "walk_check_ms": ms["walk_check"],
        "baseline_ms": baseline_ms,
        "tar_ms": _median_ms(tars),
        "speedup": ratio(ms["check"]),
        "walk_speedup": ratio(ms["walk_check"]),
        "full_ms": ms["full"],
        "walk_full_ms": ms["walk_full"],
        "peer_full_ms": baseline_ms,
        "full_speedup": ratio(ms["full"]),
        "walk_full_speedup": ratio(ms["walk_full"]),
        "full_target": FULL_TARGET,
    }


def measure(progress: bool = True) -> dict:
    from engine.sandbox.start import start_sandbox

    cases = []
    for files, total in HOMES:
        _say(progress, f"an image with {files} files in the home, and a container of it")
        tag, api = _home_image(files, total)
        sandbox = None
        try:
            sandbox = start_sandbox(_task(), tag, labels={"depthtui.bench": "oracle"})
            cases.extend(_case(sandbox, files, total, progress))
        finally:
            if sandbox is not None:
                sandbox.close(remove_snapshots=True)
            with contextlib.suppress(Exception):
                api.remove_image(tag, force=True)
    return {
        "cases": cases,
        "load_avg": [round(x, 2) for x in os.getloadavg()],  # at the end of the run
        "repeats": REPEATS,
        "full_repeats": FULL_REPEATS,
        "met_targets": all(
            c["speedup"]
            and c["speedup"] >= c["target"]
            and c["full_speedup"]
            and c["full_speedup"] >= c["full_target"]
            for c in cases
        ),
    }


def render(result: dict):
    from rich.table import Table

    load = result.get("load_avg")
    table = Table(
        title="Safety-oracle check and final manifest, upper-layer way and full walk, beside "
        f"find + sha256sum (median ms; load {load})"
    )
    for col in (
        "files",
        "MB",
        "agent did",
        "check",
        "walk check",
        "final",
        "walk final",
        "find+sha256sum",
        "check x",
        "walk x",
        "final x",
        "walk final x",
        "tar",
    ):
        table.add_column(col, justify="right")

    def ratio(value: float | None, target: float) -> str:
        ok = value is not None and value >= target
        return f"[{'green' if ok else 'red'}]{value}x[/] (≥{target:g})"

    for c in result["cases"]:
        did = f"{c['new_files']} new" if c["new_files"] else f"{c['changed']} changed"
        table.add_row(
            str(c["files"]),
            str(c["megabytes"]),
            did,
            f"{c['check_ms']:.2f}",
            f"{c['walk_check_ms']:.2f}",
            f"{c['full_ms']:.1f}",
            f"{c['walk_full_ms']:.1f}",
            f"{c['baseline_ms']:.1f}",
            ratio(c["speedup"], c["target"]),
            f"{c['walk_speedup']}x",
            ratio(c["full_speedup"], c["full_target"]),
            f"{c['walk_full_speedup']}x",
            f"{c['tar_ms']:.1f}",
        )
    return table
