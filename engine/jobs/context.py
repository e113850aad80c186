"""The runner's side of UnitContext: what a unit may ask of the job it belongs to.

Stop reasons come from four places: the job row (cancel, pause, asked by the CLI or the TUI),
this process (Ctrl-C, engine shutdown, lost ownership), the `stop_file` parameter, and money
(`max_cost`, `reserve`). The row is read by the runner's heartbeat, not here, so a unit may poll
`should_stop` between every turn without touching the store.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.protocol.execute import Executor
from engine.protocol.kinds import ProgressEvent
from store.db import Store
from store.queue import add_job_cost

# Reasons that also end episodes in flight; the others (budget, stop file) only stop new ones.
ABORT_PREFIXES = ("cancelled", "paused", "engine stopping", "lost")


def budget_params(params: dict[str, Any]) -> tuple[float | None, float, str | None]:
    """(max_cost, reserve, stop_file) from a job's parameters, validated."""

    def number(key: str) -> float | None:
        value = params.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(f"job parameter '{key}': expected a number >= 0, got {value!r}")
        return float(value)

    stop_file = params.get("stop_file")
    if stop_file is not None and not isinstance(stop_file, str):
        raise ValueError(f"job parameter 'stop_file': expected a path, got {stop_file!r}")
    return number("max_cost"), number("reserve") or 0.0, stop_file or None


class JobContext:
    """Implements engine.protocol.kinds.UnitContext for one run of one job."""

    def __init__(
        self,
        store: Store,
        job_id: int | None,
        params: dict[str, Any],
        owner: str,
        *,
        spent_before: float = 0.0,
        on_event: Callable[[ProgressEvent], None] | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.store = store
        self.job_id = job_id
        self.params = params
        self.owner = owner
        self.executor = executor  # where episode bodies run; None = this process's threads
        self.max_cost, self.reserve, self.stop_file = budget_params(params)
        self._spent = spent_before
        self._lock = threading.Lock()
        self._on_event = on_event
        self._abort: str | None = None  # set by the heartbeat or the process; sticks
        self._first_stop: str | None = None
        self.latest: dict[str, ProgressEvent] = {}  # unit -> its last event, for the job message

    # --- what units call ----------------------------------------------------------------------

    def should_stop(self) -> str | None:
        reason = self._abort or self._budget_reason()
        if reason and self._first_stop is None:
            with self._lock:
                self._first_stop = self._first_stop or reason
        return reason

    def should_abort(self) -> str | None:
        """A reason to end the episodes in flight now (cancel, pause, shutdown), or None. Budget
        limits never abort: they only stop new episodes from starting."""
        return self._abort

    def progress(self, event: ProgressEvent) -> None:
        self.latest[event.unit] = event
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception:  # a display problem must never stop a measurement
                pass

    def add_cost(self, usd: float) -> None:
        if not usd:
            return
        with self._lock:
            self._spent += usd
        if self.job_id is not None:
            add_job_cost(self.store, self.job_id, usd)

    # --- what the runner calls ----------------------------------------------------------------

    @property
    def spent(self) -> float:
        return self._spent

    @property
    def first_stop(self) -> str | None:
        """The first stop reason any unit saw (what the job's final message reports)."""
        return self._first_stop or self._abort

    def abort(self, reason: str) -> None:
        """Stop everything: new episodes and episodes in flight. The first reason wins."""
        with self._lock:
            if self._abort is None:
                self._abort = reason

    def _budget_reason(self) -> str | None:
        if self.stop_file and os.path.exists(self.stop_file):
            return f"stop file {Path(self.stop_file)} exists"
        if self.max_cost is not None:
            left = self.max_cost - self._spent
            if left <= 0 or left < self.reserve:
                return f"budget: spent ${self._spent:.4f} of --max-cost ${self.max_cost:.4f}" + (
                    f" (reserve ${self.reserve:.4f})" if self.reserve else ""
                )
        return None
