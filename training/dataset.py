"""Tokenize conversations and plain text into (ids, trained-mask) rows, and batch them.

Only assistant-written text is trained in conversations (mask from the renderer's
segments, per part or through token offsets); plain text is trained everywhere.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import re
from collections import Counter
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


# Where a text can be cut without changing its tokens: after a newline run that a non-space
# follows. Every alternative of the pre-tokenizer's regex (tokenizer.STYLES) ends a match at
# the last newline of a run, and BPE never merges across pre-tokens, so the tokens of the
# parts are the tokens of the whole. Added tokens (<|im_end|>, <tool_call>...) are cut points
# of their own: the tokenizer splits them out before anything else.
_CUT = re.compile(r"(?<=\n)(?=\S)")


def _pieces(c: dict, added: tuple[str, ...]) -> list[tuple[str, bool]] | None:
    """The rendered conversation as (piece, trained) parts cut where tokens cannot straddle,
    or None where two segments meet at a point that is not such a cut (then the whole
    text is encoded at once)."""
    segs = [(t, tr) for t, tr in render_segments(c["messages"], c["tools"] or None) if t]
    for (a, _), (b, _) in zip(segs, segs[1:]):
        if not ((a.endswith("\n") and not b[0].isspace()) or a.endswith(added) or b.startswith(added)):
            return None
    return [(piece, tr) for t, tr in segs for piece in _CUT.split(t)]


def _pieces_line(job: tuple[str, tuple[str, ...]]) -> list[tuple[str, bool]] | tuple[str, list]:
    c = json.loads(job[0])
    return _pieces(c, job[1]) or _conv_text(c)


def _row(enc, text: str, spans: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """(ids, mask) of a whole text's encoding: a token is trained if it starts inside a span."""
    charmask = np.zeros(len(text) + 1, dtype=bool)
    for a, b in spans:
        charmask[a:b] = True
    starts = np.fromiter((o[0] for o in enc.offsets), dtype=np.int64, count=len(enc.ids))
    return np.asarray(enc.ids, dtype=np.int32), charmask[starts]


def _joined(pieces: list[tuple[str, bool]], ids: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(ids, mask) of a conversation from its parts' ids: a part's tokens share its trained flag."""
    flags = np.fromiter((tr for _, tr in pieces), dtype=bool, count=len(pieces))
    return np.concatenate(ids), np.repeat(flags, [len(x) for x in ids])


def _cuts_hold(tok, lines: list[str], rendered: list) -> bool:
    """Whether encoding by parts gives the whole text's tokens and mask on these conversations."""
    for line, c in zip(lines, rendered):
        if isinstance(c, list):
            text, spans = _conv_text(json.loads(line))
            ids, mask = _row(tok.encode(text, add_special_tokens=False), text, spans)
            got = _joined(c, [np.asarray(tok.encode(p, add_special_tokens=False).ids, dtype=np.int32) for p, _ in c])
            if not (np.array_equal(got[0], ids) and np.array_equal(got[1], mask)):
                return False
    return True


def encode_conversations(tok, path: Path, max_len: int, chunk: int = 4096) -> tuple[list, int]:
    """Rows (ids int32, mask bool) from a jsonl file; returns (rows, number dropped as too long).

    Most of a conversation's tokens are its tool schemas and the fixed prompt text, which
    recur across conversations, so each conversation is cut into parts at points where the
    tokens of the parts are those of the whole (_CUT), and a part seen twice is encoded once."""
    rows, dropped = [], 0
    with open(path) as f:
        lines = f.readlines()
    added = tuple(t.content for t in tok.get_added_tokens_decoder().values())
    # rendering is pure Python: spread it over the cores (tokenizers already threads the encoding)
    with multiprocessing.get_context("fork").Pool(os.cpu_count() or 1) as pool:
        rendered = pool.map(_pieces_line, [(line, added) for line in lines], chunksize=512)
    if not _cuts_hold(tok, lines[:64], rendered[:64]):  # a tokenizer whose pre-tokenizer cuts elsewhere
        rendered = [_conv_text(json.loads(line)) for line in lines]
    cache: dict[str, np.ndarray] = {}
    for i in range(0, len(lines), chunk):
        convs = rendered[i:i + chunk]
        counts = Counter(p for c in convs if isinstance(c, list) for p, _ in c)
        new = [p for p in counts if p not in cache]
        fresh = dict(zip(new, (np.asarray(e.ids, dtype=np.int32)
                               for e in tok.encode_batch(new, add_special_tokens=False))))
        for p in new:  # keep what recurs; one-off parts (most user turns) are dropped after this chunk
            if counts[p] > 1:
                cache[p] = fresh[p]
        whole = [c for c in convs if not isinstance(c, list)]
        whole_encs = iter(tok.encode_batch([t for t, _ in whole], add_special_tokens=False))
        for c in convs:
            if isinstance(c, list):
                ids, mask = _joined(c, [cache[p] if p in cache else fresh[p] for p, _ in c])
            else:
                ids, mask = _row(next(whole_encs), *c)
            if len(ids) > max_len:
                dropped += 1
                continue
            rows.append((ids, mask))
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
