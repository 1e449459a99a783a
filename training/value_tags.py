"""Value tags: an auxiliary training signal that marks where free-text values lie in a request.

Every miss that session 24 could still see was a value's edge in an unseen sentence: the
model copies well, but does not know where the value starts or stops ("Poke my coach
over text" gives the recipient "Poke"). The language-model loss teaches that only through
the copy in the assistant turn, one token at a time. Here each token of a request whose
call is known gets a label of its own: outside any value, or the first or a later token
of a value of argument NAME (B/I tagging, as in slot filling). A small head reads those
labels off an inner block's hidden states and is thrown away at the end, so the saved
checkpoint is the same stock Qwen3 model with the same keys.

Only requests whose free-text values can all be found word for word are tagged (times,
numbers, enums and booleans are written differently in the call, and count as outside).
A causal state cannot see what follows its token, so besides its own token's label each
position also predicts the labels of the one and two tokens before it (OFFSETS): that
is where "Poke" is told apart from a name, once "my coach" has been read.
"""
from __future__ import annotations

import re

import numpy as np

from .tools import TOOLS

# Free-text arguments: strings (or arrays of strings) without an enum and not a clock time.
FREE = sorted({name for t in TOOLS.values() for name, p in t["function"]["parameters"]["properties"].items()
               if (p["type"] == "string" and "enum" not in p and "HH:MM" not in p["description"])
               or (p["type"] == "array" and p["items"]["type"] == "string")})
CLASS = {name: 1 + 2 * i for i, name in enumerate(FREE)}  # B of NAME; I is B + 1; 0 is outside
N_CLASSES = 1 + 2 * len(FREE)
OFFSETS = (0, 1, 2)
USER_OPEN = "<|im_start|>user\n"


def _find(content: str, value: str) -> tuple[int, int] | None:
    """First case-insensitive occurrence of value in content on word boundaries."""
    low = content.lower()
    for m in re.finditer(re.escape(value.lower()), low):
        a, b = m.span()
        if (a == 0 or not low[a - 1].isalnum()) and (b == len(low) or not low[b].isalnum()):
            return a, b
    return None


def request_spans(c: dict) -> dict[int, list[tuple[int, int, int]]]:
    """Per user message index, the (start, end, B class) character spans of its call's free-text
    values in its content. Messages without a call, or with a value not said word for word,
    are left out (not tagged at all)."""
    msgs, out = c["messages"], {}
    for i, m in enumerate(msgs[:-1]):
        nxt = msgs[i + 1]
        if m["role"] != "user" or nxt["role"] != "assistant" or not nxt.get("tool_calls"):
            continue
        spans, ok = [], True
        for tc in nxt["tool_calls"]:
            args = tc.get("function", tc)["arguments"]
            for name, v in (args.items() if isinstance(args, dict) else ()):
                if name not in CLASS:
                    continue
                for value in (v if isinstance(v, list) else [v]):
                    where = _find(m["content"], value) if isinstance(value, str) and value.strip() else None
                    if where is None:
                        ok = False
                        break
                    spans.append((*where, CLASS[name]))
        spans.sort()
        if ok and all(a[1] <= b[0] for a, b in zip(spans, spans[1:])):  # overlapping values: ambiguous
            out[i] = spans
    return out


def segment_tags(segments: list[str], c: dict) -> list[tuple[int, int, list] | None]:
    """For each rendered segment, (lo, hi, spans) in its own characters where it is a tagged
    user turn, else None. Segments are matched to user messages in order."""
    spans = request_spans(c)
    users = [(i, m["content"]) for i, m in enumerate(c["messages"]) if m["role"] == "user"]
    out, u = [], 0
    for seg in segments:
        tag = None
        if u < len(users) and seg == f"{USER_OPEN}{users[u][1]}<|im_end|>\n":
            i, content = users[u]
            u += 1
            if i in spans:
                lo = len(USER_OPEN)
                tag = (lo, lo + len(content), [(a + lo, b + lo, k) for a, b, k in spans[i]])
        out.append(tag)
    return out


def cut_tags(tag: tuple | None, start: int, end: int) -> tuple | None:
    """The part of a segment's (lo, hi, spans) inside [start, end), shifted to start there."""
    if tag is None or tag[1] <= start or tag[0] >= end:
        return None
    lo, hi, spans = tag
    return (max(lo, start) - start, min(hi, end) - start,
            [(a - start, b - start, k) for a, b, k in spans if b > start and a < end])


def token_tags(starts: np.ndarray, tag: tuple | None) -> np.ndarray:
    """int8 label per token (-1: not tagged) from the tokens' start offsets and (lo, hi, spans)."""
    out = np.full(len(starts), -1, dtype=np.int8)
    if tag is None:
        return out
    lo, hi, spans = tag
    out[(starts >= lo) & (starts < hi)] = 0
    for a, b, k in spans:
        inside = np.flatnonzero((starts >= a) & (starts < b))
        if len(inside):
            out[inside] = k + 1
            out[inside[0]] = k
    return out


def make_head(hidden: int):
    """LayerNorm + one linear map to the labels of every offset (inner states are not normed)."""
    import torch.nn as nn

    return nn.Sequential(nn.LayerNorm(hidden), nn.Linear(hidden, N_CLASSES * len(OFFSETS)))


def tag_loss(head, h, tags):
    """Mean cross-entropy of the head's labels: the state at t predicts the tags of t - k."""
    import torch.nn.functional as F

    B, T, D = h.shape
    logits = head(h).float().view(B, T, len(OFFSETS), N_CLASSES)
    total, count = logits.new_zeros(()), 0
    for j, k in enumerate(OFFSETS):
        want = tags[:, :T - k]
        n = int((want != -100).sum())
        if n:
            total = total + F.cross_entropy(logits[:, k:, j].reshape(-1, N_CLASSES), want.reshape(-1),
                                            ignore_index=-100, reduction="sum")
            count += n
    return total / max(count, 1)
