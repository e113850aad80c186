"""Just enough Dockerfile reading for the loader: base images, the final WORKDIR and USER, and
what COPY/ADD take from the build context. Not a builder; Docker parses the file for real."""

from __future__ import annotations

import fnmatch
import json
import posixpath
import re
import shlex
from dataclasses import dataclass

# Images that are ours and built locally: never worth a "may need substituting" warning.
LOCAL_IMAGE_PREFIXES = ("depthtui/",)


# A heredoc marker (BuildKit syntax, in RUN, COPY and ADD): `<<EOF`, `<<-EOF`, `<<'EOF'`,
# `<<"EOF"`, `<<\EOF`, with or without blanks after the operator (`cat << 'EOF' > file`, as the
# shell reads it). `<<<` (a here-string) and `1 << 3` (a shift: no name) are not markers.
_NAME = r"[A-Za-z_][\w.-]*"
HEREDOC_MARKER = re.compile(
    rf"(?<![<\w])<<(-?)[ \t]*(?:\"({_NAME})\"|'({_NAME})'|\\({_NAME})|({_NAME})(?![\w\"']))"
)
HEREDOC_KEYWORDS = ("RUN", "COPY", "ADD")


@dataclass(frozen=True)
class Heredoc:
    delimiter: str
    quoted: bool  # <<'EOF': no expansion in the body
    strip_tabs: bool  # <<-EOF: leading tabs of body lines are dropped
    body: str  # the lines between the instruction and the delimiter line, newlines kept


@dataclass(frozen=True)
class Instruction:
    line: int  # 1-based line where the instruction starts
    keyword: str  # upper case
    args: str
    heredocs: tuple[Heredoc, ...] = ()
    end: int = 0  # 1-based last line, heredoc bodies included


@dataclass(frozen=True)
class DockerfileInfo:
    instructions: tuple[Instruction, ...]
    # (line, image) of every FROM that names an image rather than an earlier build stage.
    base_images: tuple[tuple[int, str], ...]
    # The final stage's working directory and user, when the file sets them.
    workdir: str | None
    user: str | None
    # (line, source) of every COPY/ADD source taken from the build context.
    context_sources: tuple[tuple[int, str], ...]
    # Users that RUN lines create with an explicit uid (`useradd -u 1001 agent`).
    user_ids: dict[str, int]


def instructions(text: str) -> list[Instruction]:
    """Logical instructions: comments dropped, backslash continuations joined, heredoc bodies
    (BuildKit's `RUN <<EOF ... EOF`) taken into the instruction they belong to."""
    out: list[Instruction] = []
    lines = text.splitlines(keepends=True)
    buf: list[str] = []
    start = 0
    i = 0
    while i < len(lines):
        number, stripped = i + 1, lines[i].strip()
        i += 1
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue  # comment lines inside a continuation are skipped by Docker too
        if not buf:
            start = number
        if stripped.endswith("\\") and i < len(lines):
            buf.append(stripped[:-1])
            continue
        buf.append(stripped.removesuffix("\\"))
        joined = " ".join(part.strip() for part in buf).strip()
        buf = []
        keyword, _, args = joined.partition(" ")
        keyword = keyword.upper()
        docs, i = _heredocs(keyword, args, lines, i)
        out.append(Instruction(start, keyword, args.strip(), docs, i if docs else number))
    return out


def _heredocs(keyword: str, args: str, lines: list[str], i: int) -> tuple[tuple[Heredoc, ...], int]:
    """The heredocs an instruction opens, read from lines[i:], and the index after them. Only
    markers whose delimiter line exists count: anything else is left to Docker to reject."""
    if keyword not in HEREDOC_KEYWORDS or args.lstrip().startswith("["):
        return (), i  # the exec (JSON) form has no heredocs
    first = i
    docs: list[Heredoc] = []
    for match in HEREDOC_MARKER.finditer(args):
        strip_tabs, delimiter = match.group(1) == "-", next(g for g in match.groups()[1:] if g)
        quoted = match.group(5) is None
        body: list[str] = []
        for j in range(i, len(lines)):
            candidate = lines[j].rstrip("\r\n")
            if (candidate.lstrip("\t") if strip_tabs else candidate) == delimiter:
                docs.append(Heredoc(delimiter, quoted, strip_tabs, "".join(body)))
                i = j + 1
                break
            body.append(lines[j])
        else:
            return (), first
    return tuple(docs), i


def _substitute(value: str, args: dict[str, str]) -> str:
    def repl(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return args.get(name, match.group(0))

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", repl, value)


def _split_args(args: str) -> list[str]:
    if args.startswith("["):
        try:
            parsed = json.loads(args)
            if isinstance(parsed, list):
                return [str(p) for p in parsed]
        except json.JSONDecodeError:
            pass
    try:
        return shlex.split(args)
    except ValueError:
        return args.split()


def parse(text: str) -> DockerfileInfo:
    items = instructions(text)
    global_args: dict[str, str] = {}
    stage_workdirs: dict[str, str | None] = {}
    stage_users: dict[str, str | None] = {}
    base_images: list[tuple[int, str]] = []
    sources: list[tuple[int, str]] = []
    workdir: str | None = None
    user: str | None = None
    seen_from = False
    current_alias: str | None = None
    for ins in items:
        if ins.keyword == "ARG" and not seen_from:
            name, _, default = ins.args.partition("=")
            if default:
                global_args[name.strip()] = default.strip().strip('"').strip("'")
        elif ins.keyword == "FROM":
            seen_from = True
            words = [w for w in ins.args.split() if not w.startswith("--")]
            image = _substitute(words[0], global_args) if words else ""
            alias = words[2] if len(words) >= 3 and words[1].lower() == "as" else None
            if image.lower() in stage_workdirs:
                # Built on an earlier stage: it inherits that stage's WORKDIR and USER.
                workdir = stage_workdirs[image.lower()]
                user = stage_users[image.lower()]
            else:
                base_images.append((ins.line, image))
                workdir, user = None, None
            if alias:
                stage_workdirs[alias.lower()] = workdir
                stage_users[alias.lower()] = user
            current_alias = alias.lower() if alias else None
            continue
        elif ins.keyword == "WORKDIR" and ins.args:
            target = ins.args.strip().strip('"').strip("'")
            workdir = posixpath.normpath(posixpath.join(workdir or "/", target))
        elif ins.keyword == "USER" and ins.args:
            user = ins.args.split(":")[0].strip()
        elif ins.keyword in ("COPY", "ADD"):
            words = _split_args(ins.args)
            if any(w.startswith("--from") for w in words):
                continue  # from another stage or image, not from the context
            words = [w for w in words if not w.startswith("--")]
            if any(w.startswith("<<") for w in words):
                continue  # heredoc: the content is inline
            for src in words[:-1]:
                if not re.match(r"^[a-z]+://", src):
                    sources.append((ins.line, src))
        if current_alias:
            stage_workdirs[current_alias] = workdir
            stage_users[current_alias] = user
    return DockerfileInfo(
        instructions=tuple(items),
        user_ids=_user_ids(items),
        base_images=tuple(base_images),
        workdir=workdir,
        user=user,
        context_sources=tuple(sources),
    )


def _user_ids(items: list[Instruction]) -> dict[str, int]:
    found: dict[str, int] = {}
    for ins in items:
        if ins.keyword != "RUN":
            continue
        for match in re.finditer(r"\b(?:useradd|adduser)\s+([^&;|]*)", ins.args):
            words = match.group(1).split()
            uid = None
            for i, word in enumerate(words[:-1]):
                if word in ("-u", "--uid") and words[i + 1].isdigit():
                    uid = int(words[i + 1])
                elif word.startswith("--uid=") and word[6:].isdigit():
                    uid = int(word[6:])
            if uid is not None and words and not words[-1].startswith("-"):
                found[words[-1]] = uid
    return found


def copies_private(source: str, private: str) -> bool:
    """Whether `COPY source ...` would take the context-relative path `private` into the image."""
    src = posixpath.normpath(source.lstrip("/")) if source not in ("", "/") else "."
    if src.startswith("./"):
        src = src[2:]
    if src in (".", "*"):
        return True
    private = private.rstrip("/")
    if src == private or private.startswith(src.rstrip("/") + "/"):
        return True
    return fnmatch.fnmatch(private, src) or fnmatch.fnmatch(private.split("/")[0], src)


def needs_substitute(image: str) -> bool:
    """An image the offline machine may not have: anything not built by depthtui itself."""
    return not image.startswith(LOCAL_IMAGE_PREFIXES) and image.lower() != "scratch"
