"""What `depthtui serve` prepares before vLLM starts (docs/serve.md): a GGUF model dequantized
once into a cache folder vLLM can load, the chat template (the model's own, or the shipped
Hermes-style tool template when the model's ignores `tools`), and the settings vLLM's CPU build
needs.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERMES_TEMPLATE = (
    Path(__file__).resolve().parents[2] / "prompts" / "templates" / "hermes_tools.jinja"
)
CONVERTER = Path(__file__).with_name("gguf_convert.py")
DEFAULT_KV_CACHE_GIB = 1


class PrepareError(RuntimeError):
    """The model cannot be made ready to serve; the message says why and what to do."""


# --------------------------------------------------------------------------- GGUF


def gguf_file(model: str) -> Path | None:
    """The GGUF file MODEL names: the file itself, or the one .gguf in a folder without
    config.json; None for anything else (a Hugging Face folder or id)."""
    path = Path(model).expanduser()
    if path.is_file() and path.suffix.lower() == ".gguf":
        return path.resolve()
    if path.is_dir() and not (path / "config.json").is_file():
        found = sorted(path.glob("*.gguf"))
        if len(found) > 1:
            names = ", ".join(p.name for p in found)
            raise PrepareError(f"{path} holds several GGUF files ({names}): name one")
        if found:
            return found[0].resolve()
    return None


def gguf_cache_folder(gguf: Path, cache: Path) -> Path:
    """Where the dequantized model of this file goes: named by the file and what it holds (its
    path, size and modification time), so a changed file is converted again."""
    st = gguf.stat()
    key = hashlib.sha256(f"{gguf}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()[:12]
    return cache / "gguf" / f"{gguf.stem}-{key}"


def dequantize(
    gguf: Path,
    cache: Path,
    python: str,
    progress: Callable[[str], None],
    run: Callable[..., subprocess.Popen] = subprocess.Popen,
) -> Path:
    """The model folder for `gguf`, converted once by `python` (which has transformers, torch
    and gguf: the one beside vllm); later calls find it in the cache."""
    out = gguf_cache_folder(gguf, cache)
    if (out / "config.json").is_file():
        progress(f"dequantized model found in the cache: {out}")
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    progress(f"dequantizing {gguf.name} once into {out} (transformers + gguf, with {python})")
    proc = run(
        [python, str(CONVERTER), str(gguf), str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip("\n")
        lines.append(line)
        if line.startswith("[gguf] "):
            progress(line.removeprefix("[gguf] "))
    code = proc.wait()
    if code != 0 or not (out / "config.json").is_file():
        tail = "\n".join(lines[-15:])
        raise PrepareError(
            f"dequantizing {gguf} failed (exit {code}); {python} needs transformers, torch and "
            f"gguf (pip install gguf):\n{tail}"
        )
    return out


# --------------------------------------------------------------------------- chat template


def own_template(folder: Path) -> str | None:
    """The chat template a model folder ships (tokenizer_config.json's, or chat_template.jinja),
    None when it has none or is not a local folder."""
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(errors="replace")
    config = folder / "tokenizer_config.json"
    try:
        template = json.loads(config.read_text()).get("chat_template")
    except (OSError, ValueError, AttributeError):
        return None
    if isinstance(template, list):  # named templates: [{"name": ..., "template": ...}]
        template = " ".join(str(t.get("template", "")) for t in template if isinstance(t, dict))
    return template if isinstance(template, str) else None


@dataclass(frozen=True)
class TemplateChoice:
    path: str | None  # what --chat-template gets; None = the model's own
    warning: str | None = None
    hermes: bool = False  # the shipped Hermes template: its calls need the hermes parser


def choose_template(model: str, explicit: str | None) -> TemplateChoice:
    """`--chat-template` as given; else the model's own when it handles `tools`; else, for a
    local folder whose template ignores tools, the shipped Hermes-style one, with a warning."""
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise PrepareError(f"--chat-template {explicit}: no such file")
        return TemplateChoice(str(path.resolve()), hermes=path.resolve() == HERMES_TEMPLATE)
    folder = Path(model).expanduser()
    if not folder.is_dir():
        return TemplateChoice(None)  # a hub id: its template is read by vLLM, not here
    template = own_template(folder)
    if template is not None and "tools" in template:
        return TemplateChoice(None)
    why = "has no chat template" if template is None else "has a chat template that ignores `tools`"
    return TemplateChoice(
        str(HERMES_TEMPLATE),
        f"{folder} {why}, so the model would never see the bash tool: serving it with "
        f"{HERMES_TEMPLATE.name} (Hermes-style <tool_call> markup, read back by the hermes tool "
        "parser); pass --chat-template to choose another",
        hermes=True,
    )


# --------------------------------------------------------------------------- CPU


def usable_cores() -> list[int]:
    """The CPU cores this process may run on."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def cpu_env(cores: list[int], kv_cache_gib: int = DEFAULT_KV_CACHE_GIB) -> dict[str, str]:
    """The environment vLLM's CPU build needs: its platform, a KV cache that fits, and its
    OpenMP threads bound to every core this process may use (left alone, it keeps one core for
    itself and ran one torch thread on a 2-core machine)."""
    ranges = _ranges(cores)
    return {
        "VLLM_TARGET_DEVICE": "cpu",
        "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib),
        "VLLM_CPU_OMP_THREADS_BIND": ranges,
        "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
        "OMP_NUM_THREADS": str(len(cores)),
    }


def _ranges(cores: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2,5" (the form VLLM_CPU_OMP_THREADS_BIND takes)."""
    out: list[str] = []
    start = prev = None
    for c in sorted(cores):
        if start is None:
            start = prev = c
        elif c == prev + 1:
            prev = c
        else:
            out.append(f"{start}-{prev}" if start != prev else str(start))
            start = prev = c
    if start is not None:
        out.append(f"{start}-{prev}" if start != prev else str(start))
    return ",".join(out)
