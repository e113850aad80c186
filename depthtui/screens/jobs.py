"""Jobs: every job with live progress; cancel, pause and resume (requests the engine honours)."""

from __future__ import annotations

from rich.console import Group
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Footer, Header, Static

from depthtui.screens.base import DataScreen
from depthtui.screens.format import (
    cursor_key,
    job_progress,
    job_status,
    move_to_key,
    num,
    sync_rows,
    when,
)
from depthtui.widgets.messages import OpenEpisode
from depthtui.widgets.sanitize import one_line, safe_text
from store import jobs, views

COLUMNS = (
    "job", "kind", "status", "tasks", "episodes", "failed", "cost", "created", "message"
)  # fmt: skip
NO_COUNTS = views.EpisodeCounts()


def episodes_cell(counts: views.EpisodeCounts) -> Text:
    """Episodes this job ran: done, and how many run now (the live part of its progress)."""
    text = Text(f"{counts.done:,}")
    if counts.running:
        text.append(f" +{counts.running} running", style="bold green")
    if counts.errors:
        text.append(f" ({counts.errors} errors)", style="magenta")
    return text


def job_cells(j: jobs.Job, counts: views.EpisodeCounts = NO_COUNTS) -> list:
    return [
        f"#{j.id}",
        j.kind,
        job_status(j),
        job_progress(j),
        episodes_cell(counts),
        Text(num(j.progress_failed), style="red" if j.progress_failed else ""),
        f"${j.cost_usd:.4f}",
        when(j.created_at),
        one_line(j.message, 40),
    ]


def job_detail(j: jobs.Job, counts: views.EpisodeCounts = NO_COUNTS) -> Group:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim")
    grid.add_column()
    grid.add_row("job", Text.assemble((f"#{j.id} {j.kind}", "bold"), "  ", job_status(j)))
    grid.add_row("started", when(j.started_at))
    grid.add_row("finished", when(j.finished_at))
    grid.add_row("heartbeat", when(j.heartbeat_at))
    grid.add_row("engine", safe_text(j.owner or "–"))
    grid.add_row("message", safe_text(j.message or "–", 500))
    grid.add_row(
        "episodes",
        Text.assemble(
            episodes_cell(counts),
            ("   enter: open them (H/L walk them)" if counts.total else "", "dim"),
        ),
    )
    command = Syntax(safe_text(j.cli, 4000).plain, "bash", theme="ansi_dark",
                     background_color="default", word_wrap=True)  # fmt: skip
    return Group(grid, Text("command", style="dim"), command)


class JobsScreen(DataScreen):
    watches = frozenset({"jobs", "episodes"})
    BINDINGS = [
        Binding("enter", "episodes", "Its episodes"),
        Binding("c", "cancel", "Cancel job"),
        Binding("p", "pause", "Pause"),
        Binding("u", "resume", "Resume"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.jobs: dict[str, jobs.Job] = {}
        self.counts: dict[int, views.EpisodeCounts] = {}
        self._wanted: str | None = None  # a job to select once it is loaded (just submitted)

    def select_job(self, job_id: int) -> None:
        """Put the cursor on this job, loading it first if this screen has not seen it yet."""
        self._wanted = str(job_id)
        if self._wanted in self.jobs:
            self._select_wanted()
        elif self.loaded_version != -1:
            self.load()

    def _select_wanted(self) -> None:
        if self._wanted is not None and self._wanted in self.jobs:
            move_to_key(self.query_one("#jobs", DataTable), self._wanted)
            self._wanted = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield DataTable(id="jobs", cursor_type="row", zebra_stripes=True)
        yield Static(id="job-detail")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#jobs", DataTable)
        for col in COLUMNS:
            table.add_column(col, key=col)
        table.focus()

    def load(self) -> None:
        # Only rows that can have changed: new ids, and those last seen active.
        known = [int(k) for k in self.jobs]
        since = max(known) if known else None
        watch = tuple(int(k) for k, j in self.jobs.items() if j.active)
        self._fetch(since, watch)

    @work(thread=True, exclusive=True, group="jobs")
    def _fetch(self, since: int | None, watch: tuple[int, ...]) -> None:
        with self.app.worker_reader() as conn:
            rows = jobs.list_jobs(conn, changed_since=since, watch=watch)
            counts = views.job_episode_counts(conn, [j.id for j in rows])
        self.deliver(self._show, rows, counts)

    def _show(self, rows: list[jobs.Job], counts: dict[int, views.EpisodeCounts]) -> None:
        self.counts.update(counts)
        added = any(str(j.id) not in self.jobs for j in rows)
        for j in rows:
            self.jobs[str(j.id)] = j
        # newest first, always: a job submitted later goes on top, not below the first load
        ordered = sorted(self.jobs.items(), key=lambda item: -item[1].id)
        self.jobs = dict(ordered)
        table = self.query_one("#jobs", DataTable)
        key = cursor_key(table)
        sync_rows(table, [(k, job_cells(j, self.counts.get(j.id, NO_COUNTS))) for k, j in ordered])
        if added:
            table.sort("job", key=lambda cell: -int(str(cell).lstrip("#")))
            move_to_key(table, key)
        self._select_wanted()
        self._detail()
        self.mark_loaded()

    def _current(self) -> jobs.Job | None:
        key = cursor_key(self.query_one("#jobs", DataTable))
        return self.jobs.get(key) if key else None

    def _detail(self) -> None:
        job = self._current()
        self.query_one("#job-detail", Static).update(
            job_detail(job, self.counts.get(job.id, NO_COUNTS))
            if job
            else Text("no job yet: press 2 for tasks, then r to run", style="dim")
        )

    @on(DataTable.RowHighlighted, "#jobs")
    def _row(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._detail()

    @on(DataTable.RowSelected, "#jobs")
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_episodes()

    def _request(self, what: str) -> None:
        job = self._current()
        if job is None:
            return
        action = {"cancel": jobs.request_cancel, "pause": jobs.request_pause, "resume": jobs.resume}
        try:
            updated = action[what](self.app.writer, job.id)
        except jobs.JobError as exc:
            self.notify(str(exc), severity="warning")
            return
        self.jobs[str(job.id)] = updated
        self.query_one("#jobs", DataTable).update_cell(str(job.id), "status", job_status(updated))
        self._detail()
        self.notify(f"job #{job.id}: {what} requested")
        if what == "resume" and updated.status == "queued":
            # the engine may have stopped meanwhile (its idle limit): make sure one runs it
            workers = updated.params.get("workers", 1)
            self.app.hand_to_engine(job.id, workers if isinstance(workers, int) else 1)

    def action_episodes(self) -> None:
        """The job's episodes: its latest opens; H/L in the replay walk the others."""
        job = self._current()
        if job is None:
            return
        ids = views.job_episode_ids(self.app.conn, job.id)
        if not ids:
            self.notify(f"job #{job.id} has run no episode (yet)", severity="warning")
            return
        self.post_message(OpenEpisode(ids[-1], context=tuple(ids)))

    def action_cancel(self) -> None:
        self._request("cancel")

    def action_pause(self) -> None:
        self._request("pause")

    def action_resume(self) -> None:
        self._request("resume")
