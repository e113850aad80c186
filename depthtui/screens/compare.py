"""Compare two models, or two prompt arms, on one task side by side: per condition (cap, budget,
fault) each side's outcomes and turns, and where the transcripts of a pair of their runs first
diverge. Opened from the task detail (`c`, or the palette)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual._context import NoActiveAppError
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import DataTable, Footer, Header, Select, Static

from depthtui.screens.base import DataScreen
from depthtui.widgets.messages import OpenEpisode
from depthtui.widgets.sanitize import block, one_line, safe_text
from depthtui.widgets.turn_view import OUTCOME_STYLE
from store import compare
from store.compare import Comparison, Divergence, Row, Run, SideKind, Sides

KIND_LABEL = {"model": "models", "prompt": "prompt arms"}
LEGEND = "· no run   underlined: the pair compared below (a/b: another)   enter: open that run"
COMMAND_LINES = 6  # of a multi-line command (a heredoc often differs past its first line)
COMMAND_CHARS = 100  # of each differing command shown under the table
OUTPUT_CHARS = 100


def _row_key(c: compare.Condition) -> str:
    return f"{c.cap}|{c.budget}|{c.fault_family}|{c.other}|{int(c.bench)}"


def outcomes_cell(runs: tuple[Run, ...], paired: int | None) -> Text:
    """Each run's outcome word; the one in the compared pair underlined."""
    if not runs:
        return Text("·", style="dim")
    text = Text()
    for i, run in enumerate(runs):
        if i:
            text.append(" ")
        style = OUTCOME_STYLE.get(run.outcome, "")
        text.append(run.outcome, style=f"{style} underline" if i == paired else style)
    return text


def turns_cell(runs: tuple[Run, ...]) -> str:
    return " ".join(str(r.turns) for r in runs) if runs else "·"


def divergence_cell(d: Divergence | None, c: Comparison) -> Text:
    if d is None:
        return Text("–", style="dim")
    if d.what == "identical":
        return Text("identical", style="green")
    if d.what == "ended":
        who = c.left if d.ended == "left" else c.right
        return Text.assemble(f"turn {d.turn}: ", one_line(who, 20), " ended")
    return Text(f"turn {d.turn}: {'commands' if d.what == 'command' else 'output'}")


def _commands(step: compare.Step | None) -> Text:
    if step is None:
        return Text("(ended)", style="dim")
    if not step.commands:
        return Text("(no command)", style="dim")
    text = Text()
    for i, command in enumerate(step.commands):
        if i:
            text.append("\n")
        lines = command.splitlines() or [""]
        for j, line in enumerate(lines[:COMMAND_LINES]):
            text.append("\n  " if j else "$ ", style="dim")
            text.append_text(safe_text(line, COMMAND_CHARS))
        if len(lines) > COMMAND_LINES:
            text.append(f"\n  … {len(lines) - COMMAND_LINES} more lines", style="dim")
    return text


def _first_output_difference(d: Divergence) -> tuple[Text, Text]:
    """The first line where the outputs of the same commands part, from each side."""
    a, b = d.left_step, d.right_step
    assert a is not None and b is not None
    for x, y in zip(a.outputs, b.outputs, strict=True):  # the same commands: as many outputs
        if x == y:
            continue
        xs, ys = x.splitlines(), y.splitlines()
        n = next((i for i, (p, q) in enumerate(zip(xs, ys, strict=False)) if p != q), None)
        n = min(len(xs), len(ys)) if n is None else n
        where = f"line {n + 1}: " if n else ""

        def line(lines: list[str], where: str = where, n: int = n) -> Text:
            shown = lines[n] if n < len(lines) else "(no more output)"
            return Text(where, style="dim").append_text(safe_text(shown, OUTPUT_CHARS))

        return line(xs), line(ys)
    return Text(""), Text("")


def divergence_view(c: Comparison, row: Row, pair: tuple[int, int], d: Divergence | None) -> Group:
    """The compared pair of one row and where their transcripts first part."""
    label = row.condition.label(c.several_others)
    if d is None:
        missing = c.left if not row.left else c.right
        parts: list[RenderableType] = [
            Text.assemble(
                (label, "bold"), ": ", one_line(missing, 40), " has no run here: nothing to compare"
            )
        ]
        if not any(r.left and r.right for r in c.rows):
            parts.append(
                Text(
                    "these two never ran under the same condition on this task: pick another "
                    "side above",
                    style="yellow",
                )
            )
        return Group(*parts)
    left, right = row.left[pair[0]], row.right[pair[1]]

    def who(name: str, run: Run, count: int, key: str) -> Text:
        text = Text.assemble(
            ("episode ", "dim"), (str(run.episode_id), "bold"), " ", one_line(name, 40),
            (f"  attempt {run.attempt}  ", "dim"),
            (run.outcome, OUTCOME_STYLE.get(run.outcome, "")), f"  {run.turns} turns",
        )  # fmt: skip
        if count > 1:
            text.append(f"  ({key}: its other runs here)", style="dim")
        return text

    head = Text.assemble((label, "bold"), ": ")
    head.append_text(who(c.left, left, len(row.left), "a"))
    head.append("\n  vs  ")
    head.append_text(who(c.right, right, len(row.right), "b"))
    sides = Table.grid(padding=(0, 2))
    sides.add_column(style="bold", no_wrap=True)
    sides.add_column()
    names = (one_line(c.left, 30), one_line(c.right, 30))
    if d.what == "identical":
        verdict = Text("identical: the same commands and outputs in every turn", style="green")
    elif d.what == "command":
        verdict = Text(f"first divergence: turn {d.turn}, the commands differ", style="yellow")
        sides.add_row(names[0], _commands(d.left_step))
        sides.add_row(names[1], _commands(d.right_step))
    elif d.what == "ended":
        gone, went_on = (0, 1) if d.ended == "left" else (1, 0)
        verdict = Text.assemble(
            (f"first divergence: turn {d.turn}, ", "yellow"), names[gone],
            (f" had ended after {d.turn - 1} turns", "yellow"),
        )  # fmt: skip
        sides.add_row(names[went_on], _commands(d.right_step if went_on else d.left_step))
    else:
        verdict = Text(
            f"first divergence: turn {d.turn}, the same commands printed different output",
            style="yellow",
        )
        outputs = _first_output_difference(d)
        sides.add_row(Text("commands", style="dim"), _commands(d.left_step))
        sides.add_row(names[0], outputs[0])
        sides.add_row(names[1], outputs[1])
    parts: list[RenderableType] = [block(head), block(verdict), sides]
    if d.output_turn is not None and d.what != "output":
        parts.append(
            Text(
                f"(their outputs already differed at turn {d.output_turn}, after the same "
                "commands)",
                style="dim",
            )
        )
    if d.turn is not None:
        parts.append(Text("enter on a side's cell: its run, at that turn", style="dim"))
    return Group(*parts)


class CompareScreen(DataScreen):
    watches = frozenset({"episodes", "turns", "calls"})
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("a", "pair(0)", "Left: next run"),
        Binding("b", "pair(1)", "Right: next run"),
        Binding("x", "swap", "Swap sides"),
    ]

    def __init__(self, task_id: str) -> None:
        super().__init__()
        self.task_id = task_id
        self.kind: SideKind = "model"
        self.left: str | None = None  # None until the sides are known: the default pair
        self.right: str | None = None
        self.sides: Sides | None = None
        self.comparison: Comparison | None = None
        self.divergences: dict[str, Divergence] = {}
        self.pairs: dict[str, tuple[int, int]] = {}  # row key -> (left run, right run) compared
        self._columns: tuple[str, str] | None = None
        self._picker_options: dict[str, list[tuple[str, str]]] = {}  # what each side offers

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="compare-title")
        with Horizontal(id="compare-pickers"):
            yield Select([(KIND_LABEL["model"], "model")], allow_blank=False, id="compare-kind")
            yield Select([], prompt="left", id="compare-left")
            yield Static(" vs ", id="compare-vs")
            yield Select([], prompt="right", id="compare-right")
        yield DataTable(id="compare-table", cursor_type="cell", zebra_stripes=True)
        yield Static(LEGEND, id="compare-legend")
        with VerticalScroll(id="compare-detail"):
            yield Static(id="compare-divergence")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#compare-title", Static).update(
            Text.assemble(("Compare on ", "bold"), safe_text(self.task_id, 200, "bold"))
        )
        self.query_one("#compare-table", DataTable).focus()

    # ------------------------------------------------------------------ loading

    def load(self) -> None:
        self._fetch(self.kind, self.left, self.right, dict(self.pairs))

    @work(thread=True, exclusive=True, group="compare")
    def _fetch(
        self,
        kind: SideKind,
        left: str | None,
        right: str | None,
        pairs: dict[str, tuple[int, int]],
    ) -> None:
        try:
            app = self.app
        except NoActiveAppError:
            return
        with app.worker_reader() as conn:
            sides = compare.sides(conn, self.task_id)
            names = [s.name for s in sides.of(kind)]
            if left not in names or right not in names:
                pair = sides.default_pair()
                if left is None and pair is not None:
                    kind, left, right = pair[0].kind, pair[0].name, pair[1].name
                elif len(names) >= 2:
                    left, right = names[0], names[1]
                else:
                    left = right = None
            comparison = None
            divergences: dict[str, Divergence] = {}
            if left is not None and right is not None:
                comparison = compare.compare(conn, self.task_id, kind, left, right)
                for row in comparison.rows:
                    if row.left and row.right:
                        key = _row_key(row.condition)
                        i, j = pairs.get(key, (0, 0))
                        i, j = min(i, len(row.left) - 1), min(j, len(row.right) - 1)
                        pairs[key] = (i, j)
                        divergences[key] = compare.divergence(
                            conn, row.left[i].episode_id, row.right[j].episode_id
                        )
        self.deliver(self._show, sides, kind, left, right, comparison, divergences, pairs)

    def _show(
        self,
        sides: Sides,
        kind: SideKind,
        left: str | None,
        right: str | None,
        comparison: Comparison | None,
        divergences: dict[str, Divergence],
        pairs: dict[str, tuple[int, int]],
    ) -> None:
        self.sides, self.kind, self.left, self.right = sides, kind, left, right
        self.comparison, self.divergences, self.pairs = comparison, divergences, pairs
        self._fill_pickers()
        table = self.query_one("#compare-table", DataTable)
        detail = self.query_one("#compare-divergence", Static)
        if comparison is None:
            table.clear(columns=True)
            self._columns = None
            detail.update(self._nothing_to_compare(sides))
            self.mark_loaded()
            return
        where = table.cursor_coordinate
        if self._columns != (comparison.left, comparison.right):
            table.clear(columns=True)
            self._columns = (comparison.left, comparison.right)
            for key, label in (
                ("condition", Text("condition")),
                ("left", one_line(comparison.left, 30)),
                ("left-turns", Text("turns")),
                ("right", one_line(comparison.right, 30)),
                ("right-turns", Text("turns")),
                ("divergence", Text("first divergence")),
            ):
                table.add_column(label, key=key)
        else:
            table.clear()
        for row in comparison.rows:
            key = _row_key(row.condition)
            paired = pairs.get(key)
            table.add_row(
                row.condition.label(comparison.several_others),
                outcomes_cell(row.left, paired[0] if paired else None),
                turns_cell(row.left),
                outcomes_cell(row.right, paired[1] if paired else None),
                turns_cell(row.right),
                divergence_cell(divergences.get(key), comparison),
                key=key,
            )
        if table.row_count:
            table.move_cursor(
                row=min(where.row, table.row_count - 1), column=where.column, animate=False
            )
        self._show_detail()
        self.mark_loaded()

    def _nothing_to_compare(self, sides: Sides) -> Text:
        models = ", ".join(f"{s.name} ({s.runs} runs)" for s in sides.models)
        if not sides.models:
            return Text("no model has run on this task yet: nothing to compare", style="dim")
        return Text(
            f"only one model ran on this task ({models}) and one prompt arm: nothing to compare "
            "yet; run another model (r on the task) to compare them here",
            style="dim",
        )

    def _fill_pickers(self) -> None:
        sides = self.sides
        assert sides is not None
        kinds = [(KIND_LABEL[k], k) for k in ("model", "prompt") if len(sides.of(k)) >= 2]
        kind_select = self.query_one("#compare-kind", Select)
        kind_select.display = bool(kinds)
        if kinds and not kind_select.expanded:
            with kind_select.prevent(Select.Changed):  # what is shown, not a choice
                if self._picker_options.get("#compare-kind") != kinds:
                    kind_select.set_options(kinds)
                    self._picker_options["#compare-kind"] = kinds
                if kind_select.value != self.kind:
                    kind_select.value = self.kind
        options = [(f"{s.name} ({s.runs})", s.name) for s in sides.of(self.kind)]
        for select_id, value in (("#compare-left", self.left), ("#compare-right", self.right)):
            select = self.query_one(select_id, Select)
            if select.expanded:
                continue  # the user is choosing: filling it in would drop the highlight
            with select.prevent(Select.Changed):
                if self._picker_options.get(select_id) != options:
                    select.set_options(options)
                    self._picker_options[select_id] = options
                if value is not None and select.value != value:
                    select.value = value

    def _current(self) -> tuple[Row, str] | None:
        c = self.comparison
        table = self.query_one("#compare-table", DataTable)
        if c is None or not table.row_count or not 0 <= table.cursor_row < len(c.rows):
            return None
        row = c.rows[table.cursor_row]
        return row, _row_key(row.condition)

    def _show_detail(self) -> None:
        current = self._current()
        detail = self.query_one("#compare-divergence", Static)
        if current is None or self.comparison is None:
            detail.update(Text("no run of either side on this task", style="dim"))
            return
        row, key = current
        detail.update(
            divergence_view(
                self.comparison, row, self.pairs.get(key, (0, 0)), self.divergences.get(key)
            )
        )

    # ------------------------------------------------------------------ events

    @on(DataTable.CellHighlighted, "#compare-table")
    def _highlighted(self, event: DataTable.CellHighlighted) -> None:
        event.stop()
        self._show_detail()

    @on(DataTable.CellSelected, "#compare-table")
    def _selected(self, event: DataTable.CellSelected) -> None:
        """enter on a cell: that side's run of the pair (left from the first three columns)."""
        event.stop()
        current = self._current()
        if current is None:
            return
        row, key = current
        side = 0 if event.coordinate.column <= 2 else 1
        runs = row.left if side == 0 else row.right
        if not runs:
            name = self.comparison.left if side == 0 else self.comparison.right  # type: ignore[union-attr]
            self.notify(f"{name} has no run here", severity="warning")
            return
        run = runs[self.pairs.get(key, (0, 0))[side]]
        d = self.divergences.get(key)
        step = None if d is None else (d.left_step if side == 0 else d.right_step)
        self.post_message(
            OpenEpisode(
                run.episode_id,
                turn=step.idx if step is not None else None,
                context=tuple(r.episode_id for r in runs),
            )
        )

    @on(Select.Changed)
    def _picked(self, event: Select.Changed) -> None:
        event.stop()
        value = event.select.value  # (as it is now: a fill-in since has the last word)
        if value is Select.BLANK or self.sides is None:
            return
        select_id = event.select.id
        if select_id == "compare-kind" and value != self.kind:
            self.kind, self.left, self.right, self.pairs = value, "", "", {}  # type: ignore[assignment]
        elif select_id == "compare-left" and value != self.left:
            self.left, self.pairs = str(value), {}
        elif select_id == "compare-right" and value != self.right:
            self.right, self.pairs = str(value), {}
        else:
            return  # the pickers being filled in with what is shown
        self.load()

    def action_pair(self, side: int) -> None:
        """a/b: compare the next run of the left (right) side in this row."""
        current = self._current()
        if current is None:
            return
        row, key = current
        runs = row.left if side == 0 else row.right
        if len(runs) < 2:
            self.notify("only one run of this side here", severity="warning")
            return
        pair = list(self.pairs.get(key, (0, 0)))
        pair[side] = (pair[side] + 1) % len(runs)
        self.pairs[key] = (pair[0], pair[1])
        self.load()

    def action_swap(self) -> None:
        if self.left is not None and self.right is not None:
            self.left, self.right = self.right, self.left
            self.pairs = {k: (j, i) for k, (i, j) in self.pairs.items()}
            self.load()
