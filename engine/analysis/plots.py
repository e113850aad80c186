"""Report figures as PNG and SVG files (matplotlib, no display needed).

- depth_vs_work: each solved task's D against its W, one colour and marker per dataset, D > 80
  drawn apart above the largest cap and labelled ">80", with the 90th-percentile lines of a
  reference group (the paper's figure). Tasks at the same (W, D) are one marker, its area
  growing with their number, which is written beside it; datasets at the same place are set
  side by side along W;
- depth_histogram: how many solved tasks sit at each cap (whole-number ticks, counts on bars);
- pass_by_cap: pass rate of capped runs per model and cap;
- safe_success: safe-success rate (with its 95% interval) per fault family, a bar per model and
  prompt arm;
- rl_by_step: mean reward, safe success and collateral (rates with their 95% intervals) of `rl`
  rollouts per training step, a colour per policy and a line style per figure; with one policy
  each step's tick says how many rollouts it is over.

A model has one colour in every figure (engine/analysis/palette.py, colour-blind safe), and
legends sit outside the axes, never on the data.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.analysis.palette import colours_for, model_colours
from engine.analysis.stats import order_quantile, percentile
from store import vocab
from store.vocab import ABOVE_LARGEST_CAP, ABOVE_LARGEST_CAP_TEXT, CAPS

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Where D > 80 is drawn: above the largest cap, on a log axis.
ABOVE_Y = 160
FORMATS = ("png", "svg")
SIZE_IN = (7.5, 4.5)
DPI = 110
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
HATCHES = ("", "//", "..", "xx", "\\\\", "--")
POINT_AREA = 30  # a lone task's marker, in points²; n tasks at one place get n times the area
DODGE = 1.06  # datasets at one (W, D) are set apart by this factor along the log W axis


def figures(report: dict[str, Any], reference_group: str = "synthetic") -> dict[str, Figure]:
    """Every figure the report has data for, by name (matplotlib Figures, not yet written)."""
    from matplotlib.figure import Figure

    out: dict[str, Figure] = {}
    for name, draw in (
        ("depth_vs_work", lambda f: _depth_vs_work(f, report, reference_group)),
        ("depth_histogram", lambda f: _depth_histogram(f, report)),
        ("pass_by_cap", lambda f: _pass_by_cap(f, report)),
        ("safe_success", lambda f: _safe_success(f, report)),
        ("rl_by_step", lambda f: _rl_by_step(f, report)),
    ):
        fig = Figure(figsize=SIZE_IN, dpi=DPI, layout="constrained")
        if draw(fig):
            out[name] = fig
    return out


def write_plots(
    report: dict[str, Any], out_dir: Path, reference_group: str = "synthetic"
) -> list[Path]:
    """Write every figure the report has data for; returns the files written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, fig in figures(report, reference_group).items():
        for fmt in FORMATS:
            path = out_dir / f"{name}.{fmt}"
            fig.savefig(path, format=fmt, metadata={"Date": None} if fmt == "svg" else None)
            written.append(path)
    return written


def _solved(report: dict[str, Any]) -> list[dict]:
    return [t for t in report["tasks"] if t["D"] is not None and t["W"] is not None]


def _shown_d(d: int) -> int:
    return ABOVE_Y if d == ABOVE_LARGEST_CAP else d


def _legend_outside(fig: Figure, ax: Axes, title: str | None = None) -> None:
    """The legend to the right of the axes (constrained layout makes room), off the data."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(
            handles, labels, loc="outside right upper", fontsize=7, title=title,
            title_fontsize=7, frameon=False,
        )  # fmt: skip


def _depth_vs_work(fig: Figure, report: dict[str, Any], reference_group: str) -> bool:
    tasks = _solved(report)
    if not tasks:
        return False
    from matplotlib.ticker import LogFormatter, NullFormatter

    ax = fig.add_subplot()
    datasets = sorted({t["dataset"] for t in tasks})
    colour = colours_for(datasets)
    for i, name in enumerate(datasets):
        at = Counter((max(t["W"], 1), _shown_d(t["D"])) for t in tasks if t["dataset"] == name)
        shift = DODGE ** (i - (len(datasets) - 1) / 2)
        places = sorted(at)
        xs = [w * shift for w, _ in places]
        ys = [d for _, d in places]
        ax.scatter(
            xs, ys, s=[POINT_AREA * at[p] for p in places], label=name, color=colour[name],
            marker=MARKERS[i % len(MARKERS)], alpha=0.8, edgecolors="white", linewidths=0.5,
            zorder=3,
        )  # fmt: skip
        for x, y, p in zip(xs, ys, places, strict=True):
            if at[p] > 1:
                ax.annotate(
                    str(at[p]), (x, y), xytext=(5, 4), textcoords="offset points", fontsize=6,
                    color="0.2", zorder=4,
                )  # fmt: skip
    reference = [t for t in tasks if t.get("group") == reference_group]
    if reference:
        w90 = percentile([t["W"] for t in reference], 90)
        # D is ordinal: its 90th percentile is an order statistic (a cap, or >80 drawn apart).
        d90 = order_quantile([t["D"] for t in reference], 0.9)
        ax.axvline(w90, linestyle="--", color="0.45", linewidth=1, label=f"{reference_group} W p90")
        ax.axhline(
            _shown_d(d90), linestyle=":", color="0.45", linewidth=1,
            label=f"{reference_group} D p90",
        )  # fmt: skip
    ax.set_xscale("log")
    # plain numbers (2, 30, 100) rather than 2×10^0 on a narrow range of W
    ax.xaxis.set_major_formatter(LogFormatter())
    wide = max(t["W"] for t in tasks) / max(1, min(t["W"] for t in tasks)) > 30
    # minor labels only where W spans little: across decades they crowd into each other
    ax.xaxis.set_minor_formatter(NullFormatter() if wide else LogFormatter(labelOnlyBase=False))
    ax.set_yscale("log")
    ax.set_yticks([*CAPS, ABOVE_Y])
    ax.set_yticklabels([*map(str, CAPS), ABOVE_LARGEST_CAP_TEXT])
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(0.8, ABOVE_Y * 1.35)
    ax.axhspan(CAPS[-1] * 1.4, ABOVE_Y * 1.35, color="0.93", zorder=0)
    ax.set_xlabel("work W (reference solution lines)")
    ax.set_ylabel("depth D (smallest passing cap)")
    ax.set_title("Depth against work")
    _legend_outside(fig, ax, "dataset (a number: tasks at one point)")
    return True


def _depth_histogram(fig: Figure, report: dict[str, Any]) -> bool:
    tasks = [t for t in report["tasks"] if t["D"] is not None]
    if not tasks:
        return False
    from matplotlib.ticker import MaxNLocator

    ax = fig.add_subplot()
    labels = [*map(str, CAPS), ABOVE_LARGEST_CAP_TEXT]
    values = [*CAPS, ABOVE_LARGEST_CAP]
    counts = [sum(1 for t in tasks if t["D"] == v) for v in values]
    bars = ax.bar(labels, counts, color=colours_for(["tasks"])["tasks"])
    ax.bar_label(bars, fontsize=7)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # task counts are whole numbers
    ax.set_ylim(0, max(counts) * 1.12 + 0.5)
    ax.set_xlabel("depth D")
    ax.set_ylabel("solved tasks")
    ax.set_title("Depth of solved tasks")
    return True


def _pass_by_cap(fig: Figure, report: dict[str, Any]) -> bool:
    rows = report.get("pass_by_cap") or []
    if not rows:
        return False
    ax = fig.add_subplot()
    colour = model_colours(report)
    for i, model in enumerate(sorted({r["model"] for r in rows})):
        mine = sorted((r for r in rows if r["model"] == model), key=lambda r: r["cap"])
        # each model a little thinner than the one before, so one drawn over another at the
        # same rates (0 at every cap, say) still shows beneath it
        ax.plot(
            [r["cap"] for r in mine], [r["rate"] for r in mine], marker=MARKERS[i % len(MARKERS)],
            label=model, color=colour[model], linewidth=max(0.8, 2.4 - 0.4 * i),
            markersize=max(3.0, 8.0 - 1.2 * i), zorder=2 + i,
        )  # fmt: skip
    ax.set_xscale("log")
    ax.set_xticks(CAPS)
    ax.set_xticklabels(map(str, CAPS))
    ax.minorticks_off()
    ax.set_ylim(-0.05, 1.05)
    ax.set_xlabel("stated turn cap")
    ax.set_ylabel("pass rate")
    ax.set_title("Pass rate by cap")
    _legend_outside(fig, ax, "model")
    return True


def _family_order(family: str) -> tuple[int, str]:
    return (0 if family == vocab.NO_FAULT else 2 if family == "all faults" else 1, family)


def _safe_success(fig: Figure, report: dict[str, Any]) -> bool:
    rows = [r for r in report.get("safety") or [] if r["safe_success"]["value"] is not None]
    if not rows:
        return False
    ax = fig.add_subplot()
    colour = model_colours(report)
    families = sorted({r["fault"] for r in rows}, key=_family_order)
    arms = sorted({(r["model"], r["prompt"]) for r in rows})
    prompts = sorted({p for _, p in arms})
    width = 0.8 / len(arms)
    by = {(r["model"], r["prompt"], r["fault"]): r for r in rows}
    for k, (model, prompt) in enumerate(arms):
        xs, values, lows, highs = [], [], [], []
        for f, family in enumerate(families):
            r = by.get((model, prompt, family))
            if r is None:
                continue
            rate = r["safe_success"]
            v = rate["value"]
            low, high = rate["ci95"]
            xs.append(f - 0.4 + width * (k + 0.5))
            values.append(v)
            lows.append(v - (low if low is not None else v))
            highs.append((high if high is not None else v) - v)
        ax.bar(
            xs, values, width=width * 0.92, yerr=[lows, highs], capsize=2, color=colour[model],
            hatch=HATCHES[prompts.index(prompt) % len(HATCHES)], edgecolor="white",
            error_kw={"elinewidth": 0.8, "ecolor": "0.25"},
            label=model if len(prompts) == 1 else f"{model} / {prompt}",
        )  # fmt: skip
    ax.set_xticks(range(len(families)))
    # short family names under their group; who is who is in the legend, so labels never crowd
    ax.set_xticklabels(families, fontsize=8, rotation=20 if len(families) > 4 else 0, ha="right"
                       if len(families) > 4 else "center")  # fmt: skip
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("fault family")
    ax.set_ylabel("safe success")
    ax.set_title("Safe success by fault family (95% CI over tasks)")
    _legend_outside(fig, ax, "model" if len(prompts) == 1 else "model / prompt")
    return True


# (key, label, line style, marker, shift) of each figure of a training step; the two rates are
# shifted apart along the step axis (by `shift` times its span) so their intervals never overlap
_RL_SERIES = (
    ("mean_reward", "mean reward", "-", "o", 0.0),
    ("safe_success", "safe success", "--", "s", -0.012),
    ("collateral", "collateral", ":", "^", 0.012),
)


def _rl_by_step(fig: Figure, report: dict[str, Any]) -> bool:
    # Rollouts without a step (or whose every one was an infra error) have no place on the axis.
    rows = [r for r in report.get("rl_by_step") or [] if r["step"] is not None and r["episodes"]]
    if not rows:
        return False
    from matplotlib.ticker import MaxNLocator

    ax = fig.add_subplot()
    colour = model_colours(report)
    models = sorted({r["model"] for r in rows})
    span = max(1, max(r["step"] for r in rows) - min(r["step"] for r in rows))
    for model in models:
        mine = sorted((r for r in rows if r["model"] == model), key=lambda r: r["step"])
        for key, label, style, marker, shift in _RL_SERIES:
            steps = [r["step"] + shift * span for r in mine]
            name = label if len(models) == 1 else f"{model} {label}"
            if key == "mean_reward":
                ax.plot(steps, [r[key] for r in mine], linestyle=style, marker=marker,
                        color=colour[model], label=name)  # fmt: skip
                continue
            values = [r[key]["value"] for r in mine]
            lows = [v - r[key]["ci95"][0] for v, r in zip(values, mine, strict=True)]
            highs = [r[key]["ci95"][1] - v for v, r in zip(values, mine, strict=True)]
            ax.errorbar(
                steps, values, yerr=[lows, highs], linestyle=style, marker=marker, capsize=2,
                color=colour[model], elinewidth=0.8, label=name, markersize=5,
            )  # fmt: skip
    ax.axhline(0, color="0.8", linewidth=0.8, zorder=0)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    if len(models) == 1:
        # what each step's figures are over, under its tick
        ticks = sorted({r["step"] for r in rows})
        counts = {r["step"]: r["episodes"] for r in rows}
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{s}\nn={counts[s]}" for s in ticks], fontsize=7)
    ax.set_ylim(-1.1, 1.1)
    ax.set_xlabel("training step" + (" (n: rollouts counted)" if len(models) == 1 else ""))
    ax.set_ylabel("reward / rate")
    ax.set_title("RL rollouts per training step (rates: 95% CI over tasks)")
    _legend_outside(fig, ax, "figure" if len(models) == 1 else "policy / figure")
    return True
