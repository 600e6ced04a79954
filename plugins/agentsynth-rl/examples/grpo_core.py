"""GRPO on the `core` SQL pack with TRL: the pack's worlds as the environment, their verdicts as the reward.

    # CPU, a tiny model built here from a config (no download): a smoke run, rewards stay near 0
    python examples/grpo_core.py --steps 2
    # a GPU and a real model (downloads it; pip install 'agentsynth-rl[trl]' torch vllm)
    python examples/grpo_core.py --model Qwen/Qwen3-0.6B --steps 500 --batch 16 --generations 8
"""

from __future__ import annotations

import argparse
import json

from datasets import Dataset
from transformers.utils import get_json_schema
from trl import GRPOConfig, GRPOTrainer

from agentsynth_rl import VerdictReward, dataset_rows, environment_factory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pack", default="core")
    parser.add_argument("--model", default="tiny", help="'tiny' (built locally, CPU) or a model id / path")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--generations", type=int, default=2)
    parser.add_argument("--out", default="grpo-out")
    args = parser.parse_args()

    rows = dataset_rows(args.pack, split="train", repeat=4)  # train split only; rows carry task_id + seed
    Env = environment_factory(args.pack, max_steps=10)  # one fresh world per rollout, tools as methods
    reward = VerdictReward(args.pack)  # the checkers' verdict of the rollout's world (1.0 / 0.0)
    if args.model == "tiny":
        from agentsynth_rl.tiny import tiny_model, tiny_tokenizer

        probe = Env()
        probe.reset(**rows[0])
        tools = [get_json_schema(getattr(probe, t.name)) for t in probe.env.tool_specs]
        tokenizer = tiny_tokenizer([json.dumps(r["prompt"]) for r in rows] + [json.dumps(tools)],
                                   conversations=[(r["prompt"], tools) for r in rows[:4]])
        model, extra = tiny_model(tokenizer), {"use_cpu": True, "bf16": False}
    else:
        from transformers import AutoTokenizer

        model, tokenizer, extra = args.model, AutoTokenizer.from_pretrained(args.model), {}
    config = GRPOConfig(output_dir=args.out, max_steps=args.steps, per_device_train_batch_size=args.batch,
                        num_generations=args.generations, max_completion_length=256, max_tool_calling_iterations=8,
                        logging_steps=1, report_to="none", save_strategy="no", beta=0.0, log_completions=True,
                        chat_template_kwargs={"enable_thinking": False}, **extra)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=reward, args=config,
                          train_dataset=Dataset.from_list(rows), environment_factory=Env)
    trainer.train()
    for entry in trainer.state.log_history:
        if "reward" in entry:
            print(f"step {entry['step']}: reward {entry['reward']:.3f}, tool calls/completion "
                  f"{entry.get('tools/call_frequency', 0):.2f}")


if __name__ == "__main__":
    main()
