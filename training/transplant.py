"""Move a trained checkpoint onto a new tokenizer, keeping its transformer layers.

    python -m training.transplant --init models/spine --out runs/transplant [--seed 9] [--style bare]

Retraining from scratch for a new tokenizer throws away every step the layers took;
here only the (tied) embedding table is rebuilt. Each new token's row is the mean of
the old rows that spell the same text, preferring the old "Ġword" row for a bare word
(with the Qwen2 split a word almost always follows a space, so that row carries what
the model learned about the word). The tokenizer learns from a first draw of the
training conversations exactly as a from-scratch `training.train` run does. The output
is a checkpoint that `training.train --init` continues; it scores poorly until then.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

# GPT-2's byte-to-character table, which ByteLevel pre-tokenizers use for token strings
_BS = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
_CS = _BS + [256 + k for k in range(256 - len(_BS))]
_BYTE_OF = {chr(c): b for b, c in zip(_BS + [b for b in range(256) if b not in _BS], _CS)}


def token_bytes(piece: str) -> bytes | None:
    """The raw bytes a ByteLevel token string stands for (None for added tokens)."""
    try:
        return bytes(_BYTE_OF[ch] for ch in piece)
    except KeyError:
        return None


def source_rows(new_tok, old_tok) -> list[list[int]]:
    """For each new token id, the old token ids whose embeddings make its row."""
    old_vocab = old_tok.get_vocab()
    added = {t.content for t in new_tok.get_added_tokens_decoder().values()}
    rows = []
    for i in range(new_tok.get_vocab_size()):
        piece = new_tok.id_to_token(i)
        if piece in added or (piece in old_vocab and token_bytes(piece) is None):
            rows.append([old_vocab[piece]] if piece in old_vocab else [])
            continue
        spaced = "Ġ" + piece
        if piece.isalpha() and spaced in old_vocab:
            rows.append([old_vocab[spaced]] + ([old_vocab[piece]] if piece in old_vocab else []))
        elif piece in old_vocab:
            rows.append([old_vocab[piece]])
        else:
            raw = token_bytes(piece)
            text = raw.decode("utf-8", errors="ignore") if raw else ""
            rows.append(old_tok.encode(text, add_special_tokens=False).ids if text else [])
    return rows


def transplant(init: Path, new_tok, out: Path) -> dict:
    """Write `init`'s layers with embeddings rebuilt for `new_tok` to `out`; returns counts."""
    import torch
    from tokenizers import Tokenizer
    from transformers import Qwen3ForCausalLM

    from .chat_format import CHAT_TEMPLATE
    from .tokenizer import save_hf
    from .train import save_checkpoint

    old_tok = Tokenizer.from_file(str(init / "tokenizer.json"))
    model = Qwen3ForCausalLM.from_pretrained(str(init), dtype=torch.float32)
    old = model.get_input_embeddings().weight.detach().numpy()
    rows = source_rows(new_tok, old_tok)
    new = np.empty((len(rows), old.shape[1]), np.float32)
    fallback = old.mean(0)
    for i, src in enumerate(rows):
        new[i] = old[src].mean(0) if src else fallback
    model.resize_token_embeddings(len(rows))
    with torch.no_grad():
        model.get_input_embeddings().weight.copy_(torch.from_numpy(new))
    model.tie_weights()
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        piece = old_tok.id_to_token(getattr(model.config, name))
        setattr(model.config, name, new_tok.token_to_id(piece))
    tok_dir = out / "tokenizer"
    save_hf(new_tok, tok_dir, CHAT_TEMPLATE)
    info = save_checkpoint(model, tok_dir, out / "model", lambda rec: None)
    kinds = {"same": 0, "mean": 0, "none": 0}
    for src in rows:
        kinds["none" if not src else "same" if len(src) == 1 else "mean"] += 1
    return {**info, "vocab": len(rows), "rows": kinds}


def main() -> None:
    from . import datagen
    from .plaintext import stdlib_docs
    from .tokenizer import STYLES, corpus, train_tokenizer

    ap = argparse.ArgumentParser(description="move a checkpoint onto a newly trained tokenizer")
    ap.add_argument("--init", type=Path, required=True, help="checkpoint to take the layers from")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=9, help="data draw the tokenizer learns from")
    ap.add_argument("--style", choices=sorted(STYLES), default="bare")
    ap.add_argument("--vocab", type=int, default=6144)
    ap.add_argument("--n-train", type=int, default=40_000, help="conversations drawn for the tokenizer")
    a = ap.parse_args()
    datagen.generate(a.out / "data", a.seed, a.n_train)
    tok = train_tokenizer(corpus(a.out / "data", stdlib_docs()["train"]), a.vocab, a.style)
    info = transplant(a.init, tok, a.out)
    print(json.dumps(info))
    print(f"checkpoint: {a.out / 'model'} (continue it with python -m training.train --init {a.out / 'model'})")


if __name__ == "__main__":
    main()
