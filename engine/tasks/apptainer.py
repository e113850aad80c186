"""Apptainer (Singularity) definition files, as Endless Terminals' generator writes them
(`container.def`), translated into a Dockerfile so the task runs in Docker.

What is translated: the header (`Bootstrap: docker|library|localimage`, `From:`), `%files`
(COPY from the task folder), `%post` (one RUN of the script as written, run the way Apptainer
runs it: `/bin/sh -e`, or the interpreter given with `%post -c`), `%environment` (ENV for plain
`export NAME=value` lines) and `%labels` (LABEL). Ignored, as they have no meaning for a task
image: `%runscript`, `%startscript`, `%test`, `%help`; `%setup` runs on the build host, so it is
never run (a warning says so).
"""

from __future__ import annotations

import base64
import json
import posixpath
import re
import shlex
import textwrap
from dataclasses import dataclass, field
from pathlib import PurePosixPath

SECTIONS = {
    "setup",
    "files",
    "environment",
    "post",
    "runscript",
    "startscript",
    "test",
    "labels",
    "help",
}
IGNORED = {"runscript", "startscript", "test", "help"}
_SECTION_RE = re.compile(r"^%(\w+)\b(.*)$")
_HEADER_RE = re.compile(r"^([A-Za-z][\w-]*)\s*:\s*(.*)$")


class ApptainerError(ValueError):
    """A definition that cannot be translated; the message says which line and why."""

    def __init__(self, message: str, line: int | None = None) -> None:
        self.line = line
        super().__init__(f"line {line}: {message}" if line else message)


@dataclass(frozen=True)
class Section:
    name: str
    args: str  # what follows the section name, e.g. "-c /bin/bash" or "from builder"
    line: int  # line of the %name header
    body: str


@dataclass(frozen=True)
class Definition:
    bootstrap: str
    source: str  # the From: value
    header: dict[str, str]
    sections: tuple[Section, ...] = field(default_factory=tuple)

    def section(self, name: str) -> Section | None:
        return next((s for s in self.sections if s.name == name), None)


def parse_definition(text: str) -> Definition:
    if not text.strip():
        raise ApptainerError("the definition is empty: expected 'Bootstrap:' and 'From:' headers")
    header: dict[str, str] = {}
    header_lines: dict[str, int] = {}
    sections: list[Section] = []
    current: tuple[str, str, int] | None = None
    body: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        match = _SECTION_RE.match(raw.strip()) if not raw[:1].isspace() else None
        if match and (
            match.group(1).lower() in SECTIONS or match.group(1).lower().startswith("app")
        ):
            if current:
                sections.append(Section(current[0], current[1], current[2], "\n".join(body)))
            current = (match.group(1).lower(), match.group(2).strip(), number)
            body = []
            continue
        if current:
            body.append(raw)
            continue
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        head = _HEADER_RE.match(stripped)
        if not head:
            raise ApptainerError(
                f"expected a header 'Key: value' or a %section, got {stripped[:60]!r}", number
            )
        key = head.group(1).lower()
        if key == "bootstrap" and "bootstrap" in header:
            raise ApptainerError("more than one 'Bootstrap:' header", number)
        header[key] = head.group(2).strip()
        header_lines[key] = number
    if current:
        sections.append(Section(current[0], current[1], current[2], "\n".join(body)))
    for section in sections:
        # A second stage repeats the header inside the previous section's body.
        for offset, line in enumerate(section.body.splitlines(), start=1):
            if re.match(r"^Bootstrap\s*:", line.strip(), re.IGNORECASE) and not line[:1].isspace():
                raise ApptainerError(
                    "multi-stage definitions are not supported", section.line + offset
                )
    if "bootstrap" not in header:
        raise ApptainerError("no 'Bootstrap:' header (expected e.g. 'Bootstrap: docker')")
    if not header.get("from"):
        raise ApptainerError("no 'From:' header naming the base image", header_lines["bootstrap"])
    return Definition(
        bootstrap=header["bootstrap"].lower(),
        source=header["from"],
        header=header,
        sections=tuple(sections),
    )


def base_image(defn: Definition) -> tuple[str, list[str]]:
    """The Docker image the definition starts from, and warnings about the mapping."""
    if defn.bootstrap == "docker":
        return defn.source.removeprefix("docker://"), []
    if defn.bootstrap == "library":
        # Sylabs' library mirrors Docker Hub's official images under library/default/.
        name = defn.source.removeprefix("library://")
        name = re.sub(r"^(library/)?(default/)?", "", name)
        return name, [f"Bootstrap: library image '{defn.source}' read as Docker image '{name}'"]
    if defn.bootstrap == "localimage":
        stem = PurePosixPath(defn.source).name.removesuffix(".sif").removesuffix(".img")
        match = re.match(r"^([a-z][a-z0-9]*)[_-](\d[\w.]*)$", stem)
        if not match:
            raise ApptainerError(
                f"Bootstrap: localimage '{defn.source}' does not say which image it holds "
                "(expected a file named like ubuntu_22.04.sif)"
            )
        name = f"{match.group(1)}:{match.group(2)}"
        return name, [f"Bootstrap: localimage '{defn.source}' read as Docker image '{name}'"]
    raise ApptainerError(
        f"Bootstrap: {defn.bootstrap} is not supported (expected docker, library or localimage)"
    )


def _files(section: Section) -> tuple[list[tuple[str, str]], list[str]]:
    if section.args.lower().startswith("from"):
        raise ApptainerError("'%files from <stage>' needs multi-stage builds", section.line)
    pairs: list[tuple[str, str]] = []
    for offset, raw in enumerate(section.body.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            words = shlex.split(line)
        except ValueError as exc:
            raise ApptainerError(f"%files entry {line!r}: {exc}", section.line + offset) from exc
        if len(words) > 2:
            raise ApptainerError(
                f"%files entry {line!r}: expected 'source [destination]'", section.line + offset
            )
        src = words[0]
        dest = words[1] if len(words) == 2 else src
        norm = posixpath.normpath(src)
        if src.startswith("/") or norm.startswith(".."):
            raise ApptainerError(
                f"%files source {src!r} is outside the task folder (only files beside "
                "container.def can be copied)",
                section.line + offset,
            )
        pairs.append((norm, dest if dest.startswith("/") else "/" + dest))
    return pairs, []


def _environment(section: Section) -> tuple[list[tuple[str, str]], list[str]]:
    pairs: list[tuple[str, str]] = []
    warnings: list[str] = []
    for offset, raw in enumerate(section.body.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            words = shlex.split(line)
        except ValueError:
            words = []
        if words and words[0] == "export":
            words = words[1:]
        if words and all(re.match(r"^[A-Za-z_]\w*=", w) for w in words):
            for word in words:
                name, _, value = word.partition("=")
                pairs.append((name, value))
        elif words and all(re.match(r"^[A-Za-z_]\w*$", w) for w in words):
            continue  # `export NAME` of a variable set earlier: nothing to add
        else:
            warnings.append(
                f"container.def line {section.line + offset}: %environment line {line[:60]!r} "
                "is not a plain NAME=value assignment and was not translated"
            )
    return pairs, warnings


def _labels(section: Section) -> list[tuple[str, str]]:
    out = []
    for raw in section.body.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition(" ")
            out.append((name, value.strip()))
    return out


def _post_interpreter(section: Section) -> str:
    args = section.args.split()
    if len(args) >= 2 and args[0] == "-c":
        return args[1]
    return "/bin/sh"


@dataclass(frozen=True)
class HomeOwner:
    """The agent's home and account: what %post creates under the home is given to it."""

    home: str
    user: str
    uid: int


def to_dockerfile(
    defn: Definition, source_name: str = "container.def", home_owner: HomeOwner | None = None
) -> tuple[str, list[str]]:
    """Dockerfile text for the definition, and warnings for what did not translate exactly.
    With `home_owner`, what %post creates under the home belongs to the agent (see _give_home)."""
    image, warnings = base_image(defn)
    lines = [
        f"# Generated by depthtui from {source_name} (Apptainer definition).",
        f"FROM {image}",
    ]
    files: list[tuple[str, str]] = []
    env: list[tuple[str, str]] = []
    labels: list[tuple[str, str]] = []
    post: Section | None = None
    for section in defn.sections:
        if section.name == "files":
            pairs, more = _files(section)
            files += pairs
            warnings += more
        elif section.name == "environment":
            pairs, more = _environment(section)
            env += pairs
            warnings += more
        elif section.name == "labels":
            labels += _labels(section)
        elif section.name == "post":
            if post is not None:
                raise ApptainerError("more than one %post section", section.line)
            post = section
        elif section.name == "setup":
            if section.body.strip():
                warnings.append(
                    f"{source_name}: %setup runs on the build host and was not run "
                    "(move what it does into %post)"
                )
        elif section.name.startswith("app"):
            warnings.append(f"{source_name}: %{section.name} (SCIF apps) was ignored")
    # Apptainer copies %files before it runs %post.
    for src, dest in files:
        lines.append(f"COPY {json.dumps([src, dest])}")
    if post is not None and post.body.strip():
        script = textwrap.dedent(post.body).strip("\n") + "\n"
        encoded = base64.b64encode(script.encode()).decode()
        interpreter = _post_interpreter(post)
        lines.append("# %post, as written in the definition:")
        lines += [f"#   {line}" if line.strip() else "#" for line in script.splitlines()]
        # The script travels base64-encoded: Docker's classic builder has no heredocs, and this
        # keeps quotes, backslashes and blank lines exactly as the author wrote them.
        lines.append(
            f"RUN echo {encoded} | base64 -d > /tmp/.apptainer-post.sh"
            f" && {interpreter} -e /tmp/.apptainer-post.sh && rm -f /tmp/.apptainer-post.sh"
        )
    if home_owner is not None:
        lines.insert(2, f"RUN {_HOME_BEFORE.format(home=shlex.quote(home_owner.home))}")
        lines.append(f"RUN {_give_home(post.body if post else '', home_owner)}")
    # %environment applies when the container runs, not during %post: ENV comes after RUN.
    for name, value in env:
        lines.append(f"ENV {name}={json.dumps(value, ensure_ascii=False)}")
    for name, value in labels:
        lines.append(f"LABEL {json.dumps(name)}={json.dumps(value, ensure_ascii=False)}")
    return "\n".join(lines) + "\n", warnings


# Before %files and %post, the home's entries (the base image's) are listed.
_HOME_BEFORE = "find {home} -xdev 2>/dev/null | sort > /.depthtui-home-before; true"
# $1 home, $2 user, $3 uid, $4 the paths %post chowns itself (one a line). Every root-owned
# entry of the home that the base image did not have and that %post did not chown itself is
# given to the agent's account (numeric when the image has none yet: the sandbox makes it with
# that uid).
_GIVE_HOME = r"""
home=$1; user=$2; uid=$3; kept=$4
if id -u "$user" >/dev/null 2>&1; then owner="$(id -u "$user"):$(id -g "$user")"
else owner="$uid:$uid"; fi
[ -f /.depthtui-home-before ] || : > /.depthtui-home-before
printf '%s\n' "$kept" | grep -v '^$' > /tmp/.depthtui-home-kept || true
find "$home" -xdev -user 0 2>/dev/null | sort | comm -23 - /.depthtui-home-before |
while IFS= read -r path; do
    skip=
    while IFS= read -r k; do
        case "$path" in "$k"|"$k"/*) skip=1 ;; esac
    done < /tmp/.depthtui-home-kept
    [ -n "$skip" ] || chown -h "$owner" "$path"
done
rm -f /.depthtui-home-before /tmp/.depthtui-home-kept
"""


def _give_home(post: str, owner: HomeOwner) -> str:
    """Endless Terminals' runner gives the agent what the definition made in its home (a
    correct solution writes into folders %post created as root); Docker would leave them
    root-owned. Paths %post chowns itself keep the owner it gave them: the task said so."""
    give = base64.b64encode(_GIVE_HOME.encode()).decode()
    args = [owner.home, owner.user, str(owner.uid), "\n".join(_chowned(post, owner.home))]
    return f"echo {give} | base64 -d | sh -s -- {' '.join(shlex.quote(a) for a in args)}"


def _chowned(script: str, home: str) -> list[str]:
    """Paths under `home` that a `chown` in the script names (its own choice of owner)."""
    found: list[str] = []
    for line in script.splitlines():
        for part in re.split(r"&&|\|\||;", line):
            try:
                words = shlex.split(part, comments=True)
            except ValueError:
                continue
            if len(words) < 3 or PurePosixPath(words[0]).name != "chown":
                continue
            operands = [w for w in words[1:] if not w.startswith("-")][1:]
            for path in operands:
                path = posixpath.normpath(path)
                if path == home or path.startswith(home.rstrip("/") + "/"):
                    found.append(path)
    return found


def translate(text: str, source_name: str = "container.def") -> tuple[str, list[str]]:
    """Parse and translate in one step (raises ApptainerError)."""
    return to_dockerfile(parse_definition(text), source_name)


def copied_sources(defn: Definition) -> list[str]:
    """Task-folder paths that %files copies into the image."""
    out: list[str] = []
    for section in defn.sections:
        if section.name == "files":
            out += [src for src, _ in _files(section)[0]]
    return out
