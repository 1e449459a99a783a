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

#: Self-written texts, their length in tokens and their sampling temperature: 16 plain
#: texts of 256 tokens and 16 chats of CHAT_TURNS rounds, sampled at T = 1.3.  Session 13
#: measured longer and hotter texts on held-out docstrings (docs/quantization.md, three
#: calibration draws each, KL / MLX 4-bit g64): 128 tokens at T = 1.0 (the default before)
#: 0.75-0.76; T = 1.3 0.71-0.74; 256 tokens 0.70-0.71; both 0.67-0.69; 512 tokens at T = 1.3
#: 0.65, for 4x the conversion time of 128 (2x for 256).  Session 5's 128 texts (64 plain,
#: 64 one-round chats, ~16K tokens) measured worse on validation conversations, which sit
#: 400-1000 tokens deep in a chat.
DEFAULT_SAMPLES = 32
DEFAULT_LENGTH = 256
DEFAULT_TEMPERATURE = 1.3
#: Feedback damping (times mean diag H) for Hessians of that many tokens: 0.03
#: gave the lowest KL there; 0.1 and 0.3 suit fewer tokens (docs/quantization.md).
SELF_DAMP = 0.03
#: Whether ``cactus convert`` calibrates sequentially (each tensor's Hessian through
#: the tensors quantized before it): off, it measured worse (docs/quantization.md).
SEQUENTIAL = False
#: Tokens of a chat's self-written user turn.
USER_TOKENS = 48
#: Rounds (user turn, reply) per self-written chat: six reach ~690 tokens, the depth
#: at which a chat model answers after a system prompt and a few turns.
CHAT_TURNS = 6
#: Whether tokens the model writes after closing its chat turn (lockstep writing
#: goes on until the template's next turn) are recorded: no, they are not text it
#: will ever read; they stay in the context.
PAST_END = False
#: Whether self-written Hessians are shrunk towards their diagonal by their noise
#: (:func:`shrink_hessian`): off, it measured no better (docs/quantization.md).
SHRINK = False
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
        self.keep: Optional[np.ndarray] = None  # (batch * tokens,) bool: rows of the current batch to record

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
        if self.keep is not None and len(self.keep) == len(rows):
            rows = rows[self.keep]
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


#: One-character contents told apart in a rendered template.  Byte-level BPE can split
#: a character into byte tokens that two contents share ("\u00a7" and "\u00b6" both
#: start with byte 0xC2), so frames are cut where *every* pair differs.
_PROBES = ("\u00a7", "\u00b6", "A", "z", "7")


def _common(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _chat_frame(tokenizer) -> Optional[tuple[list[int], list[int]]]:
    """Template tokens before and after a user turn's content (through the generation
    prompt), or None without a chat template."""
    try:
        r = [tokenizer.encode_chat([{"role": "user", "content": c}], add_generation_prompt=True) for c in _PROBES]
    except Exception:
        return None
    pre = min(_common(r[0], x) for x in r[1:])
    post = min(_common(r[0][::-1], x[::-1]) for x in r[1:])
    return r[0][:pre], r[0][len(r[0]) - post:]


def _turn_break(tokenizer) -> Optional[list[int]]:
    """Template tokens between an assistant reply's content and the next user turn's
    content (close the reply, open a user turn), or None if the template has no such
    plain seam (then chats stay one turn)."""
    def enc(reply: str, user: str) -> list[int]:
        return tokenizer.encode_chat([{"role": "user", "content": _PROBES[0]}, {"role": "assistant", "content": reply},
                                      {"role": "user", "content": user}], add_generation_prompt=True)
    try:
        a = enc(_PROBES[0], _PROBES[0])
        replies = [enc(c, _PROBES[0]) for c in _PROBES[1:]]
        users = [enc(_PROBES[0], c) for c in _PROBES[1:]]
    except Exception:
        return None
    # a differs from ``replies`` only in the reply, from ``users`` only in the second user turn
    reply_end = len(a) - min(_common(a[::-1], x[::-1]) for x in replies)
    user_start = min(_common(a, x) for x in users)
    return a[reply_end:user_start] if 0 < reply_end <= user_start else None


def _write(model, prompt: list[int], n: int, length: int, rng, temperature: float, top_p: float,
           forced: Sequence[tuple[int, list[int]]] = (), bar=None) -> list[list[int]]:
    """``n`` continuations of ``prompt`` by ``length`` sampled tokens, all in lockstep.

    Each ``(k, ids)`` of ``forced`` feeds ``ids`` after the first ``k`` sampled
    tokens (a chat: the template's close of a user turn and the generation prompt,
    or the seam from a reply to the next user turn).  ``bar`` (tqdm) counts sampled tokens.
    """
    from cactus_core.generate import KVCache, kv_dtype_for

    at = {k: ids for k, ids in forced}
    total = len(prompt) + length + sum(len(ids) for ids in at.values())
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
            if step in at:
                ids = np.tile(np.asarray(at[step], dtype=np.int64), (b, 1))
                seqs = np.concatenate([seqs, ids], axis=1)
                feed = np.concatenate([feed, ids], axis=1)
            h = model.forward(feed, cache)
            tok = _sample_rows(model.logits(h[:, -1:, :])[:, -1], temperature, top_p, rng)
            seqs = np.concatenate([seqs, tok[:, None]], axis=1)
            feed = tok[:, None]
            if bar is not None:
                bar.update(b)
        out += seqs.tolist()
    return out


def _after_end(ids: list[int], sampled: np.ndarray, ends: set) -> np.ndarray:
    """Which tokens come after the model closed its turn and before the template opens
    the next one: once a sampled token is an end token, the rest of that sampled run
    is what a lockstep writer makes the model say after its turn was over."""
    out = np.zeros(len(ids), dtype=bool)
    closed = False
    for i, (t, fresh) in enumerate(zip(ids, sampled)):
        if not fresh:
            closed = False  # the template takes over again
        elif closed:
            out[i] = True
        elif t in ends:
            closed = True
    return out


def self_written(engine, samples: int = DEFAULT_SAMPLES, length: int = DEFAULT_LENGTH, seed: int = 0,
                 temperature: float = 1.0, top_p: float = 0.95, turns: int = 1,
                 past_end: bool = True, progress: bool = False) -> tuple[list[list[int]], list[np.ndarray]]:
    """Texts the model writes itself and, per text, which tokens to record.

    Half are plain text of ``length`` tokens from its start token, half chats when it
    has a chat template: ``turns`` rounds of a ``USER_TOKENS`` user turn it writes in
    the template's user slot, then ``length // 2`` tokens of its reply (rounds joined
    by the template's own seam, so later rounds sit deep in a long conversation, where
    a chat model is used).  A chat turn the model closes early is followed, in
    lockstep, by tokens it writes after its turn was over; ``past_end=False`` leaves
    them out of the record (the text stays, as context).  ``seed`` picks the draw.
    ``progress`` shows a bar of sampled tokens (a 1B model writes for minutes).
    """
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1:
        raise QuantizationError(f"calibration samples must be a whole number >= 1, got {samples!r}")
    if isinstance(length, bool) or not isinstance(length, int) or length < 2:
        raise QuantizationError(f"calibration length must be a whole number >= 2, got {length!r}")
    if isinstance(turns, bool) or not isinstance(turns, int) or turns < 1:
        raise QuantizationError(f"calibration chat turns must be a whole number >= 1, got {turns!r}")
    if not temperature > 0 or not 0 < top_p <= 1:
        raise QuantizationError(f"calibration sampling needs temperature > 0 and 0 < top_p <= 1, "
                                f"got {temperature!r}, {top_p!r}")
    model, tok = engine.model, engine.tokenizer
    rng = np.random.default_rng(seed)
    start = [tok.bos_token_id] if tok.bos_token_id is not None else (tok.eos_token_ids[:1] or [0])
    # every text is read back whole, so none may outgrow the model's context (a small model's
    # 512 positions hold cq4's 512-token texts only without their start token)
    room = getattr(model, "max_context", None)
    if room:
        length = max(2, min(length, room - len(start)))
    frame = _chat_frame(tok) if samples > 1 else None
    n_chat = samples // 2 if frame else 0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=(samples - n_chat) * length, desc="write calibration text", unit="tok")
    try:
        texts = _write(model, start, samples - n_chat, length, rng, temperature, top_p, bar=bar)
        keep = [np.ones(len(t), dtype=bool) for t in texts]  # plain text: documents end and start, as in pretraining
        if n_chat:
            pre, post = frame
            seam = _turn_break(tok) if turns > 1 else None
            per_round = USER_TOKENS + length // 2
            if room:  # one round must fit
                per_round = max(USER_TOKENS + 2, min(per_round, room - len(pre) - len(post)))
            fixed = len(pre) + len(post) + per_round  # later rounds must stay inside the model's positions
            fit = 1 + max(0, ((room or 1 << 30) - fixed) // (per_round + len(post) + len(seam or ())))
            rounds = min(turns, fit) if seam else 1
            forced = [(USER_TOKENS, post)]
            for r in range(1, rounds):
                forced += [(r * per_round, seam), (r * per_round + USER_TOKENS, post)]
            if bar is not None:
                bar.total += n_chat * rounds * per_round
                bar.refresh()
            chats = _write(model, pre, n_chat, rounds * per_round, rng, temperature, top_p, forced=forced, bar=bar)
            sampled = np.ones(len(chats[0]), dtype=bool)
            sampled[: len(pre)] = False
            for k, ids in forced:  # k sampled tokens come before each forced run
                at = len(pre) + k + sum(len(i) for kk, i in forced if kk < k)
                sampled[at : at + len(ids)] = False
            ends = set(tok.eos_token_ids)
            texts += chats
            keep += [np.ones(len(t), dtype=bool) if past_end else ~_after_end(t, sampled, ends) for t in chats]
    finally:
        if bar is not None:
            bar.close()
    return texts, keep


def self_written_tokens(engine, samples: int = DEFAULT_SAMPLES, length: int = DEFAULT_LENGTH, seed: int = 0,
                        temperature: float = 1.0, top_p: float = 0.95, turns: int = 1) -> list[list[int]]:
    """Token ids of the texts :func:`self_written` makes (all of them, every token)."""
    return self_written(engine, samples, length, seed, temperature, top_p, turns)[0]


def read_back(engine, tokens: Sequence[Sequence[int]], keep: Optional[Sequence[np.ndarray]] = None) -> None:
    """Run the model over every text (no logits), equal lengths batched together.

    ``keep`` (per text, a bool per token) says which tokens' inputs a
    :class:`HessianOps` records; the others are still read, as context."""
    from cactus_core.generate import KVCache, kv_dtype_for

    model, ops = engine.model, engine.ops
    by_len: dict[int, list[int]] = {}
    for i, ids in enumerate(tokens):
        if len(ids) > 1:
            by_len.setdefault(len(ids), []).append(i)
    for n, group in by_len.items():
        step = max(1, READ_TOKENS // n)
        for b0 in range(0, len(group), step):
            pick = group[b0 : b0 + step]
            ids = np.asarray([tokens[i] for i in pick], dtype=np.int64)
            if keep is not None and isinstance(ops, HessianOps):
                ops.keep = np.concatenate([np.asarray(keep[i], dtype=bool) for i in pick])
            cache = KVCache(model.n_layers, model.n_kv_heads, model.head_dim, n, batch=len(ids),
                            dtype=kv_dtype_for(model))
            try:
                model.forward(ids, cache)
            except StopForward:  # a sequential stage has what it needs from this batch
                pass
            finally:
                if isinstance(ops, HessianOps):
                    ops.keep = None


def _engine_and_texts(model_dir, samples, length, seed, tokens, backend, temperature, turns, past_end,
                      progress=False):
    from cactus_core import plugins
    from cactus_core.engine import Engine

    ops = HessianOps(plugins.select_backends(backend))
    engine = Engine.load(model_dir, context_length=8, ops=ops)  # read_back makes its own caches
    keep = None
    if tokens is None:
        if engine.generator is None:
            return ops, engine, None, None
        ops.recording = False
        tokens, keep = self_written(engine, samples, length, seed, temperature,
                                    turns=CHAT_TURNS if turns is None else turns,
                                    past_end=PAST_END if past_end is None else past_end, progress=progress)
        ops.recording = True
        #: how many of the texts are plain (self_written puts them before the chats)
        engine.plain_texts = samples - (samples // 2 if samples > 1 and _chat_frame(engine.tokenizer) else 0)
    return ops, engine, tokens, keep


def shrink_hessian(a: np.ndarray, na: int, b: np.ndarray, nb: int) -> tuple[np.ndarray, float]:
    """``H`` of two halves' second moments ``a`` (``na`` tokens) and ``b``, its
    off-diagonal part shrunk towards zero by as much as it is noise.

    Ledoit and Wolf's shrinkage towards the diagonal: the weight
    ``alpha = sum Var(H_ij) / sum H_ij^2`` over off-diagonal entries, with
    the variance estimated from how much the halves (disjoint texts) disagree:
    ``Var(H_ij) = E(a_ij - b_ij)^2 * na * nb / (na + nb)^2``.  Error feedback
    moves rounding error into the directions ``H`` says the inputs never take;
    where that is estimation noise, the real inputs take them.
    """
    h = (a * na + b * nb) / (na + nb)
    off = ~np.eye(len(h), dtype=bool)
    noise = float(np.sum((a - b)[off] ** 2)) * na * nb / (na + nb) ** 2
    energy = float(np.sum(h[off] ** 2))
    alpha = min(1.0, noise / energy) if energy > 0 else 0.0
    out = h * (1.0 - alpha)
    out[np.diag_indices(len(h))] = np.diag(h)
    return out, alpha


def _halves(ops: "HessianOps", engine, tokens, keep) -> dict[str, np.ndarray]:
    """Hessians of all texts, each shrunk by :func:`shrink_hessian` with the even- and
    odd-numbered texts as the two halves (each half holds both kinds of text)."""
    pick = [list(range(0, len(tokens), 2)), list(range(1, len(tokens), 2))]
    parts = []
    for idx in pick:
        ops.sums, ops.counts, ops._last = {}, {}, (None, None, 0)
        read_back(engine, [tokens[i] for i in idx], None if keep is None else [keep[i] for i in idx])
        parts.append((ops.hessians(), dict(ops.counts)))
    (ha, ca), (hb, cb) = parts
    out, done = {}, {}
    for name in ha:
        key = id(ha[name])  # tensors that read one input share one matrix: shrink it once
        if key not in done:
            done[key] = shrink_hessian(ha[name], ca[name], hb[name], cb[name])[0] if name in hb else ha[name]
        out[name] = done[key]
    return out


def self_hessians(model_dir: str, samples: int = DEFAULT_SAMPLES, length: int = DEFAULT_LENGTH, seed: int = 0,
                  tokens: Optional[Sequence[Sequence[int]]] = None, backend: str = "auto",
                  temperature: float = DEFAULT_TEMPERATURE, turns: Optional[int] = None,
                  past_end: Optional[bool] = None, shrink: Optional[bool] = None,
                  texts_out: Optional[list] = None, progress: bool = False) -> Optional[dict[str, np.ndarray]]:
    """Per linear weight name, the input Hessian while the float model reads its own text.

    ``tokens`` replaces the self-written text (e.g. windows of a user's
    calibration file).  Returns None when the model cannot write text (an encoder)
    and no ``tokens`` are given.  Tensors that read one input share one array.
    ``turns`` and ``past_end`` go to :func:`self_written` (defaults
    :data:`CHAT_TURNS`, :data:`PAST_END`); ``shrink`` (default :data:`SHRINK`)
    shrinks each Hessian towards its diagonal by its estimated noise
    (:func:`shrink_hessian`).  ``texts_out``, a list, receives the texts read (with their
    ``keep`` masks and, when self-written, how many are plain) as a
    :class:`~.sensitivity.CalibrationTexts`, for measurements on the same text.
    ``progress`` shows a bar while the model writes.
    """
    ops, engine, tokens, keep = _engine_and_texts(model_dir, samples, length, seed, tokens, backend, temperature,
                                                  turns, past_end, progress)
    if tokens is None:
        return None
    if texts_out is not None:
        from .sensitivity import CalibrationTexts

        texts = CalibrationTexts(tokens)
        texts.keep, texts.plain = keep, getattr(engine, "plain_texts", None)
        texts_out.append(texts)
    if (SHRINK if shrink is None else shrink) and len(tokens) >= 4:
        return _halves(ops, engine, tokens, keep)
    read_back(engine, tokens, keep)
    return ops.hessians()


def sequential_quantize(model_dir: str, quantize: Callable[[str, np.ndarray], Any],
                        samples: int = DEFAULT_SAMPLES, length: int = DEFAULT_LENGTH, seed: int = 0,
                        tokens: Optional[Sequence[Sequence[int]]] = None, backend: str = "auto",
                        temperature: float = DEFAULT_TEMPERATURE, turns: Optional[int] = None,
                        past_end: Optional[bool] = None) -> Optional[dict[str, Any]]:
    """GPTQ's sequential calibration: each tensor's Hessian comes from inputs computed
    through the tensors already quantized, so it can compensate their error.

    Stages are the groups of tensors that read one input (q/k/v, o, gate/up, down),
    in the order the model calls them; each stage reads the texts back with the
    earlier stages' dequantized weights swapped in, stopping the forward pass as
    soon as its inputs are recorded, then ``quantize(name, hessian)`` makes its
    tensors.  Returns name -> quantized tensor (only names ``quantize`` does not
    answer None for), or None when the model cannot write text.
    """
    ops, engine, tokens, keep = _engine_and_texts(model_dir, samples, length, seed, tokens, backend, temperature,
                                                  turns, past_end)
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
        read_back(engine, tokens, keep)
        ops.only = None
        hess = ops.hessians()
        for name in names:
            qt = quantize(name, hess[name])
            if qt is not None:
                made[name] = qt
                ops.swap[name] = ops.prepare(np.ascontiguousarray(qt.dequantize_unrotated(), dtype=np.float32))
    return made
