"""Writing one model's entry into models.toml (`depthtui serve --register`), in the format
engine/agents/registry.py reads; every other line of the file, comments included, is kept.
"""

from __future__ import annotations

import re
from pathlib import Path

from engine.agents.registry import SAMPLING_KEYS, ModelConfig, parse_models


def entry_toml(config: ModelConfig) -> str:
    """The `[models.NAME]` block for one chat model, in the documented format."""
    lines = [f"[models.{_key(config.name)}]"]
    if config.description:
        lines.append(f"description = {_tstr(config.description)}")
    lines.append(f"base_url = {_tstr(config.base_url)}")
    if config.api_key_env:
        lines.append(f"api_key_env = {_tstr(config.api_key_env)}")
    lines.append(f"model = {_tstr(config.model)}")
    lines.append(f"action_format = {_tstr(config.action_format)}")
    for key in ("max_total_tokens", "max_completion_tokens"):
        if getattr(config, key) is not None:
            lines.append(f"{key} = {getattr(config, key)}")
    sampling = {k: getattr(config.sampling, k) for k in sorted(SAMPLING_KEYS)}
    sampling = {k: v for k, v in sampling.items() if v is not None}
    if sampling:
        lines.append(f"\n[models.{_key(config.name)}.sampling]")
        lines += [f"{k} = {v!r}" for k, v in sampling.items()]
    return "\n".join(lines) + "\n"


def upsert_entry(path: Path, config: ModelConfig) -> None:
    """Write `config`'s block into the models file, replacing an earlier block of the same name
    and keeping every other line (comments included) as it was. The result is parsed before it is
    written, so a failure never leaves a broken file."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    kept = _without_block(old, config.name).rstrip("\n")
    new = (kept + "\n\n" if kept else "") + entry_toml(config)
    parse_models(new, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(new, encoding="utf-8")
    tmp.replace(path)


def _without_block(text: str, name: str) -> str:
    """`text` minus the tables `[models.NAME]` and `[models.NAME.x]`. Comment and blank lines just
    above the next table belong to that table, so they are kept."""
    header = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
    mine = False
    out: list[str] = []
    dropped: list[str] = []
    for line in text.splitlines():
        m = header.match(line)
        if m:
            parts = _dotted_keys(m.group(1))
            was_mine, mine = mine, len(parts) >= 2 and parts[0] == "models" and parts[1] == name
            if was_mine and not mine:
                tail = []
                while dropped and (not dropped[-1].strip() or dropped[-1].lstrip().startswith("#")):
                    tail.insert(0, dropped.pop())
                out.extend(tail)
            dropped = []
        (dropped if mine else out).append(line)
    return "\n".join(out)


def _dotted_keys(header: str) -> list[str]:
    """Split a table header's dotted key, honouring quoted parts (`models."qwen3.5"`)."""
    parts = re.findall(r'\s*("(?:[^"\\]|\\.)*"|\'[^\']*\'|[^.\s]+)\s*(?:\.|$)', header)
    return [p[1:-1] if p[:1] in "\"'" else p for p in parts]


def _key(name: str) -> str:
    return name if re.match(r"^[A-Za-z0-9_-]+$", name) else _tstr(name)


def _tstr(value: str) -> str:
    # A TOML basic string: JSON's escaping is a subset TOML accepts.
    import json

    return json.dumps(value, ensure_ascii=False)
