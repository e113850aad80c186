"""What the safety oracle saw: one block per change, with properties before and after and the
unified diff of a text file."""

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


def event_block(event: OracleEvent) -> RenderableType:
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


def events_view(events: list[OracleEvent] | tuple[OracleEvent, ...]) -> RenderableType:
    if not events:
        return Text("no change seen by the oracle in this turn", style="dim")
    blocks: list[RenderableType] = []
    previous: OracleEvent | None = None
    for event in sorted(events, key=_weight):  # stable: call order within each kind
        compact = event.kind == "created" and not event.collateral
        if previous is not None and not (compact and previous.kind == "created"):
            blocks.append(Text(""))
        blocks.append(event_block(event))
        previous = event
    return Group(*blocks)
