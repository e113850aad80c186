"""Two models, or two prompt arms, on one task side by side (the TUI's compare screen).

A *side* is every run of one model (or one prompt arm) on the task. Runs are lined up by the
condition they ran under: the stated cap (None = uncapped), the command budget, the fault family,
and the other dimension (the prompt arm when models are compared, the model when prompt arms
are), so a row only ever holds runs that were asked the same thing. The built-in agents (oracle,
nop, replay) are not models and are left out; so are interrupted runs, which are run again.

The divergence of two episodes is the first counted turn whose commands differ, or where one
of them has no such turn (it ended); when their commands never differ, the first turn whose
outputs (what the model was shown) differ; else they are identical.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Literal

from store import vocab
from store.views import BUILTIN_AGENTS, outcome

SideKind = Literal["model", "prompt"]
_COLUMN = {"model": "agent", "prompt": "prompt_name"}  # what a side of each kind is
_OTHER = {"model": "prompt_name", "prompt": "agent"}  # what else must match within a row
_NOT_MODELS = f"agent NOT IN ({','.join('?' * len(BUILTIN_AGENTS))}) AND status != 'interrupted'"


@dataclass(frozen=True)
class Side:
    kind: SideKind
    name: str
    runs: int  # its runs on the task (what the default pair is chosen by)


@dataclass(frozen=True)
class Sides:
    """What a task can be compared by: its models and its prompt arms, most runs first."""

    models: tuple[Side, ...]
    prompts: tuple[Side, ...]

    def of(self, kind: SideKind) -> tuple[Side, ...]:
        return self.models if kind == "model" else self.prompts

    def default_pair(self) -> tuple[Side, Side] | None:
        """The two models with most runs; else the two prompt arms with most; else None."""
        for choice in (self.models, self.prompts):
            if len(choice) >= 2:
                return choice[0], choice[1]
        return None


def sides(conn: sqlite3.Connection, task_id: str) -> Sides:
    def count(kind: SideKind) -> tuple[Side, ...]:
        column = _COLUMN[kind]
        return tuple(
            Side(kind, name, n)
            for name, n in conn.execute(
                f"SELECT {column}, count(*) AS n FROM episodes WHERE task_id = ? AND {_NOT_MODELS} "
                f"GROUP BY {column} ORDER BY n DESC, {column}",
                (task_id, *BUILTIN_AGENTS),
            )
        )

    return Sides(count("model"), count("prompt"))


@dataclass(frozen=True)
class Condition:
    """What the runs of one row were asked under."""

    cap: int | None
    budget: int | None
    fault_family: str
    other: str  # the prompt arm (models compared) or the model (prompt arms compared)
    # run by the fault bench (`episodes`): its clean arm is not the free runs' condition (it
    # has the bench's budget line and limits), so it gets a row of its own
    bench: bool = False

    def label(self, with_other: bool) -> str:
        parts = ["uncapped" if self.cap is None else f"cap {self.cap}"]
        if self.budget is not None:
            parts.append(f"budget {self.budget}")
        if self.fault_family != vocab.NO_FAULT:
            parts.append(self.fault_family)
        elif self.bench:
            parts.append("clean (fault bench)")
        if with_other:
            parts.append(self.other or "(no prompt)")
        return " · ".join(parts)

    def order(self) -> tuple:
        """Clean runs first, then by budget and fault; within those caps up, uncapped last."""
        return (
            self.fault_family != vocab.NO_FAULT,
            self.bench,
            self.fault_family,
            self.budget is not None,
            self.budget or 0,
            self.other,
            self.cap is None,
            self.cap or 0,
        )


@dataclass(frozen=True)
class Run:
    episode_id: int
    outcome: str  # store.views.outcome's word: pass, fail, cap, unsafe, error, ...
    turns: int
    attempt: int


@dataclass(frozen=True)
class Row:
    condition: Condition
    left: tuple[Run, ...]
    right: tuple[Run, ...]


@dataclass(frozen=True)
class Comparison:
    task_id: str
    kind: SideKind
    left: str
    right: str
    rows: tuple[Row, ...]
    # whether rows differ in the other dimension (so their labels must name it)
    several_others: bool


def compare(
    conn: sqlite3.Connection, task_id: str, kind: SideKind, left: str, right: str
) -> Comparison:
    """Every run of `left` and of `right` (models or prompt arms) on the task, by condition."""
    column, other = _COLUMN[kind], _OTHER[kind]
    cells: dict[Condition, tuple[list[Run], list[Run]]] = {}
    for r in conn.execute(
        f"SELECT id, {column}, cap, budget, fault_family, {other}, attempt, turns, status, "
        f"outcome, end_reason, collateral, mode = 'episodes' FROM episodes WHERE task_id = ? "
        f"AND {column} IN (?, ?) AND {_NOT_MODELS} ORDER BY attempt, id",
        (task_id, left, right, *BUILTIN_AGENTS),
    ):
        condition = Condition(r[2], r[3], r[4], r[5], bool(r[12]))
        run = Run(r[0], outcome(r[8], r[9], r[10], r[11]), r[7], r[6])
        both = cells.setdefault(condition, ([], []))
        if r[1] == left:
            both[0].append(run)
        if r[1] == right:  # (a side compared with itself fills both)
            both[1].append(run)
    rows = tuple(
        Row(c, tuple(cells[c][0]), tuple(cells[c][1])) for c in sorted(cells, key=Condition.order)
    )
    return Comparison(task_id, kind, left, right, rows, len({c.other for c in cells}) > 1)


# --------------------------------------------------------------------------- divergence


@dataclass(frozen=True)
class Step:
    """One counted turn of an episode: its commands and what the model was shown of each."""

    number: int  # which counted turn (1-based)
    idx: int  # the turn's row index (the replay opens at it)
    commands: tuple[str, ...]
    outputs: tuple[str, ...]


def steps(conn: sqlite3.Connection, episode_id: int) -> list[Step]:
    calls: dict[int, list[tuple[str, str]]] = {}
    for turn_idx, command, shown in conn.execute(
        # what the model was shown (observation); older rows kept only the output columns
        "SELECT turn_idx, command, coalesce(nullif(observation, ''), output_head || output_tail) "
        "FROM calls WHERE episode_id = ? ORDER BY idx",
        (episode_id,),
    ):
        calls.setdefault(turn_idx, []).append((command, shown))
    out = []
    for number, (idx,) in enumerate(
        conn.execute(
            "SELECT idx FROM turns WHERE episode_id = ? AND counted = 1 ORDER BY idx",
            (episode_id,),
        ),
        start=1,
    ):
        pairs = calls.get(idx, [])
        out.append(Step(number, idx, tuple(c for c, _ in pairs), tuple(o for _, o in pairs)))
    return out


Difference = Literal["identical", "command", "output", "ended"]


@dataclass(frozen=True)
class Divergence:
    left: int  # episode ids
    right: int
    what: Difference
    turn: int | None  # the counted turn where they diverge; None when identical
    left_step: Step | None  # that turn on each side (None: that side had ended)
    right_step: Step | None
    ended: Literal["left", "right", None] = None  # which side had no such turn
    # with `what` "command" or "ended": an earlier turn whose commands were the same but whose
    # outputs differed (often why the commands part later)
    output_turn: int | None = None


def divergence(conn: sqlite3.Connection, left: int, right: int) -> Divergence:
    a, b = steps(conn, left), steps(conn, right)
    output_turn: int | None = None
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x is None or y is None:
            side: Literal["left", "right"] = "left" if x is None else "right"
            return Divergence(left, right, "ended", i + 1, x, y, side, output_turn)
        if x.commands != y.commands:
            return Divergence(left, right, "command", i + 1, x, y, None, output_turn)
        if output_turn is None and x.outputs != y.outputs:
            output_turn = i + 1
    if output_turn is not None:
        i = output_turn - 1
        return Divergence(left, right, "output", output_turn, a[i], b[i])
    return Divergence(left, right, "identical", None, None, None)
