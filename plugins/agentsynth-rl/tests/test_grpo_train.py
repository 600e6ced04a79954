"""The real GRPOTrainer (trl + transformers + torch on the CPU) training a tiny local model on a
pack through environment_factory, for two optimisation steps; the rewards it logs must be the
kernel's verdicts of the same completions, re-checked in fresh worlds. Run: nox -s rl-train."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.train
torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from datasets import Dataset  # noqa: E402
from transformers import TrainerCallback  # noqa: E402
from transformers.utils import get_json_schema  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from agentsynth_rl import VerdictReward, dataset_rows, environment_factory  # noqa: E402
from agentsynth_rl.tiny import tiny_model, tiny_tokenizer, warm_start  # noqa: E402

# What the tiny model is warm-started to say: the right call for set-b, a wrong one for set-c, so
# sampling from it gives rewards of both kinds, earned (or not) by acting in the world.
TARGET = {"set-b": '<tool_call>\n{"name": "put", "arguments": {"key": "b", "value": "2"}}\n</tool_call><|im_end|>',
          "set-c": '<tool_call>\n{"name": "put", "arguments": {"key": "c", "value": "4"}}\n</tool_call><|im_end|>'}


def test_trl_sees_the_worlds_own_tool_schemas(pack, host):
    env = environment_factory(pack, host=host)()
    env.reset(task_id="set-b")
    world = {t.name: t.parameters for t in env.env.tool_specs}
    for name, parameters in world.items():
        schema = get_json_schema(getattr(env, name))["function"]
        assert schema["name"] == name
        assert schema["parameters"]["properties"] == parameters["properties"]
        assert schema["parameters"].get("required", []) == parameters.get("required", [])


def test_grpo_trainer_rewards_are_the_kernels_verdicts(pack, host, tmp_path):
    rows = [r for r in dataset_rows(pack, host=host, repeat=4) if r["task_id"] in TARGET]
    Env = environment_factory(pack, host=host, max_steps=8)
    probe = Env()
    probe.reset(**rows[0])
    tools = [get_json_schema(getattr(probe, t.name)) for t in probe.env.tool_specs]
    corpus = [json.dumps(r["prompt"]) for r in rows] + list(TARGET.values()) + [json.dumps(tools)]
    tokenizer = tiny_tokenizer(corpus, conversations=[(r["prompt"], tools) for r in rows[:2]])
    model = tiny_model(tokenizer)
    losses = warm_start(model, tokenizer, [(r["prompt"], TARGET[r["task_id"]]) for r in rows[:2]], tools,
                        steps=60, lr=1e-2)
    assert losses[-1] < 0.1 < losses[0]

    reward = VerdictReward(pack, host=host)
    args = GRPOConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=4, num_generations=2,
                      max_completion_length=64, max_steps=2, learning_rate=1e-3, logging_steps=1, report_to="none",
                      use_cpu=True, bf16=False, save_strategy="no", beta=0.0, max_tool_calling_iterations=2,
                      shuffle_dataset=False, log_completions=True, num_completions_to_print=0, seed=0,
                      chat_template_kwargs={"enable_thinking": False})
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=reward, args=args,
                          train_dataset=Dataset.from_list(rows), environment_factory=Env)
    seen: dict[str, list] = {"reward": [], "completion": [], "prompt": [], "task_id": [], "seed": [], "split": []}

    class KeepLogs(TrainerCallback):
        """TRL keeps only the last batch's completions table: copy it at every logging step."""

        def on_log(self, args, state, control, **kwargs):
            logs = trainer._logs
            if len(logs["completion"]) and len(seen["completion"]) < 4 * state.global_step:
                seen["reward"] += list(logs["rewards"]["agentsynth_kvpack"])
                seen["completion"] += list(logs["completion"])
                seen["prompt"] += list(logs["prompt"])
                for column in ("task_id", "seed", "split"):
                    seen[column] += list(logs["extra"][column])

    trainer.add_callback(KeepLogs())
    trainer.train()
    assert trainer.state.global_step == 2
    steps = [h for h in trainer.state.log_history if "rewards/agentsynth_kvpack/mean" in h]
    assert len(steps) == 2 and any(h["tools/call_frequency"] > 0 for h in steps)

    # what TRL logged (its completions table, log_completions=True), both steps
    logged, completions, prompts = seen["reward"], seen["completion"], seen["prompt"]
    task_ids, seeds = seen["task_id"], seen["seed"]
    assert len(logged) == len(completions) == len(task_ids) == 8
    assert set(task_ids) == {"set-b", "set-c"} and set(seen["split"]) == {"train"}
    # the kernel re-checks each logged completion in a fresh world (replay, no environments)
    recheck = VerdictReward(pack, host=host)
    assert recheck(prompts=prompts, completions=completions, task_id=task_ids, seed=seeds) == logged
    assert [d["mode"] for d in recheck.last] == ["replay"] * 8
    assert 0.0 in logged and 1.0 in logged
    acted = [r for r, c in zip(logged, completions, strict=True) if any(m.get("tool_calls") for m in c)]
    assert 1.0 in acted  # a reward earned by a tool call that changed the world
    # and the last batch's live verdicts were the trainer's rewards for it
    assert [d["reward"] for d in reward.last] == logged[-4:] and {d["mode"] for d in reward.last} == {"live"}
