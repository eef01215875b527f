#!/usr/bin/env python3
"""A reasoning variant of shared/real-targets' tiny random-weight Llama, for testing percentes'
stream readings (SPEC §3 "What a stream's figures are about") against a real vLLM reasoning
parser. Run with the venv of shared/real-targets/vllm-cpu.sh:

    /var/tmp/percentes-vllm-venv/bin/python scripts/make-reasoning-model.py \\
        /var/tmp/percentes-tiny-llama /var/tmp/percentes-tiny-llama-think

What it makes, and why: vLLM's `deepseek_r1` reasoning parser needs `<think>` and `</think>` to be
single tokens, and reads everything before `</think>` as reasoning. The model gets both tokens,
and a chat template that opens the think block in the generation prompt (as DeepSeek-R1's does),
so every answer starts reasoning. A random-weight model would almost never close the block, so
the `</think>` row of the (untied) output layer is set along the mean direction of the model's
final hidden states, scaled until, sampled at temperature 1, the block closes after about
TARGET_TOKENS tokens on average (measured here with transformers and printed). The model's other
weights are unchanged. Nothing here is a serving claim: it makes a real engine emit a real
reasoning stream whose phases the recorder must tell apart.
"""

import os
import shutil
import sys

import torch
from transformers import AutoTokenizer, LlamaForCausalLM

# The mean position of the first </think> under transformers' sampling; vLLM's own sampling of
# the bfloat16 weights closes the block later (measured: about twice as late), so the target
# here is lower than the reasoning phase wanted.
TARGET_TOKENS = 6
SAMPLES = 48
LENGTH = 64


def first_close(model, tok, prompts, close_id):
    """Mean position of the first </think> over sampled continuations (LENGTH if none)."""
    positions = []
    for text in prompts:
        ids = tok(text, return_tensors="pt").input_ids
        with torch.no_grad():
            out = model.generate(ids, do_sample=True, temperature=1.0, max_new_tokens=LENGTH,
                                 pad_token_id=tok.eos_token_id)
        new = out[0, ids.shape[1]:].tolist()
        positions.append(new.index(close_id) + 1 if close_id in new else LENGTH)
    return sum(positions) / len(positions)


def main(source, target):
    if os.path.exists(target):
        shutil.rmtree(target)
    tok = AutoTokenizer.from_pretrained(source)
    tok.add_special_tokens({"additional_special_tokens": ["<think>", "</think>"]})
    tok.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant: <think>"
    )
    model = LlamaForCausalLM.from_pretrained(source, torch_dtype=torch.float32)
    model.resize_token_embeddings(len(tok))
    # An output layer of its own, so the </think> row can change without changing its input.
    model.config.tie_word_embeddings = False
    head = torch.nn.Linear(model.config.hidden_size, len(tok), bias=False)
    head.weight.data = model.get_input_embeddings().weight.data.clone()
    model.lm_head = head
    close_id = tok.convert_tokens_to_ids("</think>")
    torch.manual_seed(1)
    prompts = [
        tok.apply_chat_template([{"role": "user", "content": "request %d of percentes. alpha beta" % i}],
                                tokenize=False)
        for i in range(SAMPLES)
    ]
    # The mean direction of the final hidden states over the prompts' positions.
    states = []
    for text in prompts[:8]:
        ids = tok(text, return_tensors="pt").input_ids
        with torch.no_grad():
            hidden = model.model(ids).last_hidden_state[0]
        states.append(hidden)
    direction = torch.cat(states).mean(0)
    direction = direction / direction.norm()
    low, high = 0.0, 64.0
    for _ in range(12):
        scale = (low + high) / 2
        model.lm_head.weight.data[close_id] = direction * scale
        mean = first_close(model, tok, prompts, close_id)
        print("scale %.3f: first </think> at token %.1f on average" % (scale, mean))
        if mean > TARGET_TOKENS:
            low = scale
        else:
            high = scale
    model.lm_head.weight.data[close_id] = direction * high
    model = model.to(torch.bfloat16)
    model.save_pretrained(target)
    tok.save_pretrained(target)
    print("ok", target, len(tok), "close id", close_id, "scale %.3f" % high)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1], sys.argv[2])
