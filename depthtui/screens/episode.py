"""Episode replay: the turn list on the left, the current turn on the right, the verdict at the end.

Opening and stepping read only what is shown (the turn list's marks, then one turn with its calls
and oracle events), on the UI thread because those are indexed point queries; a search for hits
inside the episode runs in a worker.
"""

from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Footer, Header, Static

from depthtui.screens.base import DataScreen
from depthtui.screens.output import OutputScreen
from depthtui.widgets.messages import OpenTask
from depthtui.widgets.sanitize import safe_text
from depthtui.widgets.turn_view import OUTCOME_STYLE, TurnView, Verdict, turn_header
from depthtui.widgets.verdict_strip import strip_text, verdict_facts
from store import search, views, vocab

HIT_LIMIT = 5_000  # matches of one episode looked at for n/N
TURN_LIST_WIDTH = 40
PREVIEW_CHARS = 30  # what fits beside the marks in the turn list without wrapping
WIDEST = 180  # from this terminal width the turn list is wider (app.tcss Screen.-widest)
WIDEST_LIST = 76
MARK_COLLATERAL = ("■", "bold red")
MARK_FAULT = ("◆", "bold yellow")
MARK_ERROR = ("!", "bold magenta")  # a malformed reply, a call timed out or not run
MARK_FAILED = ("×", "red")  # only a command's own non-zero exit (127: not found, ...)
MARK_HIT = ("•", "bold cyan")
LEGEND = Text.assemble(
    MARK_COLLATERAL, (" collateral  ", "dim"), MARK_FAULT, (" fault met  ", "dim"),
    MARK_ERROR, (" error  ", "dim"), MARK_FAILED, (" exit≠0  ", "dim"),
    MARK_HIT, (" search hit", "dim"),
)  # fmt: skip


def turn_prompt(mark: views.TurnMark, hit: bool, preview: int = PREVIEW_CHARS) -> Text:
    text = Text(f"{mark.idx:>3} ", style="dim")
    flags = (
        (mark.collateral, MARK_COLLATERAL),
        (mark.fault_observed, MARK_FAULT),
        (hit, MARK_HIT),
    )
    # One column for what went wrong: the harness's error mark outranks a failed command.
    if mark.format_error or mark.broken_calls > 0:
        problem: tuple[str, str] | None = MARK_ERROR
    elif mark.failed_calls > 0:
        problem = MARK_FAILED
    else:
        problem = None
    for i, (on_, (glyph, style)) in enumerate(flags):
        if i == 2:
            text.append(problem[0] if problem else " ", style=problem[1] if problem else "")
        text.append(glyph if on_ else " ", style=style)
    text.append(" ")
    if mark.segment_idx:  # multi-segment episodes: where each later segment's turns are
        text.append(f"§{mark.segment_idx + 1} ", style="cyan")
    if mark.preview.strip():
        text.append_text(safe_text(mark.preview, preview))
    elif mark.first_command:  # a reply of tool calls only: its first command is its label
        text.append_text(safe_text(f"$ {mark.first_command}", preview, "dim"))
    elif mark.format_error:
        text.append("[format error]", style="magenta")
    return text


def episode_head(ep: views.EpisodeInfo, position: int, total: int) -> Text:
    text = Text.assemble(
        (f"Episode {ep.id}", "bold"), "  ", safe_text(ep.task_id, 120, "bold"), "  ",
        (f" {ep.outcome} ", OUTCOME_STYLE.get(ep.outcome, "")),
    )  # fmt: skip
    if ep.outcome_class == "infra_error":  # left out of every rate: its reward means nothing
        text.append("  reward —", style="dim")
    elif ep.reward is not None:
        text.append(f"  reward {ep.reward:+.2f}")
    if total > 1:
        text.append(f"   {position}/{total} (H/L)", style="dim")
    facts = [ep.agent, ep.mode]
    if ep.prompt_name:
        facts.append(f"prompt {ep.prompt_name}")
    if ep.cap is not None:
        facts.append(f"cap {ep.cap}")
    if ep.budget is not None:
        facts.append(f"budget {ep.budget}")
    if ep.fault_family != vocab.NO_FAULT:
        facts.append(f"fault {ep.fault_family}")
    if ep.attempt:
        facts.append(f"attempt {ep.attempt}")
    if ep.retry:
        facts.append(f"try {ep.retry + 1}")
    facts += [f"{ep.turns} turns", f"{ep.calls} calls", f"${ep.cost_usd:.4f}"]
    text.append("\n")
    text.append_text(safe_text(" · ".join(facts), 300))
    if ep.replay_of is not None:
        text.append(f" · replay of episode {ep.replay_of}", style="cyan")
    if ep.collateral:
        where = f" at call {ep.collateral_call}" if ep.collateral_call else ""
        text.append(f"  ■ collateral{where}", style="bold red")
    if ep.status == "running":
        text.append("  ● live", style="bold cyan")
    return text


class EpisodeScreen(DataScreen):
    watches = frozenset(
        {"episodes", "turns", "calls", "segment_runs", "oracle_events", "fault_records",
         "test_results", "labels"}
    )  # fmt: skip
    BINDINGS = [
        Binding("h", "turn(-1)", "◀ Turn"),
        Binding("l", "turn(1)", "Turn ▶"),
        Binding("j", "scroll(1)", "Scroll", show=False),
        Binding("k", "scroll(-1)", "Scroll up", show=False),
        Binding("H", "episode(-1)", "◀ Episode"),
        Binding("L", "episode(1)", "Episode ▶"),
        Binding("g", "first", "First", show=False),
        Binding("G", "last", "Last", show=False),
        Binding("n", "hit(1)", "Next hit", show=False),
        Binding("N", "hit(-1)", "Previous hit", show=False),
        Binding("right_square_bracket", "call(1)", "Next call", show=False),
        Binding("left_square_bracket", "call(-1)", "Previous call", show=False),
        Binding("o", "output", "Full output"),
        Binding("r", "reasoning", "Reasoning"),
        Binding("c", "conversation", "Conversation"),
        Binding("t", "task", "Its task"),
        Binding("J", "job", "Its job"),
        Binding("v", "verdict", "Whole verdict"),
        Binding("escape", "back", "Back"),
    ]

    def __init__(
        self,
        episode_id: int,
        turn: int | None = None,
        context: tuple[int, ...] = (),
        query: str = "",
    ) -> None:
        super().__init__()
        self.episode_id = episode_id
        self.turn = turn or 1
        self.context = tuple(context)
        self.search_text = query
        self.info: views.EpisodeInfo | None = None
        self.marks: list[views.TurnMark] = []
        self.hits: list[int] = []
        self.detail: views.TurnDetail | None = None
        self.selected_call = 0
        self._verdict: Verdict | None = None
        self._retargeted = False
        self.preview = PREVIEW_CHARS  # characters of a turn's label (wider terminals: more)

    def retarget(
        self, episode_id: int, turn: int | None, context: tuple[int, ...], query: str
    ) -> None:
        """Show another episode when this (kept) screen is pushed again."""
        self.episode_id, self.turn = episode_id, turn or 1
        self.context, self.search_text = tuple(context), query
        self.info, self.detail, self.selected_call = None, None, 0
        self._retargeted = True
        self.loaded.clear()

    def on_screen_resume(self) -> None:
        if self._retargeted and self.loaded_version != -1:
            self._retargeted = False
            self.loaded_version = self.app.version  # DataScreen's reload then has nothing to do
            self._loaded_stamp = self._stamp()
            self.load()

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static(id="episode-head")
        # scrolls when longer than its few lines; v shows it whole
        with VerticalScroll(id="verdict-box"):
            yield Static(id="verdict-strip")
        with Horizontal(id="replay"):
            yield DataTable(id="turn-list", cursor_type="row", show_header=False)
            yield TurnView(id="turn-view")
        yield Static(LEGEND, id="replay-legend")
        yield Footer()

    def on_mount(self) -> None:
        turn_list = self.query_one("#turn-list", DataTable)
        # a wide terminal gives the turns' labels the room (they were cut at 30 at 220 wide)
        width = WIDEST_LIST if self.app.size.width >= WIDEST else TURN_LIST_WIDTH
        self.preview = PREVIEW_CHARS + width - TURN_LIST_WIDTH
        turn_list.add_column("turn", key="turn", width=width)
        turn_list.focus()

    # ------------------------------------------------------------------ loading

    def load(self) -> None:
        if self.info is None:
            self.open_episode(self.episode_id, self.turn)
        else:
            self._refresh_live()
        self.mark_loaded()

    def open_episode(self, episode_id: int, turn: int = 1) -> None:
        conn = self.app.conn
        info = views.episode(conn, episode_id)
        if info is None:
            self.query_one("#episode-head", Static).update(
                Text(f"episode {episode_id} is not in this store", style="bold red")
            )
            return
        self.episode_id, self.info = episode_id, info
        if not self.context:
            self.context = tuple(views.task_episode_ids(conn, info.task_id))
        self.marks = views.turn_marks(conn, episode_id)
        self.hits = []
        self._verdict = None
        self.selected_call = 0
        turn_list = self.query_one("#turn-list", DataTable)
        turn_list.clear()
        self.query_one("#turn-view", TurnView).scroll_home(animate=False)
        # a table draws only the rows on screen: a 150-turn list costs what 35 rows cost
        turn_list.add_rows([turn_prompt(m, False, self.preview)] for m in self.marks)
        self._show_head()
        self.show_turn(min(max(1, turn), max(1, len(self.marks))), force=True)
        if self.search_text:
            self._find_hits(self.search_text, episode_id)

    def _show_head(self) -> None:
        assert self.info is not None
        position = self.context.index(self.episode_id) + 1 if self.episode_id in self.context else 1
        self.query_one("#episode-head", Static).update(
            episode_head(self.info, position, max(1, len(self.context)))
        )
        self._show_strip()

    def _show_strip(self) -> None:
        """The verdict strip: always visible, read with the verdict (indexed point queries)."""
        assert self.info is not None
        verdict = self.verdict()
        fault = verdict.fault
        command = views.call_command(self.app.conn, self.episode_id, fault and fault.observed_call)
        facts = verdict_facts(
            self.info, verdict.tests, verdict.segments, fault, verdict.collateral, command
        )
        self.query_one("#verdict-strip", Static).update(strip_text(facts))

    def _refresh_live(self) -> None:
        """New turns are appended and the last one refreshed; the current turn stays put."""
        conn = self.app.conn
        info = views.episode(conn, self.episode_id)
        if info is None:
            return
        changed = info != self.info
        self.info = info
        if not changed:
            return
        self._verdict = None
        self._show_head()
        turn_list = self.query_one("#turn-list", DataTable)
        last = self.marks[-1].idx if self.marks else 0
        fresh = views.turn_marks(conn, self.episode_id, after=max(0, last - 1))
        for m in fresh:
            hit = m.idx in self.hits
            if m.idx <= last:
                self.marks[m.idx - 1] = m
                turn_list.update_cell_at(
                    Coordinate(m.idx - 1, 0), turn_prompt(m, hit, self.preview)
                )
            else:
                self.marks.append(m)
                turn_list.add_row(turn_prompt(m, hit, self.preview))
        self._verdict = None
        if self.turn >= last - 1:
            self.show_turn(self.turn, force=True)
        elif self.detail is not None:  # the header counts the turns recorded so far
            self.query_one("#turn-view", TurnView).query_one("#turn-head", Static).update(
                turn_header(info, self.detail)
            )

    @work(thread=True, exclusive=True, group="episode-hits")
    def _find_hits(self, query: str, episode_id: int) -> None:
        with self.app.worker_reader() as conn:
            found = search.search(conn, query, HIT_LIMIT, episode_id=episode_id)
        hits = sorted({h["turn_idx"] for h in found})
        self.deliver(self._show_hits, episode_id, hits)

    def _show_hits(self, episode_id: int, hits: list[int]) -> None:
        if episode_id != self.episode_id:
            return
        self.hits = hits
        turn_list = self.query_one("#turn-list", DataTable)
        for idx in hits:
            if 1 <= idx <= len(self.marks):
                turn_list.update_cell_at(
                    Coordinate(idx - 1, 0), turn_prompt(self.marks[idx - 1], True, self.preview)
                )

    def verdict(self) -> Verdict:
        if self._verdict is None:
            conn = self.app.conn
            self._verdict = Verdict(
                tests=tuple(views.verifier_results(conn, self.episode_id)),
                segments=tuple(views.segment_runs(conn, self.episode_id)),
                fault=views.fault_record(conn, self.episode_id),
                collateral=views.collateral_site(conn, self.episode_id),
                final_events=tuple(views.final_events(conn, self.episode_id)),
                replayed=(
                    views.episode(conn, self.info.replay_of)
                    if self.info is not None and self.info.replay_of is not None
                    else None
                ),
            )
        return self._verdict

    # ------------------------------------------------------------------ showing a turn

    def show_turn(self, idx: int, force: bool = False) -> None:
        if self.info is None:
            return
        if not force and idx == self.turn and self.detail is not None:
            return
        if idx != self.turn:
            self.selected_call = 0
        self.turn = idx
        view = self.query_one("#turn-view", TurnView)
        last = len(self.marks)
        detail = views.turn_detail(self.app.conn, self.episode_id, idx) if last else None
        self.detail = detail
        is_last = idx >= last
        verdict = self.verdict() if is_last and self.info.status != "running" else None
        if detail is None:
            empty = views.TurnDetail(
                self.episode_id, 0, 0, "", 0, "", None, None, 0, 0, 0.0, 0.0, (), ()
            )
            view.show(self.info, empty, 0, verdict if verdict is not None else self.verdict())
        else:
            view.show(self.info, detail, self.selected_call, verdict)
            if not force:
                view.scroll_home(animate=False)
        turn_list = self.query_one("#turn-list", DataTable)
        if last and turn_list.cursor_row != idx - 1:
            turn_list.move_cursor(row=idx - 1, animate=False)

    @on(DataTable.RowHighlighted, "#turn-list")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        # A highlight from an earlier move (the cursor has moved on since) is stale: acting on
        # it would step back to where the user no longer is.
        if event.cursor_row != event.data_table.cursor_row:
            return
        if 0 <= event.cursor_row < len(self.marks):
            self.show_turn(event.cursor_row + 1)

    # ------------------------------------------------------------------ actions

    def action_turn(self, step: int) -> None:
        if self.marks:
            self.show_turn(min(len(self.marks), max(1, self.turn + step)))

    def action_first(self) -> None:
        self.show_turn(1)

    def action_last(self) -> None:
        if self.marks:
            self.show_turn(len(self.marks))

    def action_scroll(self, lines: int) -> None:
        self.query_one("#turn-view", TurnView).scroll_relative(y=lines * 3, animate=False)

    def action_episode(self, step: int) -> None:
        if self.episode_id not in self.context:
            return
        i = self.context.index(self.episode_id) + step
        if 0 <= i < len(self.context):
            self.open_episode(self.context[i], 1)
        else:
            self.notify("no more episodes this way", severity="warning")

    def action_hit(self, step: int) -> None:
        if not self.search_text:
            self.notify("no search yet: press / to search", severity="warning")
            return
        if not self.hits:
            self.notify("no hit in this episode", severity="warning")
            return
        ahead = [h for h in self.hits if (h > self.turn if step > 0 else h < self.turn)]
        if not ahead:
            self.notify("no more hits this way", severity="warning")
            return
        self.show_turn(ahead[0] if step > 0 else ahead[-1])

    def action_call(self, step: int) -> None:
        if self.detail is None or not self.detail.calls:
            return
        self.selected_call = (self.selected_call + step) % len(self.detail.calls)
        self.show_turn(self.turn, force=True)

    def action_output(self) -> None:
        if self.detail is None or not self.detail.calls:
            self.notify("no command in this turn", severity="warning")
            return
        call = self.detail.calls[self.selected_call]
        data = views.call_output(self.app.conn, call.id)
        if data is not None:
            raw = data.decode("utf-8", errors="replace")
        else:
            raw = call.output_head + call.output_tail
        title = f"episode {self.episode_id}, call {call.idx}: {call.output_bytes:,} bytes"
        self.app.push_screen(OutputScreen(title, raw))

    def action_task(self) -> None:
        if self.info is not None:
            self.post_message(OpenTask(self.info.task_id))

    def action_verdict(self) -> None:
        """v: the verdict strip at its full height (again: back to its few lines)."""
        box = self.query_one("#verdict-box", VerticalScroll)
        box.toggle_class("-whole")
        box.scroll_home(animate=False)

    def action_job(self) -> None:
        if self.info is None or self.info.job_id is None:
            self.notify("no job recorded for this episode", severity="warning")
            return
        self.app.show_job(self.info.job_id, come_back=True)

    def action_conversation(self) -> None:
        from depthtui.screens.conversation import ConversationScreen

        self.app.push_screen(ConversationScreen(self.episode_id))

    def action_reasoning(self) -> None:
        self.query_one("#turn-view", TurnView).toggle_reasoning()
