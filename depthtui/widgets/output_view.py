"""A virtualized view of one call's full output (up to the harness's bound: megabytes).

The text is sanitized once; rows are (start, end, colour prefix) slices into it, wrapped at the
view's width without ever cutting a colour sequence, so a 5 MB single line costs an index of
offsets, and only the rows on screen are ever styled (through the Line API, with a small cache).
"""

from __future__ import annotations

from collections import OrderedDict

from rich.segment import Segment
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from depthtui.widgets.sanitize import SGR, sanitize

_RESET = {"\x1b[0m", "\x1b[m"}
_CACHE_ROWS = 512


def wrap_rows(text: str, width: int) -> list[tuple[int, int, str]]:
    """Rows of at most `width` visible characters: (start, end, SGR state at start)."""
    width = max(1, width)
    rows: list[tuple[int, int, str]] = []
    active: list[str] = []
    line_start = 0
    length = len(text)
    while line_start <= length:
        nl = text.find("\n", line_start)
        line_end = length if nl == -1 else nl
        matches = list(SGR.finditer(text, line_start, line_end))
        if not matches:
            prefix = "".join(active)
            if line_end == line_start:
                rows.append((line_start, line_end, prefix))
            for s in range(line_start, line_end, width):
                rows.append((s, min(s + width, line_end), prefix))
        else:
            row_start, count, pos = line_start, 0, line_start
            prefix = "".join(active)
            for m in [*matches, None]:
                stop = line_end if m is None else m.start()
                seg = stop - pos
                while count + seg > width:
                    cut = pos + (width - count)
                    rows.append((row_start, cut, prefix))
                    prefix = "".join(active)
                    seg -= width - count
                    row_start, pos, count = cut, cut, 0
                count += seg
                if m is not None:
                    pos = m.end()
                    code = m.group()
                    active = [] if code in _RESET else [*active[-7:], code]
            rows.append((row_start, line_end, prefix))
        if nl == -1:
            break
        line_start = nl + 1
    return rows


class OutputView(ScrollView, can_focus=True):
    """Scrollable, wrapped, coloured output, drawn a row at a time."""

    BINDINGS = [
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
        Binding("g", "scroll_home", "Top", show=False),
        Binding("G", "scroll_end", "Bottom", show=False),
        Binding("space", "page_down", "Page", show=False),
    ]

    def __init__(self, raw: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self._sanitized = sanitize(raw)
        self._row_index: list[tuple[int, int, str]] = []
        self._wrapped_at = 0
        self._strips: OrderedDict[int, Strip] = OrderedDict()

    @property
    def row_count(self) -> int:
        return len(self._row_index)

    def _rewrap(self, width: int) -> None:
        if width == self._wrapped_at or width <= 0:
            return
        self._row_index = wrap_rows(self._sanitized, width)
        self._wrapped_at = width
        self._strips.clear()
        self.virtual_size = Size(width, len(self._row_index))

    def on_resize(self) -> None:
        self._rewrap(self.scrollable_content_region.width)

    def on_mount(self) -> None:
        self._rewrap(max(1, self.scrollable_content_region.width or 80))

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        width = self.scrollable_content_region.width
        if index >= len(self._row_index):
            return Strip.blank(width, self.rich_style)
        strip = self._strips.get(index)
        if strip is None:
            start, end, prefix = self._row_index[index]
            text = Text.from_ansi(prefix + self._sanitized[start:end], end="", no_wrap=True)
            text.expand_tabs(8)  # a raw tab would move the terminal's cursor
            segments = [s for s in text.render(self.app.console) if s.text != "\n"]
            strip = Strip(segments or [Segment("")])
            self._strips[index] = strip
            if len(self._strips) > _CACHE_ROWS:
                self._strips.popitem(last=False)
        return strip.crop_extend(scroll_x, scroll_x + width, self.rich_style)
