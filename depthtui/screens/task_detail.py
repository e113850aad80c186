"""Task detail: the ladder grid and every run, the instruction rendered, the reference solution
highlighted, the tests, and the frozen contract with its fault targets."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual._context import NoActiveAppError
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import (
    DataTable,
    Footer,
    Header,
    Markdown,
    Static,
    TabbedContent,
    TabPane,
)

from depthtui.screens.base import DataScreen
from depthtui.screens.compare import CompareScreen
from depthtui.screens.format import num, sync_rows
from depthtui.widgets.ladder_grid import LEGEND, LadderGridView, grid_notes
from depthtui.widgets.messages import Launch, OpenEpisode
from depthtui.widgets.sanitize import block, one_line, safe_text
from depthtui.widgets.turn_view import OUTCOME_STYLE
from store import views, vocab
from store.judgements import reviews as judged_reviews
from store.protocol import get_contract


def title_line(t: views.TaskDetail, figures: dict[str, Any] | None) -> Text:
    """The task's names and its W, N, D as the report has them (`figures`: its report row)."""
    figures = figures or {}
    state = ""
    if figures.get("protocol"):
        state = "  measured" if figures.get("finished") else "  measuring"
    text = Text.assemble(
        safe_text(t.id, 200, "bold"), "  ", safe_text(t.name, 120), "\n",
        ("dataset ", "dim"), safe_text(t.dataset), ("  format ", "dim"), t.format,
        ("  verifier ", "dim"), t.verifier_kind, ("  segments ", "dim"), str(len(t.segments)),
        ("  W ", "dim"), (num(t.work), "bold"), ("  N ", "dim"), (num(figures.get("N")), "bold"),
        ("  D ", "dim"), (views.depth_label(figures.get("D")), "bold"), (state, "dim"),
    )  # fmt: skip
    for w in t.warnings:
        text.append("\n⚠ ", style="yellow")
        text.append_text(safe_text(w, 300, "yellow"))
    return text


def instruction_markdown(t: views.TaskDetail) -> str:
    if len(t.segments) <= 1:
        return safe_text(t.instruction).plain
    parts = []
    for s in t.segments:
        parts.append(
            f"## Segment {s.idx + 1}: {safe_text(s.name).plain}\n\n{safe_text(s.instruction).plain}"
        )
    return "\n\n".join(parts)


def _syntax(code: str, lexer: str) -> Syntax:
    return Syntax(safe_text(code).plain, lexer, theme="ansi_dark", line_numbers=True,
                  background_color="default", word_wrap=True)  # fmt: skip


def solution_view(t: views.TaskDetail) -> RenderableType:
    parts: list[RenderableType] = []
    for s in t.segments:
        head = (
            f"segment {s.idx + 1}: {s.name}  (W {num(s.work)})"
            if len(t.segments) > 1
            else f"solve.sh  (W {num(s.work)})"
        )
        parts.append(block(safe_text(head, 200, "bold")))
        parts.append(
            _syntax(s.solution, "bash")
            if s.solution
            else Text("no reference solution", style="dim")
        )
        parts.append(Text(""))
    return Group(*parts)


def tests_view(t: views.TaskDetail) -> RenderableType:
    parts: list[RenderableType] = []
    for s in t.segments:
        for name, body in sorted(s.tests.items()):
            label = f"segment {s.idx + 1}: {name}" if len(t.segments) > 1 else name
            parts.append(block(safe_text(label, 200, "bold")))
            lexer = "python" if name.endswith(".py") else "bash"
            parts.append(_syntax(body, lexer) if isinstance(body, str) else Text(str(body)))
            parts.append(Text(""))
    return Group(*parts) if parts else Text("no test files recorded", style="dim")


CREATED_SHOWN = 30  # paths the reference created, listed in the contract tab


def reference_created(contract: dict[str, Any] | None) -> tuple[str, ...]:
    """The paths the reference run created, as `validate` recorded them beside the contract
    (store.protocol.get_contract's detail: reference_changes, kind "created")."""
    detail = (contract or {}).get("detail") or {}
    changes = detail.get("reference_changes") if isinstance(detail, dict) else None
    if not isinstance(changes, dict):
        return ()
    return tuple(
        sorted(p for p, kinds in changes.items() if isinstance(kinds, list) and "created" in kinds)
    )


def mutation_results(contract: dict[str, Any] | None) -> list[tuple[str, dict[str, str]]]:
    """Per graded file, what each of m1-m4 did in validate's mutation audit (the contract's
    detail: discrimination): "caught" (the tests failed), "accepted" (they passed: for m1-m3 a
    false-positive reason), "n/a" (it changed nothing), "error" (no grade)."""
    detail = (contract or {}).get("detail") or {}
    seen = detail.get("discrimination") if isinstance(detail, dict) else None
    if not isinstance(seen, dict):
        return []
    rows = []
    for path, result in sorted(seen.items()):
        failed = result.get("failed") if isinstance(result, dict) else None
        if not isinstance(failed, dict):
            continue
        rows.append(
            (
                str(path),
                {
                    code: {True: "caught", False: "accepted"}.get(failed.get(kind), "n/a")
                    for kind, code in vocab.MUTATION_CODES.items()
                },
            )
        )
    return rows


def mutation_view(rows: list[tuple[str, dict[str, str]]]) -> RenderableType:
    table = Table(
        box=None,
        header_style="dim",
        title="mutation audit (m1-m3 must be caught; m4 reported)",
        title_justify="left",
    )
    table.add_column("graded file")
    for code in vocab.MUTATION_CODES.values():
        table.add_column(code)
    style = {"caught": "green", "accepted": "bold red", "n/a": "dim"}
    for path, results in rows:
        cells = [Text(r, style=style.get(r, "")) for r in results.values()]
        table.add_row(safe_text(path, 300), *cells)
    return table


def review_view(reviews: list[dict[str, Any]]) -> RenderableType:
    """The judges' findings on this task (`depthtui review`): the judge's words, never a
    verdict; each finding at the file:line depthtui checked exists."""
    table = Table(
        box=None,
        header_style="dim",
        title="what judge models say about this task (their words, not a verdict)",
        title_justify="left",
    )
    for col in ("judge", "category", "at", "the judge says"):
        table.add_column(col)
    for r in reviews:
        if r.get("status") != "done":
            continue
        for f in r.get("findings") or []:
            table.add_row(
                safe_text(str(r.get("judge")), 80),
                safe_text(str(f.get("category")), 80, "yellow"),
                safe_text(f"{f.get('file')}:{f.get('line')}", 200),
                safe_text(str(f.get("says") or ""), 400),
            )
        if not r.get("findings"):
            table.add_row(safe_text(str(r.get("judge")), 80), Text("no finding", style="dim"))
        if r.get("dropped"):
            table.add_row(
                "", Text(f"{len(r['dropped'])} finding(s) dropped: evidence not found", style="dim")
            )
    return table


def contract_view(
    t: views.TaskDetail,
    created: tuple[str, ...] = (),
    mutated: list[tuple[str, dict[str, str]]] | None = None,
) -> RenderableType:
    """The frozen contract as the oracle reads it (docs/safety.md): the changes it permits to
    what existed before the run, and that creating new paths needs no permit."""
    c = t.contract
    if c is None:
        return Text("no contract yet: run `depthtui validate` on this task", style="dim")
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim")
    grid.add_column()
    grid.add_row("valid", Text("yes", style="green") if c.valid else Text("no", style="bold red"))
    for reason in c.reasons:
        grid.add_row("reason", safe_text(str(reason), 300, "red"))
    grid.add_row("frozen", c.created_at[:19].replace("T", " "))
    for flag in c.flags:
        grid.add_row("flag", safe_text(str(flag), 200, "yellow"))
    heading = Text.assemble(
        ("permitted changes", "italic"),
        (" to what existed before the run; any other change to it is collateral", "dim"),
    )
    permitted = Table(box=None, header_style="dim")
    permitted.add_column("path")
    permitted.add_column("kinds")
    for path, kinds in sorted(c.permitted.items()):
        shown = f"{path}  (and everything below it)" if path.endswith("/") else path
        permitted.add_row(safe_text(shown, 300), safe_text(", ".join(map(str, kinds))))
    if not c.permitted:
        permitted.add_row(
            Text("none: every file and folder there before must stay as it was", style="dim"),
            "",
        )
    creating = Text.assemble(
        ("new paths  ", "bold"),
        "creating files and folders is always permitted, anywhere in the home: the oracle "
        "judges only what existed before the run. In a fault episode, what appears at the "
        "fault's target (below) is judged by its integrity check.",
    )
    parts: list[RenderableType] = [grid, Text(""), heading, permitted, Text(""), creating]
    if created:
        made = Text("the reference created (permitted as new paths)", style="dim")
        for path in created[:CREATED_SHOWN]:
            made.append("\n  ")
            made.append_text(safe_text(path, 300))
        if len(created) > CREATED_SHOWN:
            made.append(f"\n  and {len(created) - CREATED_SHOWN} more", style="dim")
        parts += [Text(""), made]
    faults = Table(box=None, header_style="dim", title="fault targets", title_justify="left")
    faults.add_column("family")
    faults.add_column("target")
    for family, target in sorted(c.fault_targets.items()):
        faults.add_row(family, safe_text(str(target), 300))
    if not c.fault_targets:
        faults.add_row(Text("no usable fault family", style="dim"), "")
    tests = Text("test inventory\n", style="dim")
    for nodeid in c.tests:
        tests.append_text(safe_text(str(nodeid), 300))
        tests.append("\n")
    if mutated:
        parts += [Text(""), mutation_view(mutated)]
    return Group(*parts, Text(""), faults, Text(""), tests)


def episode_cells(e: views.EpisodeInfo) -> list:
    tests = f"{e.tests_passed}/{e.tests_total}" if e.tests_total else "–"
    return [
        str(e.id),
        e.mode,
        one_line(e.agent, 24),
        "–" if e.cap is None else str(e.cap),
        e.fault_family,
        str(e.turns),
        Text(e.outcome, style=OUTCOME_STYLE.get(e.outcome, "")),
        tests,
        "–" if e.reward is None else f"{e.reward:+.2f}",
    ]


class TaskDetailScreen(DataScreen):
    uses_report = True

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("right_square_bracket", "tab(1)", "Next tab"),
        Binding("left_square_bracket", "tab(-1)", "Previous tab", show=False),
        Binding("r", "launch", "Run…"),
        Binding("c", "compare", "Compare…"),
        Binding("j", "scroll(1)", "Down", show=False),
        Binding("k", "scroll(-1)", "Up", show=False),
    ]

    def __init__(self, task_id: str) -> None:
        super().__init__()
        self.task_id = task_id
        self._episode_ids: tuple[int, ...] = ()
        self._shown_static = False

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="task-title")
        with TabbedContent(id="task-tabs"):
            with TabPane("Ladder & runs", id="tab-ladder"), VerticalScroll():
                yield LadderGridView(id="ladder-grid")
                yield Static(LEGEND, id="ladder-legend")
                yield Static(id="ladder-notes")
                yield Static("Runs", classes="section-title")
                yield DataTable(id="task-episodes", cursor_type="row", zebra_stripes=True)
            with TabPane("Instruction", id="tab-instruction"), VerticalScroll():
                yield Markdown(id="instruction")
            with TabPane("Solution", id="tab-solution"), VerticalScroll():
                yield Static(id="solution")
            with TabPane("Tests", id="tab-tests"), VerticalScroll():
                yield Static(id="tests")
            with TabPane("Contract", id="tab-contract"), VerticalScroll():
                yield Static(id="contract")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#task-episodes", DataTable)
        for col in ("id", "mode", "agent", "cap", "fault", "turns", "outcome", "tests", "reward"):
            table.add_column(col, key=col)
        self.query_one("#ladder-grid", LadderGridView).focus()

    def load(self) -> None:
        self._fetch()

    @work(thread=True, exclusive=True, group="task-detail")
    def _fetch(self) -> None:
        try:
            app = self.app
        except NoActiveAppError:  # the screen left the app (or the app exits) before it ran
            return
        with app.worker_reader() as conn:
            detail = views.task_detail(conn, self.task_id)
            grid = views.ladder(conn, self.task_id)
            episodes = views.task_episodes(conn, self.task_id)
            stored = get_contract(conn, self.task_id)
            created = reference_created(stored)
            mutated = mutation_results(stored)
            reviews = judged_reviews(conn, self.task_id)
        figures = next((t for t in app.report()["tasks"] if t["id"] == self.task_id), None)
        self.deliver(self._show, detail, grid, episodes, figures, created, mutated, reviews)

    def _show(
        self,
        detail: views.TaskDetail | None,
        grid: views.LadderGrid,
        episodes: list[views.EpisodeInfo],
        figures: dict[str, Any] | None = None,
        created: tuple[str, ...] = (),
        mutated: list[tuple[str, dict[str, str]]] | None = None,
        reviews: list[dict[str, Any]] | None = None,
    ) -> None:
        if detail is None:
            self.query_one("#task-title", Static).update(
                safe_text(f"task {self.task_id} is not in this store", style="bold red")
            )
            self.mark_loaded()
            return
        self.query_one("#task-title", Static).update(title_line(detail, figures))
        self.query_one("#ladder-grid", LadderGridView).show(grid)
        notes = grid_notes(grid, self.task_id)
        self.query_one("#ladder-notes", Static).update(
            Text("\n".join(notes), style="dim") if notes else Text("")
        )
        self._episode_ids = tuple(e.id for e in episodes)
        sync_rows(
            self.query_one("#task-episodes", DataTable),
            [(str(e.id), episode_cells(e)) for e in episodes],
        )
        if not self._shown_static:
            # the task's own files do not change while a run goes on
            self._shown_static = True
            self.query_one("#instruction", Markdown).update(instruction_markdown(detail))
            self.query_one("#solution", Static).update(solution_view(detail))
            self.query_one("#tests", Static).update(tests_view(detail))
        shown = contract_view(detail, created, mutated)
        if reviews:
            shown = Group(shown, Text(""), review_view(reviews))
        self.query_one("#contract", Static).update(shown)
        self.mark_loaded()

    @on(DataTable.RowSelected, "#task-episodes")
    def _episode_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.post_message(OpenEpisode(int(str(event.row_key.value)), context=self._episode_ids))

    def action_scroll(self, lines: int) -> None:
        pane = self.query_one("#task-tabs", TabbedContent).active_pane
        if pane is not None:
            pane.query_one(VerticalScroll).scroll_relative(y=lines * 3, animate=False)

    def action_tab(self, step: int) -> None:
        """]/[: the next or previous tab, with the keys going to its content (focus left in a
        hidden tab would switch straight back to it)."""
        tabs = self.query_one("#task-tabs", TabbedContent)
        panes = [pane.id for pane in tabs.query(TabPane)]
        index = panes.index(tabs.active) if tabs.active in panes else 0
        tabs.active = panes[(index + step) % len(panes)]
        pane = tabs.active_pane
        if pane is not None:
            target = pane.query_one(LadderGridView) if pane.id == "tab-ladder" else None
            (target or pane.query_one(VerticalScroll)).focus()

    def action_launch(self) -> None:
        self.post_message(Launch((self.task_id,)))

    def action_compare(self) -> None:
        self.app.push_screen(CompareScreen(self.task_id))
