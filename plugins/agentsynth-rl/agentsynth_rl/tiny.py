"""A tiny randomly initialised Qwen3 model and a tokenizer built here, offline (no hub).

The tokenizer is a byte-level BPE trained on the pack's own prompts and tool calls, with the
special tokens of Qwen3's chat template (TRL's copy, which its tool-call parser recognises). The
model can be warm-started with a few dozen supervised steps on target completions, so sampling
from it yields real tool calls, some right and some wrong: rewards that are not all equal.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>", "</think>",
           "<tool_response>", "</tool_response>"]


def tiny_tokenizer(corpus: list[str], vocab_size: int = 2000, conversations: list[tuple[list[dict], list[dict]]] = ()) -> Any:
    """A BPE tokenizer trained on ``corpus``; with ``conversations`` ((messages, tools) pairs) it is
    trained a second time on their rendered chat-template text too, so the long repeated prompt
    (tool schemas, system prompt) becomes a few dozen tokens and the tests stay fast on a CPU."""
    first = _train(corpus, vocab_size)
    if not conversations:
        return first
    rendered = [first.apply_chat_template(m, tools=t, tokenize=False, add_generation_prompt=True, enable_thinking=False)
                for m, t in conversations]
    return _train(list(corpus) + rendered * 4, vocab_size)


def _train(corpus: list[str], vocab_size: int) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   bos_token=None, unk_token=None)
    fast.chat_template = (resources.files("trl") / "chat_templates" / "qwen3.jinja").read_text()
    return fast


def tiny_model(tokenizer: Any, seed: int = 0) -> Any:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=2048,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=None, tie_word_embeddings=True)
    return Qwen3ForCausalLM(config)


def warm_start(model: Any, tokenizer: Any, examples: list[tuple[list[dict], str]], tools: list[dict],
               steps: int = 60, lr: float = 3e-3) -> list[float]:
    """A few supervised steps on (prompt messages, completion text) pairs, loss on the completion
    only; returns the losses (the caller can assert it learned)."""
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    rows = []
    for messages, completion in examples:
        prompt = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True,
                                               enable_thinking=False)
        p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        c_ids = tokenizer(completion, add_special_tokens=False)["input_ids"]
        rows.append((p_ids + c_ids, [-100] * len(p_ids) + c_ids))
    width = max(len(ids) for ids, _ in rows)
    pad = tokenizer.pad_token_id
    ids = torch.tensor([i + [pad] * (width - len(i)) for i, _ in rows])
    labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in rows])
    mask = torch.tensor([[1] * len(i) + [0] * (width - len(i)) for i, _ in rows])
    losses = []
    model.train()
    for _ in range(steps):  # the whole (small) set is one batch
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
    return losses
