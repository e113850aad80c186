"""Small formatting helpers the screens share."""

from __future__ import annotations

from rich.text import Text

from depthtui.widgets.plot import bar
from depthtui.widgets.rows import cursor_key, move_to_key, sync_rows  # the screens' table helpers
from store.jobs import Job

STATUS_STYLE = {
    "queued": "cyan",
    "running": "bold green",
    "paused": "yellow",
    "cancelled": "dim",
    "done": "green",
    "failed": "bold red",
}


def pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def num(value: int | float | None) -> str:
    return "–" if value is None else f"{value:,}"


def when(stamp: str | None) -> str:
    """'2025-01-06T09:00:00.000+00:00' -> '2025-01-06 09:00:00' (UTC, as stored)."""
    return "–" if not stamp else stamp[:19].replace("T", " ")


def job_progress(job: Job, width: int = 16) -> Text:
    fraction = job.fraction or 0.0
    text = Text(bar(fraction, width), style="green" if job.status == "running" else "grey50")
    text.append(f" {job.progress_done}/{job.progress_total}")
    return text


def job_status(job: Job) -> Text:
    label = job.status
    if job.cancel_requested and job.status == "running":
        label += " (cancelling)"
    elif job.pause_requested and job.status == "running":
        label += " (pausing)"
    return Text(label, style=STATUS_STYLE.get(job.status, ""))


__all__ = ["cursor_key", "job_progress", "job_status", "move_to_key", "num", "pct", "sync_rows"]
