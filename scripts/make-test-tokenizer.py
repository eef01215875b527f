#!/usr/bin/env python3
"""Writes tests/data/tokenizer.json: a small byte-level BPE tokenizer for the token-aware length
tests (issue 18 item 3), trained offline with Hugging Face's `tokenizers` (pip install
tokenizers; 0.23.3 made the committed files). Beside it, tests/data/tokenizer-greek.json: one
trained as ../shared/real-targets/make_tiny_model.py trains the tiny vLLM model's, on Greek
letter names alone, so that no common English word is one token in it. Byte-level BPE is the scheme of GPT-2, Llama 3 and
Qwen tokenizers; this one asks for 600 tokens and learns 561 from the sentences below, so common
English words are single tokens and rarer ones split, as with a real model's tokenizer.

It also prints, for the tests to compare with, the token counts Python's implementation gives
for a few texts (tests/repo/record.rs cites them).

Usage: python3 scripts/make-test-tokenizer.py [OUT]
"""
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/data/tokenizer.json"
GREEK_OUT = OUT.replace("tokenizer.json", "tokenizer-greek.json")
GREEK = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega"

# A small corpus in the project's own words: what a load test does and why.
SENTENCES = [
    "the recorder sends every request at its own time and never waits for an answer",
    "a request that has no answer by the timeout is censored and stays on the curve",
    "the time to first token is read from the intended send time of the request",
    "when one of the two replicas is lost the survivor carries all of the load",
    "the report says what the data support and refuses what they do not",
    "an error is a competing event and it takes probability away for good",
    "we measure how long the service takes to come back after the fault is removed",
    "there is more to a tail than one number and the interval says how sure we are",
    "this is the way a test should be run if its numbers are to be trusted",
    "they would have seen the queue grow if the client had kept its schedule",
    "she said that the run was valid and he asked which gates it had passed",
    "people who read the report can check each number from the journal itself",
]


def train(corpus, vocab_size, out):
    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<|begin|>", "<|end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus, trainer)
    tokenizer.save(out, pretty=False)
    return tokenizer


def main() -> None:
    train([GREEK] * 50, 512, GREEK_OUT)
    tokenizer = train(SENTENCES * 20, 600, OUT)
    for text in ["request 17 of percentes.", " the of and to in is", "unanticipated"]:
        print(f"{len(tokenizer.encode(text).ids)} tokens: {text!r}")


if __name__ == "__main__":
    main()
