"""Report figures as PNG and SVG files (matplotlib, no display needed).

- depth_vs_work: each solved task's D against its W, one colour per dataset, D > 80 drawn apart
  above the largest cap, with the 90th-percentile lines of a reference group (the paper's figure);
- depth_histogram: how many solved tasks sit at each cap;
- pass_by_cap: pass rate of capped runs per model and cap;
- safe_success: safe-success rate by fault family (with its 95% interval).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.analysis.report_rows import Report, TaskRow
from engine.analysis.stats import order_quantile, percentile
from engine.protocol.ladder import ABOVE_LARGEST_CAP, ABOVE_LARGEST_CAP_TEXT, CAPS

# Where D > 80 is drawn: above the largest cap, on a log axis.
ABOVE_Y = 160
FORMATS = ("png", "svg")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_plots(report: Report, out_dir: Path, reference_group: str = "synthetic") -> list[Path]:
    """Write every figure the report has data for; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, draw in (
        ("depth_vs_work", lambda ax: _depth_vs_work(ax, report, reference_group)),
        ("depth_histogram", lambda ax: _depth_histogram(ax, report)),
        ("pass_by_cap", lambda ax: _pass_by_cap(ax, report)),
        ("safe_success", lambda ax: _safe_success(ax, report)),
    ):
        plt = _pyplot()
        fig, ax = plt.subplots(figsize=(7, 4.5), dpi=110)
        try:
            if not draw(ax):
                continue
            fig.tight_layout()
            for fmt in FORMATS:
                path = out_dir / f"{name}.{fmt}"
                fig.savefig(path, format=fmt, metadata={"Date": None} if fmt == "svg" else None)
                written.append(path)
        finally:
            plt.close(fig)
    return written


def _solved(report: Report) -> list[TaskRow]:
    return [t for t in report.tasks if t.figures.D is not None and t.W is not None]


def _depth_vs_work(ax: Any, report: Report, reference_group: str) -> bool:
    tasks = _solved(report)
    if not tasks:
        return False
    datasets = sorted({t.dataset for t in tasks})
    for name in datasets:
        mine = [t for t in tasks if t.dataset == name]
        xs = [max(t.W, 1) for t in mine]
        ys = [ABOVE_Y if t.figures.D == ABOVE_LARGEST_CAP else t.figures.D for t in mine]
        ax.scatter(xs, ys, label=name, alpha=0.75, s=28)
    reference = [t for t in tasks if t.group == reference_group]
    if reference:
        w90 = percentile([t.W for t in reference], 90)
        # D is ordinal: its 90th percentile is an order statistic (a cap, or >80 drawn apart).
        d90 = order_quantile([t.figures.D for t in reference], 0.9)
        d90 = ABOVE_Y if d90 == ABOVE_LARGEST_CAP else d90
        ax.axvline(w90, linestyle="--", color="grey", linewidth=1, label=f"{reference_group} W p90")
        ax.axhline(d90, linestyle=":", color="grey", linewidth=1, label=f"{reference_group} D p90")
    ax.set_xscale("log")
    # plain numbers (2, 30, 100) rather than 2×10^0 on a narrow range of W
    from matplotlib.ticker import LogFormatter

    ax.xaxis.set_major_formatter(LogFormatter())
    ax.xaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False))
    ax.set_yscale("log")
    ax.set_yticks([*CAPS, ABOVE_Y])
    ax.set_yticklabels([*map(str, CAPS), ABOVE_LARGEST_CAP_TEXT])
    ax.axhspan(CAPS[-1] * 1.4, ABOVE_Y * 1.3, color="0.93", zorder=0)
    ax.set_xlabel("work W (reference solution lines)")
    ax.set_ylabel("depth D (smallest passing cap)")
    ax.set_title("Depth against work")
    ax.legend(fontsize=7, loc="lower right")
    return True


def _depth_histogram(ax: Any, report: Report) -> bool:
    tasks = [t for t in report.tasks if t.figures.D is not None]
    if not tasks:
        return False
    labels = [*map(str, CAPS), ABOVE_LARGEST_CAP_TEXT]
    values = [*CAPS, ABOVE_LARGEST_CAP]
    depths = [t.figures.D for t in tasks]
    counts = [depths.count(v) for v in values]
    ax.bar(labels, counts, color="tab:orange")
    ax.set_xlabel("depth D")
    ax.set_ylabel("solved tasks")
    ax.set_title("Depth of solved tasks")
    return True


def _pass_by_cap(ax: Any, report: Report) -> bool:
    rows = report.pass_by_cap
    if not rows:
        return False
    for model in sorted({r.model for r in rows}):
        mine = sorted((r for r in rows if r.model == model), key=lambda r: r.cap)
        ax.plot([r.cap for r in mine], [r.rate for r in mine], marker="o", label=model)
    ax.set_xscale("log")
    ax.set_xticks(CAPS)
    ax.set_xticklabels(map(str, CAPS))
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("stated turn cap")
    ax.set_ylabel("pass rate")
    ax.set_title("Pass rate by cap")
    ax.legend(fontsize=7)
    return True


def _safe_success(ax: Any, report: Report) -> bool:
    rows = [r for r in report.safety if r.safe_success.value is not None]
    if not rows:
        return False
    labels = [f"{r.fault}\n{r.model}/{r.prompt}" for r in rows]
    values = [r.safe_success.value for r in rows]
    lows = [v - (r.safe_success.low or v) for v, r in zip(values, rows, strict=True)]
    highs = [(r.safe_success.high or v) - v for v, r in zip(values, rows, strict=True)]
    ax.bar(range(len(rows)), values, yerr=[lows, highs], capsize=3, color="tab:green")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, fontsize=7)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("safe success")
    ax.set_title("Safe success by fault family (95% CI over tasks)")
    return True
