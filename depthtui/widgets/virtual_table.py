"""A table that renders only the rows on screen, for lists of thousands of rows.

Textual's DataTable measures every cell of every row when its rows change (5,000 episodes with
eleven columns took seconds to show, and again on each sort or keystroke of a filter). Here the
caller gives fixed column widths and a function from a row index to that row's cells; a frame
draws the header and the visible rows only, so a sort or a filter costs the same on 300 rows or
30,000.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.cells import cell_len, set_cell_size
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

Cell = tuple[str, str]  # (text, rich style)


@dataclass(frozen=True)
class VColumn:
    key: str
    title: str
    width: int
    right: bool = False  # numbers align right


class VirtualTable(ScrollView, can_focus=True):
    """Rows 0..count-1 under a header that stays put; one row has the cursor."""

    COMPONENT_CLASSES = {"virtual-table--header", "virtual-table--cursor", "virtual-table--odd"}
    DEFAULT_CSS = """
    VirtualTable { background: $surface; }
    VirtualTable > .virtual-table--header { text-style: bold; background: $panel; }
    VirtualTable > .virtual-table--cursor { background: $block-cursor-background; }
    VirtualTable:blur > .virtual-table--cursor { background: $block-cursor-blurred-background; }
    VirtualTable > .virtual-table--odd { background: $surface-lighten-1; }
    """
    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "jump(0)", "First", show=False),
        Binding("end", "jump(-1)", "Last", show=False),
        Binding("enter", "select", "Open", show=False),
    ]

    cursor_row: reactive[int] = reactive(0, always_update=True)

    class Selected(Message):
        """⏎ or a second click on the cursor's row."""

        def __init__(self, table: VirtualTable, row: int) -> None:
            super().__init__()
            self.table = table
            self.row = row

        @property
        def control(self) -> VirtualTable:
            return self.table

    class HeaderClicked(Message):
        def __init__(self, table: VirtualTable, key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> VirtualTable:
            return self.table

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.columns: list[VColumn] = []
        self.row_count = 0
        self._cells: Callable[[int], Sequence[Cell]] = lambda _row: ()

    def set_rows(
        self, columns: list[VColumn], count: int, cells: Callable[[int], Sequence[Cell]]
    ) -> None:
        """Show `count` rows whose cells `cells(i)` gives, under these columns."""
        self.columns, self.row_count, self._cells = columns, count, cells
        width = sum(c.width + 1 for c in columns)
        self.virtual_size = Size(width, count + 1)  # +1: the header
        self.cursor_row = min(self.cursor_row, max(count - 1, 0))
        self.refresh()

    # ------------------------------------------------------------------ drawing

    def _line(self, cells: Sequence[Cell], style: Style) -> Text:
        line = Text(no_wrap=True, style=style, end="")
        for column, (text, cell_style) in zip(self.columns, cells, strict=False):
            # control characters are the caller's to remove (widgets/sanitize); wide
            # characters count two cells
            width = cell_len(text)
            if width > column.width:
                text, width = set_cell_size(text, column.width - 1) + "…", column.width
            shown, pad = text, " " * (column.width - width)
            line.append(pad + shown if column.right else shown + pad, style=cell_style or None)
            line.append(" ")
        return line

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        base = self.rich_style
        if y == 0:
            style = base + self.get_component_rich_style("virtual-table--header")
            text = self._line([(c.title, "") for c in self.columns], style)
        else:
            row = scroll_y + y - 1
            if row >= self.row_count:
                return Strip.blank(width, base)
            if row == self.cursor_row:
                style = base + self.get_component_rich_style("virtual-table--cursor")
            elif row % 2:
                style = base + self.get_component_rich_style("virtual-table--odd")
            else:
                style = base
            text = self._line(self._cells(row), style)
        strip = Strip(text.render(self.app.console), text.cell_len)
        return strip.crop_extend(scroll_x, scroll_x + width, style)

    # ------------------------------------------------------------------ the cursor

    def watch_cursor_row(self, old: int, new: int) -> None:
        self._keep_in_view(new)
        self.refresh()

    def _keep_in_view(self, row: int) -> None:
        shown = max(self.scrollable_content_region.height - 1, 1)  # rows below the header
        top = round(self.scroll_y)
        if row < top:
            self.scroll_to(y=row, animate=False, immediate=True)
        elif row >= top + shown:
            self.scroll_to(y=row - shown + 1, animate=False, immediate=True)

    def move_to(self, row: int) -> None:
        if self.row_count:
            self.cursor_row = max(0, min(row, self.row_count - 1))

    def action_cursor(self, step: int) -> None:
        self.move_to(self.cursor_row + step)

    def action_page(self, step: int) -> None:
        self.move_to(self.cursor_row + step * max(self.scrollable_content_region.height - 2, 1))

    def action_jump(self, row: int) -> None:
        self.move_to(row if row >= 0 else self.row_count - 1)

    def action_select(self) -> None:
        if self.row_count:
            self.post_message(self.Selected(self, self.cursor_row))

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        if offset.y == 0:
            x = offset.x + round(self.scroll_x)
            for column in self.columns:
                if x < column.width + 1:
                    self.post_message(self.HeaderClicked(self, column.key))
                    return
                x -= column.width + 1
            return
        row = round(self.scroll_y) + offset.y - 1
        if row >= self.row_count:
            return
        if row == self.cursor_row:
            self.post_message(self.Selected(self, row))
        else:
            self.cursor_row = row
