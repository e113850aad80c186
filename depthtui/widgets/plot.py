"""Plots drawn with text: depth against work, the depth histogram and rate bars.

Depth only takes cap values, so the scatter gives each cap its own row and puts work on a log
scale across; several tasks in one cell show as a count. Datasets and models take the colours
of the report's PNG/SVG figures (engine/analysis/palette.py, colour-blind safe), a model the
same one in every table and plot.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text

from engine.analysis.palette import colours_for
from store.vocab import ABOVE_LARGEST_CAP, ABOVE_LARGEST_CAP_TEXT, CAPS


@dataclass(frozen=True)
class DepthPoint:
    task_id: str
    dataset: str
    work: int | None
    depth: int


def depth_points(report: dict[str, Any]) -> list[DepthPoint]:
    """The report's tasks that have a depth D."""
    return [
        DepthPoint(t["id"], t["dataset"], t["W"], t["D"])
        for t in report["tasks"]
        if t["D"] is not None
    ]


LEVELS = (*CAPS, ABOVE_LARGEST_CAP)
MARKERS = ("●", "■", "▲", "◆", "✚", "★")
BLOCKS = " ▏▎▍▌▋▊▉█"


def level_label(level: int) -> str:
    return ABOVE_LARGEST_CAP_TEXT if level >= ABOVE_LARGEST_CAP else str(level)


def level_index(depth: int) -> int:
    for i, cap in enumerate(LEVELS):
        if depth <= cap:
            return i
    return len(LEVELS) - 1


def bar(fraction: float, width: int) -> str:
    """A horizontal bar with eighth-cell resolution."""
    fraction = min(1.0, max(0.0, fraction))
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    return ("█" * full + (BLOCKS[part] if part else "")).ljust(width)


def depth_scatter(points: list[DepthPoint], width: int = 64) -> Text:
    """Depth (rows, by cap) against work W (columns, log scale), one marker per dataset."""
    usable = [p for p in points if p.work is not None and p.work > 0]
    out = Text()
    if not usable:
        return Text("no task has both a depth estimate and a reference solution yet", style="dim")
    datasets = sorted({p.dataset for p in usable})
    colour = colours_for(datasets)
    style_of = {d: (MARKERS[i % len(MARKERS)], colour[d]) for i, d in enumerate(datasets)}
    top = max(p.work for p in usable)
    span = math.log10(max(10, top)) or 1.0

    def column(work: int) -> int:
        return min(width - 1, int(math.log10(work) / span * (width - 1)))

    cells: dict[tuple[int, int], Counter[str]] = {}
    for p in usable:
        cells.setdefault((level_index(p.depth), column(p.work)), Counter())[p.dataset] += 1
    out.append("  D\n", style="bold")
    for row in reversed(range(len(LEVELS))):
        out.append(f"{level_label(LEVELS[row]):>4} │", style="dim")
        for col in range(width):
            counter = cells.get((row, col))
            if not counter:
                out.append(" ")
                continue
            dataset = counter.most_common(1)[0][0]
            marker, colour = style_of[dataset]
            total = sum(counter.values())
            out.append(marker if total == 1 else str(min(total, 9)), style=f"bold {colour}")
        out.append("\n")
    out.append("     └" + "─" * width + "\n", style="dim")
    ticks = [t for t in (1, 10, 100, 1000, 10000) if t <= max(10, top)]
    axis = [" "] * width
    for t in ticks:
        label = str(t)
        c = min(column(t), width - len(label))  # a label at the right edge ends there
        for i, ch in enumerate(label):
            axis[c + i] = ch
    out.append("      " + "".join(axis) + "  W (lines, log scale)\n", style="dim")
    out.append("      ")
    for d in datasets:
        marker, colour = style_of[d]
        out.append(f"{marker} ", style=f"bold {colour}")
        out.append(f"{d}   ")
    out.append("(a digit: that many tasks in one cell)", style="dim")
    return out


def depth_histogram(points: list[DepthPoint], width: int = 40) -> Text:
    counts = Counter(level_index(p.depth) for p in points)
    if not counts:
        return Text("no depth estimate yet", style="dim")
    most = max(counts.values())
    out = Text()
    for i, level in enumerate(LEVELS):
        n = counts.get(i, 0)
        out.append(f"{level_label(level):>4} │", style="dim")
        out.append(bar(n / most, width), style="cyan")
        out.append(f" {n}\n")
    return out


def pass_rate_table(
    rates: list[dict[str, Any]], colours: dict[str, str] | None = None
) -> Table | Text:
    """Pass rate by cap (the report's `pass_by_cap`), one row per model (named in its colour,
    `colours`: palette.model_colours of the report), a bar glyph per cell."""
    if not rates:
        return Text("no capped runs yet", style="dim")
    colours = colours or colours_for(r["model"] for r in rates)
    models = sorted({r["model"] for r in rates})
    caps = sorted({r["cap"] for r in rates})
    by = {(r["model"], r["cap"]): r for r in rates}
    table = Table(box=None, header_style="dim", padding=(0, 1))
    table.add_column("model")
    for cap in caps:
        table.add_column(f"cap {cap}", justify="right")
    for model in models:
        cells: list[Text] = [Text(model, style=f"bold {colours.get(model, '')}".strip())]
        for cap in caps:
            r = by.get((model, cap))
            if r is None or not r["runs"]:
                cells.append(Text("·", style="dim"))
                continue
            rate = r["rate"]
            colour = "green" if rate >= 0.66 else "yellow" if rate >= 0.33 else "red"
            cells.append(
                Text(f"{BLOCKS[max(1, round(rate * 8))]}{rate:.2f} ({r['passed']}/{r['runs']})",
                     style=colour)
            )  # fmt: skip
        table.add_row(*cells)
    return table


def safety_bars(
    rows: list[dict[str, Any]], width: int = 24, colours: dict[str, str] | None = None
) -> Text:
    """Safe success per model, prompt arm and fault family (the report's `safety` rows), each
    bar in its model's colour (`colours`: palette.model_colours of the report)."""
    if not rows:
        return Text("no fault episodes yet", style="dim")
    colours = colours or colours_for(r["model"] for r in rows)
    out = Text()
    label_width = max(len(f"{r['model']} {r['prompt']} {r['fault']}") for r in rows)
    for r in rows:
        rate = r["safe_success"]
        value = rate["value"] or 0.0
        out.append(f"{r['model']} {r['prompt']} {r['fault']}".rjust(label_width) + " │", "dim")
        out.append(bar(value, width), style=colours.get(r["model"], "green"))
        out.append(f" {value:.2f} safe ({rate['successes']}/{rate['episodes']})\n")
    return out
