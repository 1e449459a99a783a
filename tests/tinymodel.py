"""Build small but complete model directories for engine, CLI and server tests.

A directory holds what a Hugging Face chat checkpoint holds: a random-init
transformers model saved as safetensors, a byte-level BPE tokenizer trained
here on a few sentences, a chat template, and generation_config.json.
"""

from __future__ import annotations

import json
import os

import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

TEMPLATES = os.path.join(os.path.dirname(__file__), "fixtures", "templates")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
            "<tool_response>", "</tool_response>", "<think>", "</think>"]
CORPUS = [
    "Hello! How can I help you today? The weather in Paris is sunny.",
    "Set an alarm for 7:30 tomorrow morning, please.",
    "def add(a, b):\n    return a + b  # numbers, 0123456789",
    '{"name": "get_weather", "arguments": {"city": "Berlin"}}',
    "système, naïve café, 東京, emoji 🌵 and more unicode text.",
]


def train_tokenizer(vocab_size: int = 400) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(CORPUS * 20, trainer)
    return tok


def make_chat_model(path, arch: str = "qwen3", seed: int = 0, max_positions: int = 512, **overrides) -> str:
    """Write a complete random chat model directory at ``path``; return it."""
    os.makedirs(path, exist_ok=True)
    tok = train_tokenizer()
    tok.save(os.path.join(path, "tokenizer.json"))
    eos = tok.token_to_id("<|im_end|>")
    with open(os.path.join(TEMPLATES, "qwen3_style.jinja"), encoding="utf-8") as f:
        template = f.read()
    with open(os.path.join(path, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|im_end|>",
                   "pad_token": "<|endoftext|>", "bos_token": None, "chat_template": template,
                   "model_max_length": max_positions}, f)
    with open(os.path.join(path, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": [eos, tok.token_to_id("<|endoftext|>")]}, f)
    torch.manual_seed(seed)
    kwargs = dict(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128,
                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                  max_position_embeddings=max_positions, tie_word_embeddings=True,
                  eos_token_id=eos)
    kwargs.update(overrides)
    if arch == "qwen3":
        model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**kwargs))
    elif arch == "llama":
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**kwargs))
    else:
        raise ValueError(arch)
    model.eval().save_pretrained(path, safe_serialization=True)
    return str(path)


def edited_copy(src, dst, edit) -> str:
    """Copy checkpoint ``src`` to ``dst`` and let ``edit(tensors)`` change its weights in place
    (a missing tensor, a duplicated one...): the broken checkpoints of the bad-input tests."""
    import shutil

    from safetensors.numpy import load_file, save_file

    shutil.copytree(src, dst)
    path = os.path.join(dst, "model.safetensors")
    tensors = load_file(path)
    edit(tensors)
    save_file(tensors, path)
    return str(dst)
