"""Tokenize conversations and plain text into (ids, trained-mask) rows, and batch them.

Only assistant-written text is trained in conversations (mask from the renderer's
segments mapped through token offsets); plain text is trained everywhere.
"""
from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import numpy as np

from .chat_format import render_segments


def _conv_text(c: dict) -> tuple[str, list[tuple[int, int]]]:
    text, spans, pos = [], [], 0
    for piece, trained in render_segments(c["messages"], c["tools"] or None):
        if trained:
            spans.append((pos, pos + len(piece)))
        text.append(piece)
        pos += len(piece)
    return "".join(text), spans


def _render_line(line: str) -> tuple[str, list[tuple[int, int]]]:
    return _conv_text(json.loads(line))


def encode_conversations(tok, path: Path, max_len: int, chunk: int = 4096) -> tuple[list, int]:
    """Rows (ids int32, mask bool) from a jsonl file; returns (rows, number dropped as too long)."""
    rows, dropped = [], 0
    with open(path) as f:
        lines = f.readlines()
    # rendering is pure Python: spread it over the cores (tokenizers already threads the encoding)
    with multiprocessing.get_context("fork").Pool(os.cpu_count() or 1) as pool:
        rendered = pool.map(_render_line, lines, chunksize=512)
    for i in range(0, len(lines), chunk):
        convs = rendered[i:i + chunk]
        encs = tok.encode_batch([t for t, _ in convs], add_special_tokens=False)
        for (text, spans), enc in zip(convs, encs):
            if len(enc.ids) > max_len:
                dropped += 1
                continue
            charmask = np.zeros(len(text) + 1, dtype=bool)
            for a, b in spans:
                charmask[a:b] = True
            starts = np.fromiter((o[0] for o in enc.offsets), dtype=np.int64, count=len(enc.ids))
            rows.append((np.asarray(enc.ids, dtype=np.int32), charmask[starts]))
    return rows, dropped


def encode_plain(tok, docs: list[str], max_len: int) -> list:
    """Plain documents, each ending in <|endoftext|>, cut into rows of at most max_len tokens."""
    eot = tok.token_to_id("<|endoftext|>")
    rows = []
    for enc in tok.encode_batch(docs, add_special_tokens=False):
        ids = np.asarray(enc.ids + [eot], dtype=np.int32)
        for s in range(0, len(ids), max_len):
            piece = ids[s:s + max_len]
            if len(piece) > 8:
                rows.append((piece, np.ones(len(piece), dtype=bool)))
    return rows


def make_batches(rows: list, token_budget: int, rng: np.random.Generator, pad_id: int,
                 pool: int = 2048) -> list[tuple[np.ndarray, np.ndarray]]:
    """One epoch of right-padded batches of similar length, each at most token_budget tokens.

    Right padding needs no attention mask under a causal model: real tokens never see pads.
    Labels are next tokens where the target token is trained, else -100.
    """
    order = rng.permutation(len(rows))
    batches = []
    for p in range(0, len(order), pool):
        chunk = sorted(order[p:p + pool], key=lambda i: len(rows[i][0]))
        cur: list[int] = []
        for i in chunk:
            n = len(rows[i][0])
            if cur and (len(cur) + 1) * max(n, len(rows[cur[-1]][0])) > token_budget:
                batches.append(cur)
                cur = []
            cur.append(i)
        if cur:
            batches.append(cur)
    out = []
    for b in (batches[i] for i in rng.permutation(len(batches))):
        T = max(len(rows[i][0]) for i in b)
        ids = np.full((len(b), T), pad_id, dtype=np.int64)
        labels = np.full((len(b), T), -100, dtype=np.int64)
        for r, i in enumerate(b):
            x, m = rows[i]
            ids[r, :len(x)] = x
            tgt = np.where(m[1:], x[1:], -100)
            labels[r, :len(x) - 1] = tgt
        out.append((ids, labels))
    return out
