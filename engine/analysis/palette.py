"""The colours figures give models and datasets: Okabe and Ito's colour-blind-safe palette, in
an order that keeps the first ones apart on white paper and on a dark terminal (yellow, the
weakest on white, and black, invisible on a dark terminal, come last).

A model keeps its colour in every figure of a report because the colour is chosen from the
sorted names of every model the report mentions, not from the models one figure happens to hold.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

OKABE_ITO = (
    "#0072b2",  # blue
    "#e69f00",  # orange
    "#009e73",  # bluish green
    "#d55e00",  # vermillion
    "#cc79a7",  # reddish purple
    "#56b4e9",  # sky blue
    "#f0e442",  # yellow
    "#000000",  # black
)


def colours_for(names: Iterable[str]) -> dict[str, str]:
    """A colour per name, by sorted order (cycling past eight names)."""
    return {n: OKABE_ITO[i % len(OKABE_ITO)] for i, n in enumerate(sorted(set(names)))}


def report_models(report: dict[str, Any]) -> list[str]:
    """Every model a report's figures name: pass@1, pass by cap, safety and RL steps."""
    names = {m["model"] for m in report.get("models") or []}
    names |= {r["model"] for r in report.get("pass_by_cap") or []}
    names |= {r["model"] for r in report.get("safety") or []}
    names |= {r["model"] for r in report.get("rl_by_step") or []}
    return sorted(names)


def model_colours(report: dict[str, Any]) -> dict[str, str]:
    """The colour of each model of a report, the same in every figure drawn from it."""
    return colours_for(report_models(report))
