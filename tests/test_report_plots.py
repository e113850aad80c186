"""The report's figures (engine/analysis/plots.py) read back as matplotlib objects: each
property a paper needs is checked on the figures the production code draws."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from engine.analysis.palette import OKABE_ITO, model_colours
from engine.analysis.plots import figures, write_plots

MODELS = ("qwen3-8b", "gpt-oss-20b", "glm-4.5-air", "llama-3.1-8b-instruct")
FAMILIES = ("clean", "perm_denied", "moved_input", "blocking_fifo", "all faults")


def _rate(value: float) -> dict:
    return {"value": value, "ci95": [max(0.0, value - 0.2), min(1.0, value + 0.1)],
            "successes": 1, "episodes": 2, "tasks": 2}  # fmt: skip


def _report(models=MODELS, same_place: int = 5) -> dict:
    """A report with `same_place` tasks at one (W, D), others spread, every D up to >80."""
    tasks = [
        {"id": f"a/same{i}", "dataset": "alpha", "group": "synthetic", "W": 12, "D": 3}
        for i in range(same_place)
    ]
    for i, d in enumerate((1, 2, 5, 10, 20, 40, 80, 99, 99)):
        w = 50 if d == 99 else 3 + 7 * i  # the two >80 tasks share a place
        tasks.append({"id": f"b/t{i}", "dataset": "beta", "group": "human", "W": w, "D": d})
    tasks.append({"id": "b/none", "dataset": "beta", "group": "human", "W": 4, "D": None})
    return {
        "tasks": tasks,
        "models": [{"model": m} for m in models],
        "pass_by_cap": [
            {"model": m, "cap": c, "runs": 2, "passed": 1, "rate": (k + 1) / (len(models) + 1)}
            for k, m in enumerate(models)
            for c in (1, 2, 3, 5, 10, 20, 40, 80)
        ],
        "safety": [
            {"model": m, "prompt": "default", "fault": f, "safe_success": _rate(0.3 + 0.1 * k)}
            for k, m in enumerate(models)
            for f in FAMILIES
        ],
    }


def _drawn(fig):
    """Draw as write_plots's PNG does: lays out (constrained), fixes every tick and extent."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def _bar_colours(ax) -> dict[str, str]:
    from matplotlib.colors import to_hex

    out = {}
    for container in ax.containers:
        label = container.get_label()
        if not label.startswith("_"):
            out[label] = to_hex(container.patches[0].get_facecolor())
    return out


def _line_colours(ax) -> dict[str, str]:
    from matplotlib.colors import to_hex

    return {line.get_label(): to_hex(line.get_color()) for line in ax.get_lines()}


@pytest.mark.parametrize("models", [MODELS[:1], MODELS[:3], MODELS])
def test_each_model_has_its_own_colour_and_the_same_one_in_every_figure(models) -> None:
    report = _report(models)
    figs = figures(report)
    lines = _line_colours(figs["pass_by_cap"].axes[0])
    bars = _bar_colours(figs["safe_success"].axes[0])
    assert set(lines) == set(bars) == set(models)
    assert lines == bars  # the same model, the same colour
    assert len(set(lines.values())) == len(models)  # distinct models, distinct colours
    assert set(lines.values()) <= set(OKABE_ITO)  # the colour-blind-safe set
    # a figure of fewer models keeps each model's colour
    fewer = dict(report, pass_by_cap=[r for r in report["pass_by_cap"] if r["model"] == models[-1]])
    only = _line_colours(figures(fewer)["pass_by_cap"].axes[0])
    assert only == {models[-1]: lines[models[-1]]}
    assert model_colours(fewer)[models[-1]] == lines[models[-1]]


@pytest.mark.parametrize("most", [1, 2, 3, 7])
def test_the_histogram_counts_tasks_in_whole_numbers(most: int) -> None:
    fig = figures(_report(same_place=most))["depth_histogram"]
    _drawn(fig)
    ax = fig.axes[0]
    ticks = [t for t in ax.get_yticks() if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
    assert len(ticks) >= 2 and all(float(t).is_integer() for t in ticks), ticks
    heights = [int(p.get_height()) for p in ax.patches]
    assert max(heights) == max(most, 2)  # D 3: the `most` tasks at one place; >80: two
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert labels[-1] == ">80" and labels[:3] == ["1", "2", "3"]


def test_the_depth_axis_labels_above_80() -> None:
    fig = figures(_report())["depth_vs_work"]
    _drawn(fig)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels[-1] == ">80" and "80" in labels


def _points_on_screen(ax):
    import numpy as np

    out = []
    for coll in ax.collections:
        offsets = coll.get_offsets()
        if len(offsets):
            out.append(ax.transData.transform(np.asarray(offsets)))
    return np.concatenate(out)


@pytest.mark.parametrize("name", ["depth_vs_work", "pass_by_cap", "safe_success"])
def test_legends_sit_off_the_data(name: str) -> None:
    fig = figures(_report())[name]
    renderer = _drawn(fig)
    ax = fig.axes[0]
    legends = [*fig.legends, *([ax.get_legend()] if ax.get_legend() else [])]
    assert legends, "a figure of several series has a legend"
    for legend in legends:
        box = legend.get_window_extent(renderer)
        assert not box.overlaps(ax.get_window_extent(renderer))  # outside the axes altogether
        if name == "depth_vs_work":
            points = _points_on_screen(ax)
            inside = (
                (points[:, 0] >= box.x0) & (points[:, 0] <= box.x1)
                & (points[:, 1] >= box.y0) & (points[:, 1] <= box.y1)
            )  # fmt: skip
            assert not inside.any()
        # and the whole legend is on the figure (not cut off when written)
        page = fig.bbox
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1


def test_tasks_at_one_place_are_one_marker_with_their_count() -> None:
    fig = figures(_report(same_place=5))["depth_vs_work"]
    ax = fig.axes[0]
    by_label = {c.get_label(): c for c in ax.collections}
    alpha = by_label["alpha"]
    assert len(alpha.get_offsets()) == 1  # five tasks at W 12, D 3: one marker...
    assert list(alpha.get_sizes()) == [5 * min(by_label["beta"].get_sizes())]  # ...five times
    counts = [t.get_text() for t in ax.texts]
    assert counts.count("5") == 1 and "2" in counts  # the two >80 tasks of beta share a place
    # datasets are set apart: beta's markers never sit exactly on alpha's
    assert not {tuple(p) for p in alpha.get_offsets()} & {
        tuple(p) for p in by_label["beta"].get_offsets()
    }


def test_safe_success_labels_never_overlap_with_four_models() -> None:
    fig = figures(_report(MODELS))["safe_success"]
    renderer = _drawn(fig)
    ax = fig.axes[0]
    labels = [t for t in ax.get_xticklabels() if t.get_text()]
    # clean first, all faults last, the families between by name
    assert [t.get_text() for t in labels] == ["clean", *sorted(FAMILIES[1:-1]), "all faults"]
    boxes = [t.get_window_extent(renderer) for t in labels]
    for a, b in pairwise(boxes):
        assert not a.overlaps(b)
    assert len(ax.patches) == len(MODELS) * len(FAMILIES)


def test_write_plots_writes_png_and_svg_of_each_figure(tmp_path: Path) -> None:
    written = write_plots(_report(), tmp_path)
    names = {p.name for p in written}
    assert names == {
        f"{n}.{ext}"
        for n in ("depth_vs_work", "depth_histogram", "pass_by_cap", "safe_success")
        for ext in ("png", "svg")
    }
    assert all(p.stat().st_size > 1000 for p in written)


# --------------------------------------------------------------------------- in the terminal


def test_terminal_plots_take_each_models_colour_and_draw_nothing_where_no_task_is() -> None:
    from depthtui.widgets.plot import depth_points, depth_scatter, pass_rate_table, safety_bars

    report = _report(MODELS[:3])
    colours = model_colours(report)
    scatter = depth_scatter(depth_points(report), 40)
    d1 = next(line for line in scatter.plain.splitlines() if line.lstrip().startswith("1 │"))
    assert set(d1.split("│", 1)[1]) <= {" ", "●", "■"}  # no dotted line along D = 1 (nor '·')
    bars = safety_bars(report["safety"], colours=colours)
    for line, span_model in zip(bars.plain.splitlines(), [r["model"] for r in report["safety"]],
                                strict=True):  # fmt: skip
        assert line.lstrip().startswith(span_model)
    styled = {str(s.style) for s in bars.spans}
    assert {colours[m] for m in MODELS[:3]} <= styled
    table = pass_rate_table(report["pass_by_cap"], colours)
    names = {c.plain: str(c.style) for c in table.columns[0]._cells}
    assert names == {m: f"bold {colours[m]}" for m in MODELS[:3]}
