"""How commands are read out of a model's reply, for each action format.

"tools": the endpoint's native tool calls (one tool, `bash(command)`); a tool call whose arguments
are not a JSON object with a string `command`, or that names another tool, is malformed. Tool-call
markup left in the text (vLLM drops every call of a reply when one fails to parse, leaving the raw
markup in `content`) is a format error, never the agent finishing.

"fenced" and "tags": chat models without tool calling write ```bash blocks or
<command>...</command> tags; each block or tag is one command, run in order. An opening with no
close (a reply cut off mid-command) is a format error. A reply with none means the agent finished.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

TOOL_NAME = "bash"
# At most this many calls of one reply are run; the rest are refused (engine/agents/loop.py,
# docs/work-and-turns.md). Stated to the model in the tool's description and the text formats'
# instructions.
CALLS_PER_REPLY = 32

BASH_TOOL: dict = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": (
            "Run a command in a persistent bash shell (the working directory and variables carry "
            "over between calls). No standard input; output is shortened when long. At most "
            f"{CALLS_PER_REPLY} calls of one reply are run; the rest are not."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command to run."}
            },
            "required": ["command"],
        },
    },
}

# Markup that tool-call parsers consume: seeing it in `content` means calls were lost.
RAW_TOOL_MARKUP = re.compile(
    r"<tool_call>|</tool_call>|<function=|<\|tool_call|\[TOOL_CALLS\]|<tool_calls>|"
    r"<\|python_tag\|>|<｜tool▁call"
)
# Reasoning some servers leave inline when no reasoning parser is configured; commands quoted
# while thinking are not commands.
THINK_BLOCK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL)

FENCE_OPEN = re.compile(r"^[ \t]*```[ \t]*(bash|sh|shell)[ \t]*$", re.MULTILINE)
FENCE_CLOSE = re.compile(r"^[ \t]*```[ \t]*$", re.MULTILINE)
TAG_OPEN = "<command>"
TAG_CLOSE = "</command>"


@dataclass(frozen=True)
class ParsedCommand:
    """One command read from a reply, or why it could not be read."""

    command: str | None
    error: str | None = None
    tool_call_id: str = ""
    # The raw call as the model wrote it (tool name and arguments), for the record.
    raw: str = ""


@dataclass(frozen=True)
class ParsedReply:
    commands: tuple[ParsedCommand, ...]
    # A problem with the reply as a whole (markup left in the text, an unclosed block).
    format_error: str | None = None


def parse_tool_calls(tool_calls: list[dict] | None, content: str | None) -> ParsedReply:
    """Read the native tool calls of a reply (as the endpoint returned them, JSON dicts)."""
    commands = []
    for call in tool_calls or []:
        fn = call.get("function") or {}
        name = fn.get("name") or ""
        args = fn.get("arguments")
        raw = f"{name}({args if isinstance(args, str) else json.dumps(args)})"
        call_id = str(call.get("id") or "")
        commands.append(_one_tool_call(name, args, call_id, raw))
    error = None
    if not commands and content and RAW_TOOL_MARKUP.search(strip_thinking(content)):
        error = (
            "Your reply contains tool-call markup in its text, but no tool call could be read "
            "from it, so nothing was run. Call the bash tool with a JSON object such as "
            '{"command": "ls"}.'
        )
    return ParsedReply(tuple(commands), error)


def _one_tool_call(name: str, args: object, call_id: str, raw: str) -> ParsedCommand:
    if name != TOOL_NAME:
        return ParsedCommand(
            None,
            f"Unknown tool '{name}'. The only tool is bash, called with "
            '{"command": "..."}. Nothing was run.',
            call_id,
            raw,
        )
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError as exc:
            return ParsedCommand(
                None,
                f"The arguments of this bash call are not valid JSON ({exc.msg}, position "
                f'{exc.pos}), so nothing was run. Send a JSON object such as {{"command": "ls"}}.',
                call_id,
                raw,
            )
    if not isinstance(args, dict) or not isinstance(args.get("command"), str):
        return ParsedCommand(
            None,
            'This bash call has no string "command" argument, so nothing was run. Send a JSON '
            'object such as {"command": "ls"}.',
            call_id,
            raw,
        )
    if not args["command"].strip():
        return ParsedCommand(
            None, "This bash call's command is empty, so nothing was run.", call_id, raw
        )
    return ParsedCommand(args["command"], None, call_id, raw)


def parse_text_actions(text: str | None, fmt: str) -> ParsedReply:
    """Read commands from a reply's text for the "fenced" or "tags" format."""
    body = strip_thinking(text or "")
    if fmt == "fenced":
        return _parse_fenced(body)
    if fmt == "tags":
        return _parse_tags(body)
    raise ValueError(f"not a text action format: {fmt!r}")


def _parse_fenced(body: str) -> ParsedReply:
    commands = []
    pos = 0
    while True:
        opening = FENCE_OPEN.search(body, pos)
        if opening is None:
            break
        closing = FENCE_CLOSE.search(body, opening.end())
        if closing is None:
            return ParsedReply(
                tuple(commands),
                "A ```bash block in your reply is not closed with ```, so it was not run.",
            )
        command = body[opening.end() : closing.start()].strip("\n")
        raw = body[opening.start() : closing.end()]
        if command.strip():
            commands.append(ParsedCommand(command, None, "", raw))
        else:
            commands.append(ParsedCommand(None, "This ```bash block is empty.", "", raw))
        pos = closing.end()
    return ParsedReply(tuple(commands))


def _parse_tags(body: str) -> ParsedReply:
    commands = []
    pos = 0
    while True:
        start = body.find(TAG_OPEN, pos)
        if start < 0:
            break
        end = body.find(TAG_CLOSE, start + len(TAG_OPEN))
        if end < 0:
            return ParsedReply(
                tuple(commands),
                f"A {TAG_OPEN} tag in your reply is not closed with {TAG_CLOSE}, "
                "so it was not run.",
            )
        command = body[start + len(TAG_OPEN) : end].strip("\n")
        raw = body[start : end + len(TAG_CLOSE)]
        if command.strip():
            commands.append(ParsedCommand(command, None, "", raw))
        else:
            commands.append(ParsedCommand(None, f"This {TAG_OPEN} tag is empty.", "", raw))
        pos = end + len(TAG_CLOSE)
    return ParsedReply(tuple(commands))


def strip_thinking(text: str) -> str:
    return THINK_BLOCK.sub("", text)


def text_results_message(observations: list[tuple[str, str]]) -> str:
    """The one user message that carries a text-format turn's results: (command, observation)."""
    blocks = []
    for i, (command, observation) in enumerate(observations, 1):
        blocks.append(f"Result of command {i}:\n$ {command}\n{observation}")
    return "\n\n".join(blocks)
