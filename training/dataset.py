"""Tokenize conversations and plain text into (ids, trained-mask) rows, and batch them.

Only assistant-written text is trained in conversations (mask from the renderer's
segments, per part or through token offsets); plain text is trained everywhere. With
tags, a conversation row also carries value_tags' label per token (-1: none).
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
from .value_tags import cut_tags, segment_tags, token_tags


def _conv_text(c: dict, tags: bool = False) -> tuple[str, list[tuple[int, int]], list]:
    """The whole rendered text, its trained character spans and (with tags) its tagged turns."""
    text, spans, tagged, pos = [], [], [], 0
    segs = render_segments(c["messages"], c["tools"] or None)
    for (piece, trained), tag in zip(segs, segment_tags([t for t, _ in segs], c) if tags else [None] * len(segs)):
        if trained:
            spans.append((pos, pos + len(piece)))
        if tag is not None:
            lo, hi, vals = tag
            tagged.append((lo + pos, hi + pos, [(a + pos, b + pos, k) for a, b, k in vals]))
        text.append(piece)
        pos += len(piece)
    return "".join(text), spans, tagged


# Where a text can be cut without changing its tokens: after a newline run that a non-space
# follows. Every alternative of the pre-tokenizer's regex (tokenizer.STYLES) ends a match at
# the last newline of a run, and BPE never merges across pre-tokens, so the tokens of the
# parts are the tokens of the whole. Added tokens (<|im_end|>, <tool_call>...) are cut points
# of their own: the tokenizer splits them out before anything else.
_CUT = re.compile(r"(?<=\n)(?=\S)")


def _pieces(c: dict, added: tuple[str, ...], tags: bool = False) -> list[tuple] | None:
    """The rendered conversation as (piece, trained, tag) parts cut where tokens cannot
    straddle, or None where two segments meet at a point that is not such a cut (then the
    whole text is encoded at once). tag is the part's value_tags (lo, hi, spans) or None."""
    segs = [(t, tr) for t, tr in render_segments(c["messages"], c["tools"] or None) if t]
    for (a, _), (b, _) in zip(segs, segs[1:]):
        if not ((a.endswith("\n") and not b[0].isspace()) or a.endswith(added) or b.startswith(added)):
            return None
    seg_tags = segment_tags([t for t, _ in segs], c) if tags else [None] * len(segs)
    out = []
    for (t, tr), tag in zip(segs, seg_tags):
        pos = 0
        for piece in _CUT.split(t):
            out.append((piece, tr, cut_tags(tag, pos, pos + len(piece))))
            pos += len(piece)
    return out


def _pieces_line(job: tuple[str, tuple[str, ...], bool]) -> list[tuple] | tuple:
    c = json.loads(job[0])
    return _pieces(c, job[1], job[2]) or _conv_text(c, job[2])


def _starts(enc) -> np.ndarray:
    return np.fromiter((o[0] for o in enc.offsets), dtype=np.int64, count=len(enc.ids))


def _row(enc, text: str, spans: list[tuple[int, int]], tagged: list | None = None) -> tuple:
    """(ids, mask[, tags]) of a whole text's encoding: a token is trained if it starts inside a span."""
    charmask = np.zeros(len(text) + 1, dtype=bool)
    for a, b in spans:
        charmask[a:b] = True
    starts = _starts(enc)
    row = (np.asarray(enc.ids, dtype=np.int32), charmask[starts])
    if tagged is None:
        return row
    tags = np.full(len(starts), -1, dtype=np.int8)
    for tag in tagged:
        t = token_tags(starts, tag)
        tags = np.where(t >= 0, t, tags)
    return (*row, tags)


def _joined(pieces: list[tuple], ids: list[np.ndarray], starts: list | None = None) -> tuple:
    """(ids, mask[, tags]) of a conversation from its parts' ids: a part's tokens share its
    trained flag; with the parts' token starts, each tagged part's labels too."""
    flags = np.fromiter((p[1] for p in pieces), dtype=bool, count=len(pieces))
    row = (np.concatenate(ids), np.repeat(flags, [len(x) for x in ids]))
    if starts is None:
        return row
    return (*row, np.concatenate([token_tags(s, p[2]) for p, s in zip(pieces, starts)]))


def _cuts_hold(tok, lines: list[str], rendered: list, tags: bool = False) -> bool:
    """Whether encoding by parts gives the whole text's tokens, mask and tags on these conversations."""
    for line, c in zip(lines, rendered):
        if isinstance(c, list):
            text, spans, tagged = _conv_text(json.loads(line), tags)
            want = _row(tok.encode(text, add_special_tokens=False), text, spans, tagged if tags else None)
            encs = [tok.encode(p[0], add_special_tokens=False) for p in c]
            got = _joined(c, [np.asarray(e.ids, dtype=np.int32) for e in encs],
                          [_starts(e) for e in encs] if tags else None)
            if not all(np.array_equal(g, w) for g, w in zip(got, want)):
                return False
    return True


def encode_conversations(tok, path: Path, max_len: int, chunk: int = 4096, tags: bool = False) -> tuple[list, int]:
    """Rows (ids int32, mask bool[, tags int8]) from a jsonl file; returns (rows, number dropped
    as too long). With tags, each row also holds value_tags' label per token.

    Most of a conversation's tokens are its tool schemas and the fixed prompt text, which
    recur across conversations, so each conversation is cut into parts at points where the
    tokens of the parts are those of the whole (_CUT), and a part seen twice is encoded once."""
    rows, dropped = [], 0
    with open(path) as f:
        lines = f.readlines()
    added = tuple(t.content for t in tok.get_added_tokens_decoder().values())
    # rendering is pure Python: spread it over the cores (tokenizers already threads the encoding)
    with multiprocessing.get_context("fork").Pool(os.cpu_count() or 1) as pool:
        rendered = pool.map(_pieces_line, [(line, added, tags) for line in lines], chunksize=512)
    if not _cuts_hold(tok, lines[:64], rendered[:64], tags):  # a tokenizer whose pre-tokenizer cuts elsewhere
        rendered = [_conv_text(json.loads(line), tags) for line in lines]
    cache: dict[str, tuple] = {}  # part -> (ids, token starts)
    for i in range(0, len(lines), chunk):
        convs = rendered[i:i + chunk]
        counts = Counter(p[0] for c in convs if isinstance(c, list) for p in c)
        new = [p for p in counts if p not in cache]
        fresh = dict(zip(new, ((np.asarray(e.ids, dtype=np.int32), _starts(e) if tags else None)
                               for e in tok.encode_batch(new, add_special_tokens=False))))
        for p in new:  # keep what recurs; one-off parts (most user turns) are dropped after this chunk
            if counts[p] > 1:
                cache[p] = fresh[p]
        whole = [c for c in convs if not isinstance(c, list)]
        whole_encs = iter(tok.encode_batch([t[0] for t in whole], add_special_tokens=False))
        for c in convs:
            if isinstance(c, list):
                encs = [cache[p[0]] if p[0] in cache else fresh[p[0]] for p in c]
                row = _joined(c, [e[0] for e in encs], [e[1] for e in encs] if tags else None)
            else:
                row = _row(next(whole_encs), c[0], c[1], c[2] if tags else None)
            if len(row[0]) > max_len:
                dropped += 1
                continue
            rows.append(row)
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
                 pool: int = 2048) -> list[tuple[np.ndarray, ...]]:
    """One epoch of right-padded batches of similar length, each at most token_budget tokens.

    Right padding needs no attention mask under a causal model: real tokens never see pads.
    Labels are next tokens where the target token is trained, else -100. Rows with tags
    (value_tags) give (ids, labels, tags) batches, tags -100 where a token has none.
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
    tagged = any(len(r) == 3 for r in rows[:1])  # conversation rows come first
    out = []
    for b in (batches[i] for i in rng.permutation(len(batches))):
        T = max(len(rows[i][0]) for i in b)
        ids = np.full((len(b), T), pad_id, dtype=np.int64)
        labels = np.full((len(b), T), -100, dtype=np.int64)
        tags = np.full((len(b), T), -100, dtype=np.int64) if tagged else None
        for r, i in enumerate(b):
            x, m = rows[i][:2]
            ids[r, :len(x)] = x
            tgt = np.where(m[1:], x[1:], -100)
            labels[r, :len(x) - 1] = tgt
            if tagged and len(rows[i]) == 3:  # plain-text rows have no tags
                tags[r, :len(x)] = np.where(rows[i][2] >= 0, rows[i][2], -100)
        out.append((ids, labels, tags) if tagged else (ids, labels))
    return out
