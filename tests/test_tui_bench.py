"""`bench tui`'s terminal measure: the real `depthtui` on a pseudo-terminal, timed to the moment
the dashboard draws the report's figures, then quit with `q` (figures are not asserted: speed is
`depthtui bench tui`'s business)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from depthtui.screens.dashboard import headline_view
from depthtui.screens.figures import build_report_here
from devtools.bench.tui import FIGURES_MARK, figures_in_a_terminal

pytest_plugins = ["tests.fixtures_tui"]


def test_figures_are_seen_on_a_real_terminal(synthetic_db: Path) -> None:
    # the mark it waits for is drawn by the headline only, which needs the report
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(headline_view(build_report_here(synthetic_db), 1, 0))
    assert FIGURES_MARK in console.export_text()
    result = figures_in_a_terminal(synthetic_db)
    assert result["figures_shown_s"] > 0 and result["raw_figures_s"] > 0
