"""The ladder grid: one row per measurement model, one column per cap, a mark per run."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from depthtui.widgets.messages import OpenEpisode
from depthtui.widgets.sanitize import one_line
from store.views import LadderGrid, depth_label

MARKS = {
    "pass": ("✓", "bold green"),
    "unsafe": ("⚠", "bold red"),  # collateral damage, whether the tests passed or not
    "fail": ("✗", "red"),
    "cap": ("⊘", "yellow"),
    "error": ("!", "bold magenta"),
    "running": ("…", "cyan"),
}
LEGEND_WORDS = {"cap": "cap hit", "unsafe": "collateral"}
LEGEND = Text.assemble(
    *[
        part
        for name, (mark, style) in MARKS.items()
        for part in ((mark, style), (f" {LEGEND_WORDS.get(name, name)}  ", "dim"))
    ],
    ("○", "green"),
    (" implied by N  ", "dim"),
    ("·", "dim"),
    (" not run", "dim"),
)


def cell_text(outcomes: list[str], implied: bool) -> Text:
    if not outcomes:
        return Text("○", style="green") if implied else Text("·", style="dim")
    return Text.assemble(*[(MARKS[o][0], MARKS[o][1]) for o in outcomes])


class LadderGridView(DataTable):
    """Enter (or a click) on a cell opens its latest run; H/L in the replay walk the others."""

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="cell", zebra_stripes=False, **kwargs)
        self._runs: dict[tuple[int, int], list[int]] = {}
        self._episode_ids: tuple[int, ...] = ()

    def show(self, grid: LadderGrid) -> None:
        keep = self.cursor_coordinate
        self.clear(columns=True)
        self.add_column("model", key="model")
        for cap in grid.caps:
            self.add_column("free" if cap is None else str(cap), key=str(cap))
        self.add_column("D", key="D")
        self._runs.clear()
        context: list[int] = []
        for r, model in enumerate(grid.models):
            cells: list[Text] = [one_line(model, 30)]
            for c, cap in enumerate(grid.caps, start=1):
                runs = grid.cells.get((model, cap), ())
                self._runs[(r, c)] = [run.episode_id for run in runs]
                context.extend(run.episode_id for run in runs)
                cells.append(cell_text([run.outcome for run in runs], grid.implied(model, cap)))
            est = grid.estimates.get(model)
            cells.append(Text(depth_label(est.estimate if est else None), style="bold"))
            self.add_row(*cells, key=model)
        self._episode_ids = tuple(sorted(context))
        if self.row_count:
            self.move_cursor(
                row=min(keep.row, self.row_count - 1), column=max(1, keep.column), scroll=False
            )

    def runs_at(self, row: int, column: int) -> list[int]:
        return self._runs.get((row, column), [])

    def on_data_table_cell_selected(self, event: DataTable.CellSelected) -> None:
        event.stop()
        runs = self.runs_at(event.coordinate.row, event.coordinate.column)
        if runs:
            self.post_message(OpenEpisode(runs[-1], context=self._episode_ids))
        else:
            self.notify("no run in this cell", severity="warning")
