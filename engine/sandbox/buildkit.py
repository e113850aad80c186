"""BuildKit-only Dockerfile syntax, rewritten so the engine's classic builder builds it the same.

Harbor builds task images with BuildKit, so task Dockerfiles use its heredocs (Endless Terminals'
generator asks its model for `RUN cat <<'EOF' > file ... EOF`). The classic builder, which
depthtui drives through the engine API, reads a heredoc's body as instructions and fails. Each
instruction with heredocs becomes one RUN that decodes the same shell text from base64 and runs
it the way BuildKit does:

- `RUN cmd <<EOF ...` (heredocs feeding a command): the instruction and its bodies are one shell
  script, run by `eval` in the RUN's own shell (SHELL is honoured, variables expand as in sh -c);
- `RUN <<EOF` alone: the body is the script; one starting with `#!` runs as an executable file;
- `COPY <<EOF /path` / `ADD`: the file is written by `cat` with the same quoting (an unquoted
  delimiter expands variables), then `--chown` / `--chmod` are applied.

`RUN --mount=type=cache,...` only speeds builds up, so the flag is dropped. Other BuildKit-only
syntax is left for the build log to report.
"""

from __future__ import annotations

import base64
import posixpath
import re
import shlex

from engine.tasks.dockerfile import HEREDOC_MARKER, Heredoc, Instruction, instructions

_CACHE_MOUNT = re.compile(r"^--mount=(?:[^ ]*,)?type=cache(?:,[^ ]*)?$")
# A COPY source once its marker is written plainly (see _plain_markers).
_MARKER = re.compile(r"^<<-?[A-Za-z_][\w.-]*$")
SCRIPT_FILE = "/tmp/.depthtui-heredoc"


def to_classic(text: str) -> tuple[str, list[str]]:
    """The Dockerfile with BuildKit heredocs and cache mounts rewritten; notes on what changed
    (for the build log). Text without them comes back unchanged."""
    lines = text.splitlines(keepends=True)
    notes: list[str] = []
    edits: list[tuple[int, int, str]] = []
    for ins in instructions(text):
        new = _rewrite(ins)
        if new is None:
            continue
        edits.append((ins.line - 1, max(ins.end, ins.line), new))
        what = "heredoc" if ins.heredocs else "cache mount"
        notes.append(f"line {ins.line}: {ins.keyword} {what} rewritten for the classic builder")
    for start, end, new in reversed(edits):
        lines[start:end] = [new + "\n"]
    return "".join(lines), notes


def _rewrite(ins: Instruction) -> str | None:
    if ins.keyword == "RUN" and not ins.args.startswith("["):
        flags, command = _leading_flags(ins.args)
        kept = [f for f in flags if not _CACHE_MOUNT.match(f)]
        if not ins.heredocs:
            return None if kept == flags else " ".join(["RUN", *kept, command])
        return " ".join(["RUN", *kept, _run_script(command, ins.heredocs)])
    if ins.keyword in ("COPY", "ADD") and ins.heredocs:
        return _copy(ins)
    return None


def _leading_flags(args: str) -> tuple[list[str], str]:
    flags: list[str] = []
    rest = args
    while rest.startswith("--"):
        flag, _, rest = rest.partition(" ")
        flags.append(flag)
        rest = rest.lstrip()
    return flags, rest


def _run_script(command: str, docs: tuple[Heredoc, ...]) -> str:
    only = HEREDOC_MARKER.fullmatch(command.strip())
    if only and len(docs) == 1:
        body = docs[0].body
        if docs[0].strip_tabs:
            body = "".join(line.lstrip("\t") for line in body.splitlines(keepends=True))
        if body.startswith("#!"):
            encoded = _b64(body)
            return (
                f"echo {encoded} | base64 -d > {SCRIPT_FILE} && chmod +x {SCRIPT_FILE} && "
                f"{SCRIPT_FILE} && rm -f {SCRIPT_FILE}"
            )
        return _eval(body)
    script = command + "\n" + "".join(doc.body + doc.delimiter + "\n" for doc in docs)
    return _eval(script)


def _eval(script: str) -> str:
    return f'eval "$(echo {_b64(script)} | base64 -d)"'


def _copy(ins: Instruction) -> str | None:
    try:
        words = shlex.split(_plain_markers(ins.args))
    except ValueError:
        return None
    flags = [w for w in words if w.startswith("--")]
    paths = [w for w in words if not w.startswith("--")]
    sources, dest = paths[:-1], paths[-1] if paths else ""
    if (
        not sources
        or len(sources) != len(ins.heredocs)
        or not all(_MARKER.match(s) for s in sources)
    ):
        return None  # heredocs mixed with context files: left to Docker
    if any(f.startswith("--from") for f in flags):
        return None
    options = dict(f[2:].partition("=")[::2] for f in flags)
    steps: list[str] = []
    for doc in ins.heredocs:
        target = dest
        if dest.endswith("/") or len(sources) > 1:
            target = posixpath.join(dest, doc.delimiter)
        quoted = shlex.quote(target)
        # shlex took the quotes off the source word; the heredoc keeps the author's quoting.
        quote = "'" if doc.quoted else ""
        marker = f"{'-' if doc.strip_tabs else ''}{quote}{doc.delimiter}{quote}"
        # BuildKit expands only variables in an unquoted COPY body, never commands.
        body = doc.body if doc.quoted else _no_commands(doc.body)
        steps.append(
            f'mkdir -p "$(dirname {quoted})" && cat > {quoted} <<{marker}\n{body}{doc.delimiter}\n'
        )
        if options.get("chown"):
            steps.append(f"chown {shlex.quote(options['chown'])} {quoted}\n")
        if options.get("chmod"):
            steps.append(f"chmod {shlex.quote(options['chmod'])} {quoted}\n")
    script = "set -e\n" + "".join(steps)
    return "RUN " + _eval(script)


def _plain_markers(args: str) -> str:
    """`COPY << 'EOF' /x` as `COPY <<EOF /x`: one word per marker (the quoting is kept on the
    Heredoc itself)."""
    return HEREDOC_MARKER.sub(
        lambda m: "<<" + m.group(1) + next(g for g in m.groups()[1:] if g), args
    )


def _no_commands(body: str) -> str:
    return re.sub(r"(?<!\\)(\$\(|`)", r"\\\1", body)


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()
