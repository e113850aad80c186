"""Keeping a DataTable in step with the store: change only what differs, keep the cursor."""

from __future__ import annotations

from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, RowDoesNotExist


def cursor_key(table: DataTable) -> str | None:
    """The key of the row under the cursor, or None for an empty table."""
    if not table.row_count:
        return None
    try:
        return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
    except CellDoesNotExist:  # the cursor sits outside the rows while the table rebuilds
        return None


def move_to_key(table: DataTable, key: str | None) -> None:
    """Put the cursor back on the row with `key` (if it is still there), without scrolling away."""
    if key is None or not table.row_count:
        return
    try:
        index = table.get_row_index(key)
    except RowDoesNotExist:
        return
    if index != table.cursor_row:
        table.move_cursor(row=index, animate=False)


def sync_rows(table: DataTable, rows: list[tuple[str, list]]) -> None:
    """Make the table hold `rows` (key, cells) by changing only what differs.

    Rows already shown keep their place and only changed cells are redrawn; new rows go at the
    end; rows gone from the store are removed. So a live refresh never moves the cursor off the
    row the user is on, nor scrolls the table.
    """
    key = cursor_key(table)
    wanted = {k for k, _ in rows}
    existing = {rk.value for rk in table.rows}
    for gone in existing - wanted:
        table.remove_row(gone)
    columns = [c.key for c in table.ordered_columns]
    for k, cells in rows:
        if k in existing:
            for column, new, old in zip(columns, cells, table.get_row(k), strict=False):
                if new != old:
                    # the column grows with its data ("running", not "runnin")
                    table.update_cell(k, column, new, update_width=True)
        else:
            table.add_row(*cells, key=k)
    move_to_key(table, key)
