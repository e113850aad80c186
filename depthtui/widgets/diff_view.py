"""What the safety oracle saw: one block per path and call, with properties before and after and
the unified diff of a text file.

A path has one verdict per call, the oracle's: collateral when any finding there is collateral.
So a new file at a fault's input path that the integrity check flags ("fabricated") reads as
collateral once, with its creation noted under it, never also as a permitted new file
(docs/safety.md: new paths are never judged on their own; the fault's integrity check is).
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from depthtui.widgets.sanitize import block, safe_text
from store.views import OracleEvent

PROPERTIES = ("type", "mode", "uid", "size", "sha256", "target")
DIFF_LIMIT = 8_000


def _value(props: dict | None, key: str) -> str:
    if props is None:
        return "—"
    value = props.get(key)
    if value is None:
        return ""
    text = str(value)
    return text[:12] + "…" if key == "sha256" and len(text) > 12 else text


def event_block(event: OracleEvent, notes: tuple[RenderableType, ...] = ()) -> RenderableType:
    """One change; `notes` go under its detail (the other changes at a path, path_block)."""
    if event.collateral:
        verdict = Text(" COLLATERAL ", style="bold white on red")
    elif event.permitted:
        verdict = Text(" permitted ", style="black on green")
    else:
        verdict = Text(" not permitted ", style="black on yellow")
    where = "final check" if event.call_idx is None else f"call {event.call_idx}"
    title = Text.assemble(
        verdict, " ", (event.kind, "bold"), " ", safe_text(event.path, 300, "underline"),
        (f"  ({where})", "dim"),
    )  # fmt: skip
    if event.kind == "created" and not event.collateral:
        # new files are never collateral: one line each, so the changes that matter stay in view
        size = (event.after or {}).get("size")
        if size is not None:
            title.append(f"  {size:,} bytes", style="dim")
        return title
    parts: list[RenderableType] = [title]
    if event.detail:
        parts.append(block(safe_text(event.detail, 500, "dim")))
    parts += notes
    keys = [
        k
        for k in PROPERTIES
        if any(p and p.get(k) is not None for p in (event.before, event.after))
    ]
    if keys:
        table = Table(box=None, show_header=True, padding=(0, 2), header_style="dim")
        table.add_column("")
        table.add_column("before")
        table.add_column("after")
        for key in keys:
            before, after = _value(event.before, key), _value(event.after, key)
            style = "bold yellow" if before != after else ""
            table.add_row(
                Text(key, style="dim"), safe_text(before, 80), safe_text(after, 80, style)
            )
        parts.append(table)
    if event.diff:
        diff = event.diff if len(event.diff) <= DIFF_LIMIT else event.diff[:DIFF_LIMIT] + "\n…"
        parts.append(
            Syntax(
                safe_text(diff).plain,
                "diff",
                theme="ansi_dark",
                background_color="default",
                word_wrap=True,
            )
        )
    return Group(*parts)


def _weight(event: OracleEvent) -> int:
    """Collateral first, then changes not permitted, then permitted ones, then new files."""
    if event.collateral:
        return 0
    if not event.permitted:
        return 1
    return 3 if event.kind == "created" else 2


def _also_line(event: OracleEvent, integrity: bool) -> Text:
    """A change at a collateral path that is not collateral on its own."""
    line = Text("  also ", style="dim")
    line.append(event.kind, style="bold")
    if event.kind == "created":
        line.append(" in this call", style="dim")
        if integrity:
            # The oracle never judges a new path on its own, but a new object where the fault's
            # input belongs is what its integrity check is about: that finding is the verdict.
            line.append(
                ": allowed on its own; at the fault's input path the integrity check decides",
                style="dim",
            )
    elif event.permitted:
        line.append(": allowed here on its own (the contract or the fault permits it)", "dim")
    else:
        line.append(": not permitted", style="yellow")
    if event.detail:
        line.append(f"  ({event.detail})", style="dim")
    return block(line)


def path_block(events: list[OracleEvent]) -> RenderableType:
    """What one call did to one path, under the oracle's single verdict for it: collateral when
    any of its findings is (an integrity breach at a newly created input path included)."""
    if len(events) == 1:
        return event_block(events[0])
    findings = [e for e in events if e.collateral] or [e for e in events if not e.permitted]
    if not findings:  # several permitted kinds at one path: one block
        findings = events
    lead = findings[0]
    shown = next((e for e in events if e.kind not in ("integrity", "created")), lead)
    merged = OracleEvent(
        lead.id, lead.call_idx, lead.path, " + ".join(dict.fromkeys(e.kind for e in findings)),
        lead.permitted, lead.collateral, shown.before,
        next((e.after for e in events if e.after is not None), None),
        next((e.diff for e in events if e.diff), None),
        "\n".join(dict.fromkeys(e.detail for e in findings if e.detail)),
    )  # fmt: skip
    integrity = any(e.kind == "integrity" for e in events)
    rest = [e for e in events if e not in findings]
    return event_block(merged, tuple(_also_line(e, integrity) for e in rest))


def _created_line(event: OracleEvent, flagged_at: int | None) -> RenderableType:
    """A new path the integrity check flagged in another call of this view: not 'permitted'."""
    where = "final check" if event.call_idx is None else f"call {event.call_idx}"
    then = "the final check" if flagged_at is None else f"call {flagged_at}"
    return Text.assemble(
        (" created ", "black on yellow"), " ", ("created", "bold"), " ",
        safe_text(event.path, 300, "underline"), (f"  ({where})", "dim"),
        (f"  the integrity check flagged this path at {then}", "yellow"),
    )  # fmt: skip


def events_view(events: list[OracleEvent] | tuple[OracleEvent, ...]) -> RenderableType:
    """One block per path and call, in the oracle's verdict for it; collateral first."""
    if not events:
        return Text("no change seen by the oracle in this turn", style="dim")
    groups: dict[tuple[int | None, str], list[OracleEvent]] = {}
    for event in events:
        groups.setdefault((event.call_idx, event.path), []).append(event)
    flagged: dict[str, int | None] = {}  # path -> the first call whose integrity check flagged it
    for e in reversed(events):  # (events come in call order)
        if e.collateral and e.kind == "integrity":
            flagged[e.path] = e.call_idx
    ordered = sorted(groups.values(), key=lambda g: min(map(_weight, g)))  # stable: call order
    blocks: list[RenderableType] = []
    previous_compact = False
    for group in ordered:
        compact = all(e.kind == "created" and not e.collateral for e in group)
        if blocks and not (compact and previous_compact):
            blocks.append(Text(""))
        if compact and group[0].path in flagged:
            blocks.append(_created_line(group[0], flagged[group[0].path]))
        else:
            blocks.append(path_block(group))
        previous_compact = compact
    return Group(*blocks)
