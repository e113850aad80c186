"""Column widths that fit the terminal: each column is as wide as what it holds (up to a cap);
when the table is wider than the terminal, the wide columns that can spare it give way first, in
their order, each down to a floor; the name columns (task, agent) give way last and never below a
floor that keeps them readable. If that is still too wide, the columns marked `drop` leave the
table (their screen shows them elsewhere: triage's detail pane, the task id's dataset prefix).
Past that the table scrolls sideways.

Without this DataTable sizes every column to its content and the terminal's right edge cuts what
does not fit: at 100 columns the triage table showed its task and agent columns as "ta"/"de"
while *why* kept 42 cells (issue 29)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text
from textual.widgets import DataTable

from depthtui.widgets.rows import cursor_key, move_to_key

Rows = list[tuple[str, list]]


@dataclass(frozen=True)
class Col:
    key: str
    label: str
    floor: int = 0  # never narrower than this (nor than its label)
    cap: int = 200  # never wider than this
    order: int = 0  # 0: keeps its width; else gives way in this order (1 first)
    drop: bool = False  # leaves the table (in `order`) when floors alone do not fit


def _text(cell: object) -> Text:
    return cell.copy() if isinstance(cell, Text) else Text(str(cell))


def _shrink(
    cols: Sequence[Col], natural: list[int], kept: set[int], available: int, padding: int
) -> tuple[list[int], int]:
    widths = list(natural)
    over = sum(widths[i] + 2 * padding for i in kept) - available
    for i in sorted((i for i in kept if cols[i].order), key=lambda i: cols[i].order):
        if over <= 0:
            break
        cut = min(over, max(widths[i] - max(cols[i].floor, len(cols[i].label)), 0))
        widths[i] -= cut
        over -= cut
    return widths, over


def fit_widths(cols: Sequence[Col], rows: Rows, available: int, padding: int) -> list[int | None]:
    """The width of each column: its content's (floor ≤ width ≤ cap), then narrowed, the
    columns that give way first first, until the table fits `available` cells; None for a
    column dropped because even the floors did not fit (the others then widen again)."""
    natural = []
    for i, col in enumerate(cols):
        content = max((_text(cells[i]).cell_len for _, cells in rows), default=0)
        natural.append(max(col.floor, len(col.label), min(content, col.cap)))
    kept = set(range(len(cols)))
    widths, over = _shrink(cols, natural, kept, available, padding)
    for i in sorted((i for i, c in enumerate(cols) if c.drop), key=lambda i: cols[i].order):
        if over <= 0:
            break
        kept.discard(i)
        widths, over = _shrink(cols, natural, kept, available, padding)
    return [w if i in kept else None for i, w in enumerate(widths)]


def clip(rows: Rows, widths: list[int | None]) -> Rows:
    """Each cell cut to its column's width, with an ellipsis where it was cut (a dropped
    column's cells left out)."""
    out: Rows = []
    for key, cells in rows:
        clipped = []
        for cell, width in zip(cells, widths, strict=True):
            if width is None:
                continue
            text = _text(cell)
            if text.cell_len > width:
                text.truncate(width, overflow="ellipsis")
            clipped.append(text)
        out.append((key, clipped))
    return out


def table_width(table: DataTable) -> int:
    """The cells a row can use: the table's width (the app's before the first layout), less
    room for a vertical scrollbar."""
    width = table.size.width or table.app.size.width
    return max(width - table.styles.scrollbar_size_vertical, 1)


def fit_table(table: DataTable, cols: Sequence[Col], rows: Rows) -> Rows:
    """`rows` clipped to widths that fit the table. When the widths change, the table's
    columns are made again at those widths and `rows` put back (the cursor kept on its row);
    the caller then syncs or adds rows as before."""
    widths = fit_widths(cols, rows, table_width(table), table.cell_padding)
    clipped = clip(rows, widths)
    current = [(str(c.key.value), c.width, c.auto_width) for c in table.ordered_columns]
    wanted = [(c.key, w) for c, w in zip(cols, widths, strict=True) if w is not None]
    if current != [(k, w, False) for k, w in wanted]:
        key = cursor_key(table)
        had_rows = table.row_count > 0
        table.clear(columns=True)
        labels = {c.key: c.label for c in cols}
        for col_key, width in wanted:
            table.add_column(labels[col_key], key=col_key, width=width)
        if had_rows:
            for k, cells in clipped:
                table.add_row(*cells, key=k)
            move_to_key(table, key)
    return clipped
