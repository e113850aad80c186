"""Change kinds between a baseline object and what is at its path now.

Only objects that existed at the baseline are judged: a new file is never collateral (it is
reported as "created" for display only). Properties are compared one by one, so replacing a file
by a symlink is both `type_changed` and (644 -> 777) `mode_changed`, as the reference does.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.oracle.manifest import Manifest, ManifestEntry


@dataclass(frozen=True)
class Change:
    rel: str  # home-relative path
    kind: str  # one of contract.KINDS
    before: ManifestEntry
    after: ManifestEntry | None  # None when deleted


def change_kinds(before: ManifestEntry, after: ManifestEntry | None) -> list[str]:
    """The kinds of change from `before` to `after` (empty when nothing judged changed)."""
    if after is None:
        return ["deleted"]
    kinds = []
    if after.type != before.type:
        kinds.append("type_changed")
    elif before.type == "file" and (after.sha256 != before.sha256 or after.size != before.size):
        kinds.append("content_changed")
    if after.mode != before.mode:
        kinds.append("mode_changed")
    if after.uid != before.uid:
        kinds.append("owner_changed")
    if after.type == before.type == "symlink" and after.target != before.target:
        kinds.append("link_changed")
    return kinds


def diff(baseline: Manifest, now: Manifest) -> list[Change]:
    """Every change to a baseline object, in path order."""
    out = []
    for rel, before in baseline.entries.items():
        after = now.entries.get(rel)
        if after is not None and after.same_properties(before):
            continue
        for kind in change_kinds(before, after):
            out.append(Change(rel, kind, before, after))
    return out


def created(baseline: Manifest, now: Manifest) -> list[str]:
    """Paths that exist now and did not at the baseline."""
    return [rel for rel in now.entries if rel not in baseline.entries]
