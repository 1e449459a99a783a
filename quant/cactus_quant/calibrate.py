"""Activation statistics without a dataset: Hessians from text the model writes itself.

CQ4's error feedback (feedback.py) needs, for every linear layer, the second
moment ``H = X^T X / tokens`` of its inputs.  A causal LM can supply its own
inputs: it samples plain text from its start token and chats (its own text as a
user turn, then its own reply: a chat model's control tokens carry activations
plain text never produces), then reads them back while every named linear layer
adds ``x^T x`` to its tensor's Hessian.  Accumulating ``H`` instead of keeping the
rows bounds memory by the layer widths (``in^2`` per tensor), not by the number
of tokens, so many more tokens fit than a row cap would allow; the measured gain
from 2K to 16K self-written tokens is in docs/quantization.md.

All texts are written in lockstep, one batch through the model per token (every
plain text starts from the same token, every chat user turn has the same
length), and read back in batches: one Python pass per position instead of per
token per text (measured in docs/quantization.md).  A chat's user turn is written
in the chat template's user slot, so it reads like a user's message to this model.
Sampling is seeded, so a conversion is deterministic; another
``seed`` is another calibration draw.  An encoder cannot write its own text:
:func:`self_hessians` returns None and the caller stays data-free.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from cactus_core.errors import QuantizationError
from cactus_core.graph import Ops

#: Self-written texts and their length in tokens: 128 x 128 (~16K tokens) measured
#: best on the default model among 16, 32, 64 and 128 samples (docs/quantization.md).
DEFAULT_SAMPLES = 128
DEFAULT_LENGTH = 128
#: Feedback damping (times mean diag H) for Hessians of that many tokens: 0.03
#: gave the lowest KL there; 0.1 and 0.3 suit fewer tokens (docs/quantization.md).
SELF_DAMP = 0.03
#: Whether ``cactus convert`` calibrates sequentially (each tensor's Hessian through
#: the tensors quantized before it): off, it measured worse (docs/quantization.md).
SEQUENTIAL = False
#: Tokens of a chat's self-written user turn.
USER_TOKENS = 48
#: KV-cache bytes one sampling batch may take (it sets the batch on large models).
CACHE_BUDGET = 256 << 20
#: Tokens per read-back forward pass (bounds the activations and attention scores).
READ_TOKENS = 4096


class StopForward(Exception):
    """Raised inside a forward pass once a sequential stage has read what it needs."""


class HessianOps(Ops):
    """Ops that add ``x^T x`` of every named linear layer's input to that tensor's Hessian.

    Layers that read the same input array (q/k/v, gate/up) share one sum, so
    their product is taken once.  Products run in float32 per call and add up in
    float64: a call holds at most a few thousand rows, so the rounding is far
    below what the damping adds.
    """

    def __init__(self, backends):
        super().__init__(backends)
        self.names: dict[int, str] = {}
        self.sums: dict[str, np.ndarray] = {}
        self.counts: dict[str, int] = {}
        self.recording = True  # off while the model writes: an outer product per decoded token is wasted work
        self._last: tuple = (None, None, 0)  # (input, its sum, its rows) of the previous call
        self.swap: dict[str, object] = {}  # name -> the weight to multiply by instead (sequential mode)
        self.only: Optional[set] = None  # record just these, then stop the forward pass
        self.seen: set = set()

    def name_weight(self, name: str, w) -> None:
        self.names[id(w)] = name

    def linear(self, x, w, bias=None):
        name = self.names.get(id(w))
        if name is not None and self.recording and (self.only is None or name in self.only):
            self._record(name, x)
            if self.only is not None:
                self.seen.add(name)
                if self.seen >= self.only:
                    self.seen = set()
                    raise StopForward  # what comes after needs these tensors quantized first
        if name is not None and self.swap:
            w = self.swap.get(name, w)
        return super().linear(x, w, bias)

    def _record(self, name: str, x) -> None:
        last_x, last_sum, rows_n = self._last
        if x is last_x and name not in self.sums:
            self.sums[name] = last_sum  # same input as the previous projection: same sum
            self.counts[name] = self.counts.get(name, 0) + rows_n
            return
        if x is last_x:
            acc = self.sums[name]
            if acc is last_sum:  # already added through the shared array
                self.counts[name] += rows_n
                return
        rows = np.asarray(x, dtype=np.float32).reshape(-1, x.shape[-1])
        acc = self.sums.get(name)
        if acc is None:
            acc = self.sums[name] = np.zeros((rows.shape[1], rows.shape[1]))
        acc += rows.T @ rows
        self.counts[name] = self.counts.get(name, 0) + len(rows)
        self._last = (x, acc, len(rows))

    def hessians(self) -> dict[str, np.ndarray]:
        """name -> ``X^T X / tokens`` of everything read so far (shared inputs share one array)."""
        out, done = {}, {}
        for n, s in self.sums.items():
            key = (id(s), self.counts[n])
            if key not in done:
                done[key] = s / max(self.counts[n], 1)
            out[n] = done[key]
        return out


def _sample_rows(logits: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator) -> np.ndarray:
    """One token per row of ``logits`` (B, V): nucleus sampling at ``temperature``."""
    z = np.asarray(logits, dtype=np.float64) / temperature
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    # The nucleus is every token at least as likely as the last one the ranking
    # needs to reach top_p: sorting values (not indices) finds that threshold.
    ranked = -np.sort(-p, axis=1)
    inside = ((np.cumsum(ranked, axis=1) - ranked) < top_p).sum(axis=1)
    keep = p >= ranked[np.arange(len(p)), inside - 1][:, None]
    cum = np.cumsum(p * keep, axis=1)
    pick = (cum < rng.random((len(p), 1)) * cum[:, -1:]).sum(axis=1)
    return np.minimum(pick, p.shape[1] - 1)


def _chat_frame(tokenizer) -> Optional[tuple[list[int], list[int]]]:
    """Template tokens before and after a user turn's content (through the generation
    prompt), or None without a chat template."""
    try:
        a, b = (tokenizer.encode_chat([{"role": "user", "content": c}], add_generation_prompt=True)
                for c in ("\u00a7", "\u00b6"))  # two one-character turns: what differs is the content
    except Exception:
        return None
    pre = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    post = next((i for i, (x, y) in enumerate(zip(a[::-1], b[::-1])) if x != y), 0)
    return a[:pre], a[len(a) - post:]


def _write(model, prompt: list[int], n: int, length: int, rng, temperature: float, top_p: float,
           middle: Optional[tuple[int, list[int]]] = None) -> list[list[int]]:
    """``n`` continuations of ``prompt`` by ``length`` sampled tokens, all in lockstep.

    ``middle = (k, ids)`` forces ``ids`` after the first ``k`` sampled tokens (a
    chat: the user turn, then the template's close and the generation prompt).
    """
    from cactus_core.generate import KVCache, kv_dtype_for

    total = len(prompt) + length + (len(middle[1]) if middle else 0)
    dtype = kv_dtype_for(model)
    per_seq = 2 * model.n_layers * model.n_kv_heads * model.head_dim * total * np.dtype(dtype).itemsize
    batch = max(1, min(n, CACHE_BUDGET // max(per_seq, 1)))
    out = []
    for b0 in range(0, n, batch):
        b = min(batch, n - b0)
        cache = KVCache(model.n_layers, model.n_kv_heads, model.head_dim, total, batch=b, dtype=dtype)
        seqs = np.tile(np.asarray(prompt, dtype=np.int64), (b, 1))
        feed = seqs
        for step in range(length):
            if middle is not None and step == middle[0]:
                forced = np.tile(np.asarray(middle[1], dtype=np.int64), (b, 1))
                seqs = np.concatenate([seqs, forced], axis=1)
                feed = np.concatenate([feed, forced], axis=1)
            h = model.forward(feed, cache)
            tok = _sample_rows(model.logits(h[:, -1:, :])[:, -1], temperature, top_p, rng)
            seqs = np.concatenate([seqs, tok[:, None]], axis=1)
            feed = tok[:, None]
        out += seqs.tolist()
    return out


def self_written_tokens(engine, samples: int = DEFAULT_SAMPLES, length: int = DEFAULT_LENGTH, seed: int = 0,
                        temperature: float = 1.0, top_p: float = 0.95) -> list[list[int]]:
    """Token ids of ``samples`` texts the model writes itself: half plain text of
    ``length`` tokens from its start token, half chats (a ``USER_TOKENS`` user turn
    it writes in the template's user slot, then ``length // 2`` tokens of its
    reply) when it has a chat template.  ``seed`` picks the draw."""
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise QuantizationError(f"calibration samples must be a whole number >= 1, got {samples!r}")
    if isinstance(length, bool) or not isinstance(length, int) or length < 2:
        raise QuantizationError(f"calibration length must be a whole number >= 2, got {length!r}")
    if not temperature > 0 or not 0 < top_p <= 1:
        raise QuantizationError(f"calibration sampling needs temperature > 0 and 0 < top_p <= 1, "
                                f"got {temperature!r}, {top_p!r}")
    model, tok = engine.model, engine.tokenizer
    rng = np.random.default_rng(seed)
    start = [tok.bos_token_id] if tok.bos_token_id is not None else (tok.eos_token_ids[:1] or [0])
    frame = _chat_frame(tok) if samples > 1 else None
    n_chat = samples // 2 if frame else 0
    texts = _write(model, start, samples - n_chat, length, rng, temperature, top_p)
    if n_chat:
        pre, post = frame
        chats = _write(model, pre, n_chat, USER_TOKENS + length // 2, rng, temperature, top_p,
                       middle=(USER_TOKENS, post))
        texts += chats
    return texts


def read_back(engine, tokens: Sequence[Sequence[int]]) -> None:
    """Run the model over every text (no logits), equal lengths batched together."""
    from cactus_core.generate import KVCache, kv_dtype_for

    model = engine.model
    by_len: dict[int, list[Sequence[int]]] = {}
    for ids in tokens:
        if len(ids) > 1:
            by_len.setdefault(len(ids), []).append(ids)
    for n, group in by_len.items():
        step = max(1, READ_TOKENS // n)
        for b0 in range(0, len(group), step):
            ids = np.asarray(group[b0 : b0 + step], dtype=np.int64)
            cache = KVCache(model.n_layers, model.n_kv_heads, model.head_dim, n, batch=len(ids),
                            dtype=kv_dtype_for(model))
            try:
                model.forward(ids, cache)
            except StopForward:  # a sequential stage has what it needs from this batch
                pass


def _engine_and_texts(model_dir, samples, length, seed, tokens, backend, temperature):
    from cactus_core import plugins
    from cactus_core.engine import Engine

    ops = HessianOps(plugins.select_backends(backend))
    engine = Engine.load(model_dir, context_length=8, ops=ops)  # read_back makes its own caches
    if tokens is None:
        if engine.generator is None:
            return ops, engine, None
        ops.recording = False
        tokens = self_written_tokens(engine, samples, length, seed, temperature)
        ops.recording = True
    return ops, engine, tokens


def self_hessians(model_dir: str, samples: int = DEFAULT_SAMPLES, length: int = DEFAULT_LENGTH, seed: int = 0,
                  tokens: Optional[Sequence[Sequence[int]]] = None, backend: str = "auto",
                  temperature: float = 1.0) -> Optional[dict[str, np.ndarray]]:
    """Per linear weight name, the input Hessian while the float model reads its own text.

    ``tokens`` replaces the self-written text (e.g. windows of a user's
    calibration file).  Returns None when the model cannot write text (an encoder)
    and no ``tokens`` are given.  Tensors that read one input share one array.
    """
    ops, engine, tokens = _engine_and_texts(model_dir, samples, length, seed, tokens, backend, temperature)
    if tokens is None:
        return None
    read_back(engine, tokens)
    return ops.hessians()


def sequential_quantize(model_dir: str, quantize: Callable[[str, np.ndarray], Any],
                        samples: int = DEFAULT_SAMPLES, length: int = DEFAULT_LENGTH, seed: int = 0,
                        tokens: Optional[Sequence[Sequence[int]]] = None, backend: str = "auto",
                        temperature: float = 1.0) -> Optional[dict[str, Any]]:
    """GPTQ's sequential calibration: each tensor's Hessian comes from inputs computed
    through the tensors already quantized, so it can compensate their error.

    Stages are the groups of tensors that read one input (q/k/v, o, gate/up, down),
    in the order the model calls them; each stage reads the texts back with the
    earlier stages' dequantized weights swapped in, stopping the forward pass as
    soon as its inputs are recorded, then ``quantize(name, hessian)`` makes its
    tensors.  Returns name -> quantized tensor (only names ``quantize`` does not
    answer None for), or None when the model cannot write text.
    """
    ops, engine, tokens = _engine_and_texts(model_dir, samples, length, seed, tokens, backend, temperature)
    if tokens is None:
        return None
    read_back(engine, [min(tokens, key=len)])  # one short float pass: the call order and shared inputs
    stages: dict[int, list[str]] = {}
    for name, acc in ops.sums.items():
        stages.setdefault(id(acc), []).append(name)
    made: dict[str, Any] = {}
    for names in stages.values():
        ops.sums, ops.counts, ops._last = {}, {}, (None, None, 0)
        ops.only, ops.seen = set(names), set()
        read_back(engine, tokens)
        ops.only = None
        hess = ops.hessians()
        for name in names:
            qt = quantize(name, hess[name])
            if qt is not None:
                made[name] = qt
                ops.swap[name] = ops.prepare(np.ascontiguousarray(qt.dequantize_unrotated(), dtype=np.float32))
    return made
