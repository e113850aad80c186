"""Shell read the way bash splits it, for rewriting a test.sh line by line (preamble.py): logical
lines (`\\` continuations and open quotes joined, heredoc bodies kept verbatim), the commands of
a line (split at `&&`, `||`, `;`, `|`, parentheses), and their words with their offsets, so a
rewrite can replace a command's program words and keep the rest of the line byte for byte.

Not a full parser: quotes, `$(...)`/`${...}`, comments and redirections are followed far enough
to find where words and commands end.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

OPERATORS = ("&&", "||", ";;", "|&", ";", "|", "(", ")", "&", "\n")


@dataclass(frozen=True)
class Word:
    raw: str
    start: int
    end: int

    @property
    def value(self) -> str:
        try:
            parts = shlex.split(self.raw, comments=False, posix=True)
        except ValueError:
            return self.raw
        return " ".join(parts)


@dataclass(frozen=True)
class Command:
    words: tuple[Word, ...]
    pipe_after: bool  # followed by `|`: part of a pipeline with the next command


def logical_lines(text: str):
    """(first line number, text, verbatim) for each logical line: physical lines joined by
    `\\` continuations and open quotes; heredoc bodies are verbatim."""
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        start = i
        chunk = lines[i]
        i += 1
        while _continues(chunk) and i < len(lines):
            chunk += lines[i]
            i += 1
        yield start + 1, chunk, False
        for delimiter, strip_tabs in _heredocs(chunk):
            body = ""
            while i < len(lines):
                line = lines[i]
                i += 1
                body += line
                candidate = line.rstrip("\n")
                if (candidate.lstrip("\t") if strip_tabs else candidate) == delimiter:
                    break
            yield i, body, True


def _continues(chunk: str) -> bool:
    """Whether bash reads on past this chunk's end: an open quote, or a trailing backslash
    outside a comment."""
    quote = None
    i = 0
    n = len(chunk)
    at_word_start = True
    while i < n:
        c = chunk[i]
        if quote == "'":
            if c == "'":
                quote = None
        elif quote == '"':
            if c == "\\":
                i += 1
            elif c == '"':
                quote = None
        elif c == "\\":
            # Only the chunk's own last line decides: an earlier `\` newline is already joined.
            if i + 1 >= n or (chunk[i + 1] == "\n" and i + 2 >= n):
                return True
            i += 1
        elif c in "'\"":
            quote = c
        elif c == "#" and at_word_start:
            # A comment runs to the end of its physical line; a trailing backslash there
            # continues nothing.
            nl = chunk.find("\n", i)
            if nl == -1:
                return False
            i = nl
            continue
        at_word_start = c in " \t\n;&|()"
        i += 1
    return quote is not None


def _heredocs(chunk: str) -> list[tuple[str, bool]]:
    found = []
    for match in re.finditer(r"(?<!<)<<(?!<)(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2", chunk):
        found.append((match.group(3), match.group(1) == "-"))
    return found


def split_commands(chunk: str) -> list[Command]:
    commands: list[Command] = []
    words: list[Word] = []
    i, n = 0, len(chunk)

    def flush(pipe: bool) -> None:
        if words:
            commands.append(Command(tuple(words), pipe))
            words.clear()

    while i < n:
        c = chunk[i]
        if c in " \t":
            i += 1
            continue
        if c == "\\" and chunk.startswith("\\\n", i):
            i += 2
            continue
        if c == "#":
            nl = chunk.find("\n", i)
            i = n if nl == -1 else nl
            continue
        op = next((o for o in OPERATORS if chunk.startswith(o, i)), None)
        if op == "&" and chunk.startswith("&>", i):
            op = None
        if op is not None:
            flush(pipe=op in ("|", "|&"))
            i += len(op)
            continue
        end = _word_end(chunk, i)
        words.append(Word(chunk[i:end], i, end))
        i = end
    flush(pipe=False)
    return commands


def _word_end(chunk: str, i: int) -> int:
    n = len(chunk)
    depth = 0
    while i < n:
        c = chunk[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            close = chunk.find("'", i + 1)
            i = n if close == -1 else close + 1
            continue
        if c == '"':
            i += 1
            while i < n and chunk[i] != '"':
                i += 2 if chunk[i] == "\\" else 1
            i += 1
            continue
        if chunk.startswith("$(", i) or chunk.startswith("${", i):
            depth += 1
            i += 2
            continue
        if depth and c in ")}":
            depth -= 1
            i += 1
            continue
        if depth == 0:
            if c in " \t\n;|()":
                break
            if c == "&" and not chunk.startswith("&>", i) and chunk[i - 1 : i] not in (">", "<"):
                break
        i += 1
    return min(i, n)
