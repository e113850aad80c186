"""Make a Harbor `tests/test.sh` run offline with the trusted pytest (docs/verifier.md,
"Offline tests").

Published Terminal-Bench test.sh files start with a network preamble (apt-get install curl, the
uv installer piped to sh, `source $HOME/.local/bin/env`, `uvx -p 3.13 -w pytest==... pytest ...`,
`pip install pytest`). The verifier has no network, so each command is judged:

- preamble that only fetches tools: replaced by `true` (keeps `if`/`then` blocks well formed);
- the pytest command (bare, `python -m pytest`, `uvx ... pytest`, `uv run ... pytest`): its
  program words become the trusted toolchain's pytest; the test files, options and everything
  after it (the reward lines) stay, `--ctrf FILE` included (the toolchain has pytest-json-ctrf);
- `apt-get install` of anything else: replaced by `true`; the packages are listed in
  `Rewrite.apt_packages` and the verifier checks, host-side on the task's own image (where the
  agent never ran), that they are installed: a verifier error `needs_network` when one is not.
  Nothing test.sh prints is read for it (the agent can write into that output);
- anything else that needs the network (other packages for pytest, a download from a remote
  host, `uv sync`, `git clone https://...`): OfflineError naming the line and why.

Lines inside heredocs and comments are left alone. The shell is read the way bash splits it
(quotes, `\\` continuations, `&&`/`||`/`;`/`|`/parentheses), not fully parsed: shell_split.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from engine.verify.shell_split import Word, logical_lines, split_commands
from engine.verify.toolchain import PYTEST

# Packages the trusted toolchain already provides to pytest.
PYTEST_PACKAGES = frozenset(
    {"pytest", "pytest-json-ctrf", "pytest-timeout", "pluggy", "iniconfig", "packaging"}
)
TOOLCHAIN_PLUGINS = "pytest, pytest-timeout and pytest-json-ctrf"
# Tools a preamble installs only to fetch other tools; harmless to skip.
TOOL_PACKAGES = PYTEST_PACKAGES | {"pip", "setuptools", "wheel", "uv"}
APT_TOOL_PACKAGES = frozenset(
    {"curl", "wget", "ca-certificates", "gnupg", "python3-pip", "python3-venv", "python3-pytest"}
    | {"python-is-python3", "pipx"}
)
KEYWORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time"})
NETWORK_PROGRAMS = frozenset(
    {"curl", "wget", "git", "pip", "pip3", "npm", "npx", "yarn", "pnpm", "cargo", "go", "gem"}
    | {"conda", "mamba", "micromamba", "uv", "uvx", "apt", "apt-get", "ssh", "scp", "rsync"}
    | {"huggingface-cli", "hf", "docker"}
)
INSTALL_VERBS = frozenset({"install", "add", "get", "i", "sync", "clone", "fetch", "pull"})
LOCAL_HOSTS = re.compile(r"^(localhost|127\.[0-9.]+|0\.0\.0\.0|\[::1\]|::1)$")
URL = re.compile(r"\b(?:https?|ftp|git)://([^/\s:'\"]+)|\bgit@([^:\s]+):")
REDIRECT = re.compile(r"^[0-9]*(?:&?>>?|<<?<?|>&|<&|>\|)[0-9-]*$")


class OfflineError(ValueError):
    """The test.sh needs the network in a way that cannot be replaced offline."""


@dataclass(frozen=True)
class Rewrite:
    script: str
    changes: tuple[str, ...]  # "line 5: ... -> ..." for the user
    runs_pytest: bool  # a pytest command was found and now runs the trusted pytest
    # apt packages test.sh installs that the image must already have (checked by the verifier
    # on the task's image, never from test.sh's output).
    apt_packages: tuple[str, ...] = ()


def rewrite_test_sh(text: str, *, pytest: str = PYTEST) -> Rewrite:
    """The test.sh to run offline; raises OfflineError when it cannot be made to."""
    out: list[str] = []
    changes: list[str] = []
    runs_pytest = False
    apt: list[str] = []
    for number, chunk, verbatim in logical_lines(text):
        if verbatim:
            out.append(chunk)
            continue
        new, notes, found = _rewrite_line(chunk, number, pytest, apt)
        runs_pytest = runs_pytest or found
        out.append(new)
        changes += [f"line {number}: {note}" for note in notes]
    script = "".join(out)
    if changes:
        script = _add_header(script, len(changes))
    return Rewrite(
        script=script,
        changes=tuple(changes),
        runs_pytest=runs_pytest,
        apt_packages=tuple(dict.fromkeys(apt)),
    )


def _add_header(script: str, count: int) -> str:
    note = f"# depthtui: rewritten to run offline with the trusted pytest ({count} change(s))\n"
    if script.startswith("#!"):
        first, _, rest = script.partition("\n")
        return f"{first}\n{note}{rest}"
    return note + script


# --- judging and rewriting commands ---------------------------------------------------------


def _rewrite_line(
    chunk: str, number: int, pytest: str, apt: list[str]
) -> tuple[str, list[str], bool]:
    commands = split_commands(chunk)
    edits: list[tuple[int, int, str]] = []
    notes: list[str] = []
    found_pytest = False
    k = 0
    while k < len(commands):
        last = k
        while commands[last].pipe_after and last + 1 < len(commands):
            last += 1
        body = _body(commands[k].words)
        if not body:
            k += 1
            continue
        action = _judge([w.value for w in body], number, chunk)
        start, end = body[0].start, commands[k].words[-1].end
        if action[0] == "drop":
            # A dropped download takes its whole pipeline with it (`curl ... | sh`).
            end = commands[last].words[-1].end
            edits.append((start, end, "true"))
            notes.append(f"removed `{_short(chunk[start:end])}` ({action[1]})")
            k = last + 1
            continue
        if action[0] == "pytest":
            args = body[action[1] :]
            edits.append((start, end, " ".join([pytest, *(w.raw for w in args)])))
            notes.append(f"`{_short(chunk[start:end])}` -> the trusted pytest")
            found_pytest = True
        elif action[0] == "apt_check":
            pkgs = " ".join(action[1])
            apt.extend(action[1])
            edits.append((start, end, "true"))
            notes.append(f"`{_short(chunk[start:end])}` -> a check that the image has: {pkgs}")
        k += 1
    for start, end, new in sorted(edits, reverse=True):
        chunk = chunk[:start] + new + chunk[end:]
    return chunk, notes, found_pytest


def _body(words: tuple[Word, ...]) -> list[Word]:
    """The words from the program on: leading keywords and VAR=value assignments skipped."""
    i = 0
    while i < len(words):
        value = words[i].raw
        if value in KEYWORDS or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", value):
            i += 1
            continue
        break
    return list(words[i:])


def _plain_args(values: list[str]) -> list[int]:
    """Indices of the words that are arguments, not redirections (`>/dev/null`, `2>&1`,
    `> file`)."""
    out: list[int] = []
    skip = False
    for i, v in enumerate(values):
        if skip:
            skip = False
            continue
        if REDIRECT.match(v):
            skip = not re.search(r"&[0-9-]+$", v)
            continue
        if re.match(r"^[0-9]*(?:&?>>?|<)\S", v):
            continue
        out.append(i)
    return out


def _judge(values: list[str], number: int, chunk: str) -> tuple:
    """('keep',) | ('drop', why) | ('pytest', index of its first argument in `values`) |
    ('apt_check', pkgs); raises OfflineError."""
    positions = _plain_args(values)
    argv = [values[i] for i in positions]
    if not argv:
        return ("keep",)
    action = _judge_argv(argv, number, chunk)
    if action[0] == "pytest":
        # From an index among the arguments to one among all words (redirections included).
        at = action[1]
        return ("pytest", positions[at] if at < len(positions) else len(values))
    return action


def _judge_argv(argv: list[str], number: int, chunk: str) -> tuple:
    prog = PurePosixPath(argv[0]).name
    where = f"test.sh line {number}: `{_short(chunk.strip())}`"

    pytest_at = _pytest_index(argv)
    if pytest_at is not None:
        return ("pytest", pytest_at)
    if prog in ("apt-get", "apt", "aptitude"):
        return _judge_apt(argv, where)
    if prog in ("curl", "wget"):
        urls = [u for u in argv[1:] if URL.search(u)]
        if any("astral.sh/uv" in u or "/uv/install" in u for u in urls):
            return ("drop", "uv installer; the trusted pytest replaces uv")
        _refuse_remote(argv, where)
        return ("keep",)
    if prog in ("source", ".") and len(argv) > 1:
        target = argv[1]
        if target.endswith((".local/bin/env", ".cargo/env", "bin/activate")):
            return ("drop", "uv environment set-up")
        return ("keep",)
    if prog == "uvx" or (prog == "uv" and argv[1:3] == ["tool", "run"]):
        tool_args = argv[1:] if prog == "uvx" else argv[3:]
        action = _judge_uv_tool(tool_args, where)
        if action[0] == "pytest":
            return ("pytest", action[1] + len(argv) - len(tool_args))
        return action
    if prog == "uv":
        return _judge_uv(argv, where)
    if prog in ("pip", "pip3") or (_is_python(prog) and argv[1:3] == ["-m", "pip"]):
        rest = argv[1:] if prog in ("pip", "pip3") else argv[3:]
        return _judge_pip(rest, where)
    if prog in NETWORK_PROGRAMS:
        _refuse_remote(argv, where)
        if len(argv) > 1 and argv[1] in INSTALL_VERBS and prog not in ("git",):
            raise OfflineError(f"{where}: `{prog} {argv[1]}` needs the network")
    return ("keep",)


def _is_python(prog: str) -> bool:
    return re.match(r"^python[0-9.]*$", prog) is not None


def _pytest_index(values: list[str]) -> int | None:
    """For `pytest ARGS` / `python -m pytest ARGS`: the index of ARGS' first word."""
    if not values:
        return None
    prog = PurePosixPath(values[0]).name
    if prog in ("pytest", "py.test"):
        return 1
    if _is_python(prog) and values[1:3] == ["-m", "pytest"]:
        return 3
    return None


def _judge_apt(argv: list[str], where: str) -> tuple:
    args = [a for a in argv[1:] if not a.startswith("-")]
    if not args:
        return ("keep",)
    verb = args[0]
    if verb in ("update", "upgrade", "dist-upgrade", "full-upgrade", "clean", "autoremove"):
        return ("drop", f"apt-get {verb}; the verifier has no network")
    if verb != "install":
        return ("keep",)
    pkgs = [re.split(r"[=:]", a)[0] for a in args[1:]]
    needed = [p for p in pkgs if p not in APT_TOOL_PACKAGES]
    if not needed:
        return ("drop", "installs download tools only")
    return ("apt_check", needed)


def _package_names(specs: list[str]) -> list[str]:
    names = []
    for spec in specs:
        for part in spec.split(","):
            name = re.split(r"[<>=!~\[;@ ]", part.strip(), maxsplit=1)[0].lower().replace("_", "-")
            if name:
                names.append(name)
    return names


def _judge_pip(rest: list[str], where: str) -> tuple:
    if not rest or rest[0] != "install":
        return ("keep",)
    specs: list[str] = []
    i = 1
    while i < len(rest):
        a = rest[i]
        if a in ("-r", "--requirement", "-e", "--editable", "-c", "--constraint"):
            raise OfflineError(f"{where}: `pip install {a}` needs the network")
        if a in ("-i", "--index-url", "--extra-index-url", "-f", "--find-links", "--target", "-t"):
            i += 2
            continue
        if not a.startswith("-"):
            specs.append(a)
        i += 1
    other = [p for p in _package_names(specs) if p not in TOOL_PACKAGES]
    if other:
        raise OfflineError(
            f"{where}: installs {', '.join(other)} from the network; the trusted pytest has "
            f"only {TOOLCHAIN_PLUGINS}"
        )
    return ("drop", "installs pytest tooling; the trusted pytest replaces it")


def _judge_uv_tool(args: list[str], where: str) -> tuple:
    """`uvx [options] TOOL [ARGS]`: the tool must be pytest, its extra packages pytest's own."""
    withs: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        if a in ("-w", "--with"):
            withs.append(args[i + 1] if i + 1 < len(args) else "")
            i += 2
            continue
        if a.startswith("--with="):
            withs.append(a.split("=", 1)[1])
        elif a in ("-p", "--python", "--from", "--index-url", "--default-index"):
            i += 2
            continue
        elif a.startswith(("--with-requirements", "--with-editable")):
            raise OfflineError(f"{where}: `{a}` needs the network")
        elif not a.startswith("-"):
            break
        i += 1
    tool = args[i] if i < len(args) else None
    other = [p for p in _package_names(withs) if p not in PYTEST_PACKAGES]
    if other:
        raise OfflineError(
            f"{where}: the tests need {', '.join(other)} from the network; the trusted pytest "
            f"has only {TOOLCHAIN_PLUGINS}"
        )
    if tool is None:
        return ("drop", "uvx without a command")
    if _package_names([tool]) != ["pytest"]:
        raise OfflineError(f"{where}: `uvx {tool}` needs the network")
    return ("pytest", i + 1)


def _judge_uv(argv: list[str], where: str) -> tuple:
    verb = argv[1] if len(argv) > 1 else ""
    if verb in ("venv", "init"):
        return ("drop", f"uv {verb}; the trusted pytest replaces uv")
    if verb == "pip" and argv[2:3] == ["install"]:
        return _judge_pip(argv[2:], where)
    if verb == "add":
        return _judge_pip(["install", *argv[2:]], where)
    if verb == "run":
        args = argv[2:]
        i = 0
        withs: list[str] = []
        while i < len(args) and args[i].startswith("-"):
            if args[i] in ("-w", "--with"):
                withs.append(args[i + 1] if i + 1 < len(args) else "")
                i += 2
            elif args[i] in ("-p", "--python", "--project", "--directory"):
                i += 2
            else:
                i += 1
        rest = args[i:]
        other = [p for p in _package_names(withs) if p not in PYTEST_PACKAGES]
        if other:
            raise OfflineError(f"{where}: the tests need {', '.join(other)} from the network")
        at = _pytest_index(rest)
        if at is not None:
            return ("pytest", 2 + i + at)
    raise OfflineError(f"{where}: `uv {verb}` needs uv and the network")


def _refuse_remote(argv: list[str], where: str) -> None:
    for arg in argv[1:]:
        for match in URL.finditer(arg):
            host = (match.group(1) or match.group(2) or "").lower()
            if host and not LOCAL_HOSTS.match(host):
                raise OfflineError(f"{where}: downloads from {host}; the verifier has no network")


def _short(text: str, limit: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
