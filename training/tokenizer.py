"""Train the byte-level BPE tokenizer and write the Hugging Face tokenizer files.

    python -m training.tokenizer --data DIR --out DIR [--vocab 6144]

Digits are split one by one (as Qwen does) so times and arithmetic tokenize regularly.
Chat tokens are special; tool and think tags are added tokens that are *not* special,
so decoding with skip_special_tokens keeps them, as in Qwen3.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TAGS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
# Qwen2-style pre-tokenizer split: words with a leading space/punct, single digits, punctuation runs, newlines.
PRETOKENIZE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# Bare words: no space or quote is ever part of a word's tokens. With the Qwen2 split a
# copied value's first word is spelled differently in the request ("Ġtips") and in the
# call's JSON string ('Ġ"' then "ti", "p", "s"), so every copy starts by re-spelling it,
# and that is where the shipped model's copies break. Here both are "tips"; the price
# is a token for each space.
PRETOKENIZE_BARE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|\p{L}+|\p{N}|[^\s\p{L}\p{N}]+[\r\n]*"
                    r"|\s*[\r\n]+|\s+(?!\S)|\s+")
STYLES = {"qwen": PRETOKENIZE, "bare": PRETOKENIZE_BARE}


def train_tokenizer(texts, vocab_size: int = 6144, style: str = "qwen"):
    """A tokenizers.Tokenizer trained on an iterator of strings; ids 0..8 are the chat/tool tokens.

    style: "qwen" (the shipped model's) or "bare" (words never carry a leading space)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(STYLES[style]), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL + TAGS, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    # Tags keep their ids but stop being "special": visible after decode(skip_special_tokens=True).
    spec = json.loads(tok.to_str())
    for t in spec["added_tokens"]:
        t["special"] = t["content"] in SPECIAL
    return Tokenizer.from_str(json.dumps(spec))


def save_hf(tok, out: Path, chat_template: str, model_max_length: int = 2048) -> None:
    """Write tokenizer.json + tokenizer_config.json (with the chat template) under `out`."""
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                 unk_token=None, bos_token=None, model_max_length=model_max_length,
                                 clean_up_tokenization_spaces=False)
    hf.chat_template = chat_template
    hf.padding_side = "left"  # generation batches; training pads by hand
    hf.save_pretrained(str(out))
    # keep the template inside tokenizer_config.json (newer transformers may write chat_template.jinja)
    cfg_path = out / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["chat_template"] = chat_template
    cfg_path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")
    (out / "chat_template.jinja").unlink(missing_ok=True)


def corpus(data: Path, docs: list[str], limit: int = 40_000):
    """Rendered training conversations plus plain text, the tokenizer's training input."""
    from .chat_format import render

    with open(data / "train.jsonl") as f:
        for i, line in enumerate(f):
            if i >= limit:
                break
            c = json.loads(line)
            yield render(c["messages"], c["tools"])
    yield from docs


def main() -> None:
    from .chat_format import CHAT_TEMPLATE
    from .plaintext import stdlib_docs

    ap = argparse.ArgumentParser(description="train the BPE tokenizer")
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--vocab", type=int, default=6144)
    ap.add_argument("--style", choices=sorted(STYLES), default="qwen", help="pre-tokenizer split (see STYLES)")
    a = ap.parse_args()
    tok = train_tokenizer(corpus(a.data, stdlib_docs()["train"]), a.vocab, a.style)
    save_hf(tok, a.out, CHAT_TEMPLATE)
    print(f"vocab {tok.get_vocab_size()} -> {a.out}")


if __name__ == "__main__":
    main()
