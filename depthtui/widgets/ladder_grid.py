"""The ladder grid: one row per measurement model, one column per cap, a mark per run."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable

from depthtui.widgets.messages import OpenEpisode
from depthtui.widgets.rows import sync_rows
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
    # outcome() has words beyond the legend's (broken: a task_broken run, interrupted): shown by
    # their first letter, not a KeyError that takes the grid down (free runs of any verb show)
    marks = [MARKS.get(o, (o[:1] or "?", "bold magenta")) for o in outcomes]
    return Text.assemble(*[(mark, style) for mark, style in marks])


def grid_notes(grid: LadderGrid, task_id: str = "TASK") -> list[str]:
    """What the grid cannot say in marks: why it is empty, why a D is –, why a cell is ·."""
    if not grid.models:
        return [
            "No depth runs for this task yet. `depthtui free "
            f"{task_id} -m MODEL` then `depthtui ladder {task_id} -m MODEL` (or r: Run…) "
            "measure N (uncapped runs) and D (the smallest cap still passed)."
        ]
    notes = []
    best: int | None = None
    for i, model in enumerate(grid.models):
        est = grid.estimates.get(model)
        uncapped = grid.cells.get((model, None), ())
        capped = [c for c in grid.caps if c is not None and grid.cells.get((model, c))]
        if i == 0 and est is not None and est.n_turns is not None:
            notes.append(
                f"{model} measures the task: N = {est.n_turns} (fewest turns of a passing "
                f"uncapped run); caps of {est.n_turns} and more count as passed (○), not run."
            )
        only_free = not capped and uncapped and all(r.outcome != "running" for r in uncapped)
        if est is None and only_free and all(r.outcome == "error" for r in uncapped):
            # an infrastructure error is no failure of the model's (left out of rates): its
            # tries say nothing yet about whether it can do the task
            notes.append(
                f"D – for {model}: its free run{'s' if len(uncapped) != 1 else ''} ended in "
                f"infrastructure errors ({len(uncapped)} tr{'ies' if len(uncapped) != 1 else 'y'}"
                "), no result of the model's: no N yet (`depthtui jobs` shows the error)."
            )
        elif est is None and only_free and not any(r.outcome == "pass" for r in uncapped):
            notes.append(
                f"D – for {model}: no uncapped run passed ({len(uncapped)} free run"
                f"{'s' if len(uncapped) != 1 else ''}, none passed), so there is no N and no "
                "cap was tried."
            )
        elif est is None and only_free:
            notes.append(
                f"{model}: uncapped (free) runs only; `depthtui ladder {task_id} -m {model}` "
                "(or r: Run…) measures its D."
            )
        elif est is None:
            notes.append(f"{model}: no estimate yet (its runs are going on, or its job stopped).")
        elif est.estimate is None:
            if i == 0 and uncapped and not any(r.outcome == "pass" for r in uncapped):
                notes.append(
                    f"D – for {model}: no uncapped run passed, so there is no N and no cap "
                    "was tried."
                )
            elif not capped and i > 0 and best is not None:
                notes.append(
                    f"D – for {model}: not tried: later models try only caps below the best "
                    f"estimate so far ({best}), and there is none below it to try."
                )
            else:
                notes.append(f"D – for {model}: it passed under no cap it tried.")
        if i > 0 and best is not None:
            notes.append(
                f"{model}: · at cap {best} and above means not tried (caps at or above the "
                "best estimate so far are skipped), not failed."
            )
        if est is not None and est.estimate is not None:
            best = est.estimate if best is None else min(best, est.estimate)
    return notes


class LadderGridView(DataTable):
    """Enter (or a click) on a cell opens its latest run; H/L in the replay walk that cell's
    other runs."""

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="cell", zebra_stripes=False, **kwargs)
        self._runs: dict[tuple[int, int], list[int]] = {}

    def show(self, grid: LadderGrid) -> None:
        """Rows are updated in place (a reload never empties the grid for a moment)."""
        if not self.columns:
            self.add_column("model", key="model")
            for cap in grid.caps:
                self.add_column("free" if cap is None else str(cap), key=str(cap))
            self.add_column("D", key="D")
        self._runs.clear()
        rows = []
        for r, model in enumerate(grid.models):
            cells: list[Text] = [one_line(model, 30)]
            for c, cap in enumerate(grid.caps, start=1):
                runs = grid.cells.get((model, cap), ())
                self._runs[(r, c)] = [run.episode_id for run in runs]
                cells.append(cell_text([run.outcome for run in runs], grid.implied(model, cap)))
            est = grid.estimates.get(model)
            cells.append(Text(depth_label(est.estimate if est else None), style="bold"))
            rows.append((model, cells))
        sync_rows(self, rows)
        if self.row_count and self.cursor_column == 0:
            self.move_cursor(column=1, scroll=False)

    def runs_at(self, row: int, column: int) -> list[int]:
        return self._runs.get((row, column), [])

    def on_data_table_cell_selected(self, event: DataTable.CellSelected) -> None:
        event.stop()
        runs = self.runs_at(event.coordinate.row, event.coordinate.column)
        if runs:
            self.post_message(OpenEpisode(runs[-1], context=tuple(runs)))
        else:
            self.notify("no run in this cell (see the notes under the grid)", severity="warning")
