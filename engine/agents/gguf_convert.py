"""Dequantize a GGUF model into a Hugging Face folder (config.json, safetensors, tokenizer and
its chat template), for `depthtui serve MODEL.gguf` (engine/agents/serve_model.py).

Run as a script by the Python that has transformers, torch and gguf (the one beside the vllm
executable), never imported by depthtui itself: `python gguf_convert.py FILE.gguf OUT_FOLDER`.
It prints one line per step so the caller can show progress.

transformers loads a GGUF file dequantized (`from_pretrained(folder, gguf_file=name)`) but its
`save_pretrained` refuses a model loaded that way, so the weights are moved into a fresh model
built from the same config, and that one is saved.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def say(message: str) -> None:
    print(f"[gguf] {message}", flush=True)


def convert(gguf: Path, out: Path) -> None:
    started = time.monotonic()
    say(f"importing transformers to read {gguf.name}")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    say("reading the tokenizer and its chat template")
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    say("reading and dequantizing the weights (the slow step)")
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    say(f"dequantized in {time.monotonic() - started:.0f} s; moving the weights to a fresh model")
    fresh = AutoModelForCausalLM.from_config(loaded.config, dtype=torch.float32)
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
    # Tied embeddings have no lm_head of their own in the file: that one may be missing.
    missing = [k for k in missing if not k.startswith("lm_head")]
    if missing or unexpected:
        raise SystemExit(
            f"weights do not match the config: missing {missing[:5]}, unexpected {unexpected[:5]}"
        )
    fresh.tie_weights()
    fresh = fresh.to(torch.bfloat16)
    fresh.config.dtype = "bfloat16"
    tmp = out.with_name(out.name + ".partial")
    say(f"writing {tmp}")
    fresh.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    # The config remembers it came from GGUF (quant_method "gguf"); the weights are plain now,
    # and vLLM refuses a folder whose config names a quantization it cannot load.
    config = json.loads((tmp / "config.json").read_text())
    config.pop("quantization_config", None)
    (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    tmp.rename(out)
    say(f"done in {time.monotonic() - started:.0f} s: {out}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: gguf_convert.py FILE.gguf OUT_FOLDER")
    convert(Path(sys.argv[1]), Path(sys.argv[2]))
