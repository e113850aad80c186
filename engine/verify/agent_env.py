"""Search paths in a Harbor verifier's environment that lead into the agent's folders.

A Harbor test.sh runs with the image's own environment, as Harbor runs it (docs/verifier.md). When
that environment puts a folder the agent can write on a search path (`ENV PYTHONPATH=/app`, `ENV
PATH=/app/.venv/bin:$PATH`, `LD_LIBRARY_PATH`, `BASH_ENV`), every program test.sh starts may load
the agent's code first, as the verifier's user: a `/app/json.py` runs when a check does `import
json`, an `/app/.venv/bin/grep` when test.sh greps. agent_code.py reads the test files and cannot
see this, so the verdict was not marked forgeable although the agent could write the reward.
This finds such entries; the verifier adds them to the verdict's evidence (it stays graded as
Harbor grades it, marked forgeable).
"""

from __future__ import annotations

from collections.abc import Iterable

from engine.verify.agent_code import Evidence, agent_roots

# Variables whose value is a list of places searched for code, and how the list is split.
SEARCH_PATHS = {
    "PATH": ":",
    "PYTHONPATH": ":",
    "PYTHONHOME": ":",
    "PYTHONUSERBASE": ":",
    "PYTHONSTARTUP": ":",
    "LD_LIBRARY_PATH": ":",
    "LD_PRELOAD": ": ",
    "LD_AUDIT": ":",
    "BASH_ENV": ":",
    "ENV": ":",
    "PERL5LIB": ":",
    "PERLLIB": ":",
    "PERL5OPT": " ",
    "RUBYLIB": ":",
    "RUBYOPT": " ",
    "NODE_PATH": ":",
    "NODE_OPTIONS": " ",
    "CLASSPATH": ":",
}
WHERE = "environment"
# Lists in which an empty entry means the working folder.
CWD_WHEN_EMPTY = frozenset({"PATH", "PYTHONPATH", "LD_LIBRARY_PATH"})


def scan_env(env: Iterable[str], *, home: str, workdir: str) -> list[Evidence]:
    """One piece of evidence per variable of `env` ("NAME=value" items, later ones winning)
    whose search path holds a folder the agent can write: under the home, the workdir or a
    shared writable folder, or relative (the working folder, which is the agent's)."""
    values: dict[str, str] = {}
    for item in env:
        name, sep, value = item.partition("=")
        if sep and name in SEARCH_PATHS:
            values[name] = value
    roots = agent_roots(home, workdir)
    found: list[Evidence] = []
    for name, value in values.items():
        if not value:
            continue
        entries = _split(value, SEARCH_PATHS[name])
        if name not in CWD_WHEN_EMPTY:
            entries = [e for e in entries if e]
        if name in ("PERL5OPT", "RUBYOPT", "NODE_OPTIONS"):
            # Options, not paths: only the words that name an agent-writable file count.
            entries = [e.split("=", 1)[-1] for e in entries if "/" in e]
        bad = [e for e in entries if _agents(e, roots)]
        if bad:
            shown = ", ".join(repr(e) if e else "'' (the working folder)" for e in bad[:3])
            found.append(
                Evidence(
                    WHERE,
                    0,
                    "env",
                    f"{name} holds {shown}, which the agent can write: programs test.sh runs "
                    "may load the agent's code from there first",
                    False,
                    bad[0],
                )
            )
    return found


def _split(value: str, seps: str) -> list[str]:
    entries = [value]
    for sep in seps:
        entries = [part for e in entries for part in e.split(sep)]
    return entries


def _agents(entry: str, roots: Iterable[str]) -> bool:
    if entry in ("", "."):
        return True  # the working folder (an empty PATH entry is it too)
    if not entry.startswith("/"):
        return True  # relative: resolved in the working folder, the agent's
    return any(entry == r or entry.startswith(r + "/") for r in roots)
