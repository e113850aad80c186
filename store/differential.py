"""Differential grading (docs/verifier.md, "Differential grading"): a passing episode's graded
outputs compared with the reference's own, deterministically, without a model.

A graded output is a file the run created or changed that a test file names (the same rule as the
mutation audit, engine/verify/mutations.py `candidate_files`). The harness records each one's
final state host-side after the agent was stopped (engine/verify/outputs.py): `sha256`, `size`,
and `text` (the file itself when it is small UTF-8 text), or `absent`. `validate` keeps the
reference's in the contract's detail (`graded_outputs`), each with the rule that says which
differences are expected:

- `exact`: the texts must match line for line, after normalising what no grader should care
  about (CRLF read as LF, trailing whitespace on a line, blank lines at the end); a file kept
  without its text (binary or large) must have the same sha256;
- `order_free`: the two reference runs wrote the same lines in a different order, so order is
  free: the texts must hold the same lines the same number of times (a line multiset);
- `volatile`: the two reference runs wrote different lines (a timestamp, a random id): only that
  the file exists is compared.

Pure functions over plain JSON values: the store computes the queue with them.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Mapping
from typing import Any

EXACT, ORDER_FREE, VOLATILE = "exact", "order_free", "volatile"
RULES = (EXACT, ORDER_FREE, VOLATILE)
REASON = "differential"  # every reason starts with it (`triage list --reason differential`)
DIFF_LINES = 4  # changed lines shown in a reason
LINE_CHARS = 60


def lines(text: str) -> list[str]:
    """The normalised lines of a text: CRLF as LF, trailing whitespace and blank lines at the
    end dropped."""
    out = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while out and not out[-1]:
        out.pop()
    return out


def same(a: Mapping[str, Any], b: Mapping[str, Any], rule: str = EXACT) -> bool:
    """Whether two recorded outputs agree under `rule`."""
    if a.get("absent") or b.get("absent"):
        return bool(a.get("absent")) == bool(b.get("absent"))
    if (a.get("type"), a.get("target")) != (b.get("type"), b.get("target")):
        return False  # a symlink (or pipe) where the other has a file, or another target
    if rule == VOLATILE:
        return True
    ta, tb = a.get("text"), b.get("text")
    if ta is None or tb is None:
        return a.get("sha256") == b.get("sha256")
    if rule == ORDER_FREE:
        return Counter(lines(ta)) == Counter(lines(tb))
    return lines(ta) == lines(tb)


def rule_from_runs(first: Mapping[str, Any], second: Mapping[str, Any] | None) -> str:
    """The expected-differences rule of one graded file, from the reference's two runs: exact
    when they agree; order_free when they hold the same lines in another order; else volatile.
    Without a second record (the file missing from it) the file is volatile."""
    if second is None:
        return VOLATILE
    if same(first, second, EXACT):
        return EXACT
    if same(first, second, ORDER_FREE):
        return ORDER_FREE
    return VOLATILE


def reference_outputs(
    first: Mapping[str, Mapping[str, Any]],
    second: Mapping[str, Mapping[str, Any]] | None,
    changes: Mapping[str, list[str]],
) -> dict[str, dict[str, Any]]:
    """What the contract keeps: each graded output of the first reference run with its rule
    (from the second run) and whether the reference created it (`created`)."""
    out = {}
    for path, rec in sorted(first.items()):
        other = (second or {}).get(path)
        out[path] = {
            **rec,
            "rule": rule_from_runs(rec, other),
            "created": "created" in (changes.get(path) or []),
        }
    return out


def short_diff(expected: str, got: str) -> str:
    """The first few changed lines, each as '-the reference's +the run's' (a line only one side
    has shows alone), joined by ' | '."""
    a, b = lines(expected), lines(got)
    changed: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            continue
        old, new = a[i1:i2], b[j1:j2]
        for k in range(max(len(old), len(new))):
            parts = []
            if k < len(old):
                parts.append("-" + _clip(old[k]))
            if k < len(new):
                parts.append("+" + _clip(new[k]))
            changed.append(" ".join(parts))
    shown = changed[:DIFF_LINES]
    more = len(changed) - len(shown)
    return " | ".join(shown) + (f" (+{more} more changed lines)" if more > 0 else "")


def _clip(line: str) -> str:
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"


def compare(
    reference: Mapping[str, Mapping[str, Any]],
    outputs: Mapping[str, Mapping[str, Any]],
    final_changes: Mapping[str, list[str]],
) -> list[str]:
    """The reasons a passing run's graded outputs differ from the reference's, one per file
    (empty when they agree). A file the run never touched is the task's original (or nothing,
    where the reference created it); a file it touched that was not recorded (past the bound)
    is not judged."""
    reasons = []
    for path, ref in sorted(reference.items()):
        rule = ref.get("rule") or EXACT
        mine = outputs.get(path)
        if mine is None:
            if path in final_changes:
                continue  # changed but not recorded: nothing to compare
            if ref.get("created"):
                mine = {"absent": True}
            else:
                reasons.append(
                    f"{REASON}: {path} is left as the task had it, while the reference changed it"
                )
                continue
        if same(ref, mine, rule):
            continue
        if mine.get("absent"):
            reasons.append(f"{REASON}: {path} is missing; the reference wrote it")
        elif ref.get("absent"):
            reasons.append(f"{REASON}: {path} exists; the reference removed it")
        elif (mine.get("type"), mine.get("target")) != (ref.get("type"), ref.get("target")):
            reasons.append(f"{REASON}: {path} is {_kind(mine)}; the reference left {_kind(ref)}")
        elif ref.get("text") is not None and mine.get("text") is not None:
            how = "holds other lines than" if rule == ORDER_FREE else "differs from"
            diff = short_diff(ref["text"], mine["text"])
            reasons.append(f"{REASON}: {path} {how} the reference's ({diff})")
        else:
            reasons.append(
                f"{REASON}: {path} differs from the reference's (sha256 "
                f"{str(mine.get('sha256'))[:12]} vs {str(ref.get('sha256'))[:12]})"
            )
    return reasons


def _kind(rec: Mapping[str, Any]) -> str:
    kind = rec.get("type") or "file"
    return f"a {kind} to {rec['target']}" if rec.get("target") else f"a {kind}"
