"""The generation loop: preallocated KV cache, chunked prefill, prefix reuse, sampling.

The cache is sized to the context once and written in place, so decoding
allocates nothing per token but the op outputs.  A conversation that grows
turn by turn keeps its cached prefix: only the new tokens are prefilled.
"""

from __future__ import annotations

import math
import mmap
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import numpy as np

from .models.base import CausalLM

PREFILL_CHUNK = 256


def reserve_zeros(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """A zero array whose memory becomes resident only where it is written.

    Why not ``np.zeros``: numpy asks for transparent huge pages on large arrays, and the
    cache's layout puts each (layer, head)'s positions 0.. at the start of a
    ``max_len * head_dim`` run, so the first prompt's writes touched every 2 MB page:
    a 4096-position cache was wholly resident after an 8-token prompt (128 MiB on
    Llama-3.2-1B, docs/cpu_neon.md).  An anonymous mapping without huge pages is
    zero-filled by the kernel a 4 KB page at a time, as positions are written.
    """
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < 1 << 22:
        return np.zeros(shape, dtype=dtype)
    private = {"flags": mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS} if hasattr(mmap, "MAP_ANONYMOUS") else {}
    buf = mmap.mmap(-1, nbytes, **private)
    if hasattr(buf, "madvise") and hasattr(mmap, "MADV_NOHUGEPAGE"):
        buf.madvise(mmap.MADV_NOHUGEPAGE)  # also where THP is "always"
    return np.frombuffer(buf, dtype=dtype).reshape(shape)


class KVCache:
    """Keys and values of every layer, preallocated to ``max_len`` positions.

    ``dtype`` float16 halves the cache's RAM; it is chosen for backends whose
    attention reads float16 K/V (``kv_dtype`` on the backend, see
    :func:`kv_dtype_for`).  Float32 stays the default: it is what the
    float32 parity tests against transformers assume.
    """

    def __init__(self, n_layers: int, n_kv_heads: int, head_dim: int, max_len: int, batch: int = 1,
                 dtype: Any = np.float32):
        dtype = np.dtype(dtype)
        if dtype not in (np.dtype(np.float32), np.dtype(np.float16)):
            raise ValueError(f"KV cache dtype must be float32 or float16, not {dtype}")
        shape = (n_layers, batch, n_kv_heads, max_len, head_dim)
        self.keys = reserve_zeros(shape, dtype)
        self.values = reserve_zeros(shape, dtype)
        self.max_len = max_len
        self.offset = 0  # tokens already stored
        # Each layer's (B, Hkv, max_len, d) views, made once: layer() runs per layer and token.
        self._layers = list(zip(self.keys, self.values))

    @classmethod
    def for_model(cls, model: CausalLM, max_len: Optional[int] = None, dtype: Any = None) -> "KVCache":
        n = min(max_len or model.max_context, model.max_context)
        return cls(model.n_layers, model.n_kv_heads, model.head_dim, n,
                   dtype=kv_dtype_for(model) if dtype is None else dtype)

    def update(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Store ``k``/``v`` ``(B, Hkv, L, d)`` after the cached tokens; return all of them."""
        start = self.offset
        end = start + k.shape[2]
        if end > self.max_len:
            raise ValueError(f"KV cache overflow: {end} > {self.max_len}")
        keys, values = self._layers[layer]
        keys[:, :, start:end] = k
        values[:, :, start:end] = v
        if start == 0 and keys.dtype != np.asarray(k).dtype:
            # Nothing cached before: attend over the new K/V as computed, unrounded
            # (a prompt's own logits are then those of a float32 cache).
            return k, v
        return keys[:, :, :end], values[:, :, :end]

    def layer(self, layer: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The layer's whole ``(B, Hkv, max_len, d)`` key and value arrays, for
        ``ops.cached_attention`` to store ``n`` new positions in after the cached ones."""
        if self.offset + n > self.max_len:
            raise ValueError(f"KV cache overflow: {self.offset + n} > {self.max_len}")
        return self._layers[layer]

    def layers(self, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Every layer's :meth:`layer` arrays, for ``ops.decoder_stack``: the same list
        object each call (backends may key prepared pointers on it)."""
        if self.offset + n > self.max_len:
            raise ValueError(f"KV cache overflow: {self.offset + n} > {self.max_len}")
        return self._layers

    def advance(self, n: int) -> None:
        """Called by the model once every layer has stored ``n`` new positions."""
        self.offset += n

    def truncate(self, n: int) -> None:
        """Forget everything after the first ``n`` positions (prefix reuse)."""
        self.offset = min(self.offset, n)

    @property
    def nbytes(self) -> int:
        return self.keys.nbytes + self.values.nbytes


def kv_dtype_for(model: CausalLM) -> np.dtype:
    """float16 when the backend that runs the model's attention declares
    ``kv_dtype = "float16"`` (it reads half-precision K/V in place), else float32."""
    ops = getattr(model, "ops", None)
    try:
        backend = ops.resolve("attention").__self__ if ops is not None else None
    except Exception:  # a model without attention (or scripted test models)
        backend = None
    return np.dtype(getattr(backend, "kv_dtype", "float32"))


@dataclass
class SamplingParams:
    """Decoding options; ``temperature == 0`` means greedy."""

    max_tokens: int = 256
    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    seed: Optional[int] = None
    stop: Sequence[str] = ()
    eos_token_ids: Sequence[int] = ()


def sample(logits: np.ndarray, params: SamplingParams, history: Sequence[int], rng: np.random.Generator) -> int:
    """Pick the next token from ``logits`` ``(V,)``."""
    z = logits.astype(np.float64, copy=True)
    if params.repetition_penalty != 1.0 and len(history):
        seen = np.unique(np.asarray(history, dtype=np.int64))
        vals = z[seen]
        z[seen] = np.where(vals > 0, vals / params.repetition_penalty, vals * params.repetition_penalty)
    if params.temperature <= 0:
        return int(np.argmax(z))
    z = z / params.temperature
    if params.top_k and params.top_k < z.size:
        kth = np.partition(z, -params.top_k)[-params.top_k]
        z = np.where(z < kth, -np.inf, z)
    p = np.exp(z - z.max())
    p /= p.sum()
    if params.min_p > 0:
        p = np.where(p < params.min_p * p.max(), 0.0, p)
        p /= p.sum()
    if params.top_p < 1.0:
        order = np.argsort(-p)
        cum = np.cumsum(p[order])
        keep = order[: int(np.searchsorted(cum, params.top_p)) + 1]
        mask = np.zeros_like(p)
        mask[keep] = p[keep]
        p = mask / mask.sum()
    return int(rng.choice(p.size, p=p))


@dataclass
class GenerationResult:
    tokens: list[int] = field(default_factory=list)
    text: str = ""
    finish_reason: str = "length"
    prefill_tokens: int = 0
    reused_tokens: int = 0
    time_to_first_token_ms: float = 0.0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    last_prefill_logits: Optional[np.ndarray] = None


class Generator:
    """Runs a :class:`CausalLM` with a persistent cache, reusing the cached prefix."""

    def __init__(self, model: CausalLM, max_context: Optional[int] = None, kv_dtype: Any = None):
        self.model = model
        self.cache = KVCache.for_model(model, max_context, kv_dtype)
        self.cached_ids: list[int] = []

    @property
    def context_length(self) -> int:
        return self.cache.max_len

    def reset(self) -> None:
        """Forget the cached conversation (the next prefill starts from position 0)."""
        self.cache.truncate(0)
        self.cached_ids = []

    def prefill(self, ids: Sequence[int]) -> tuple[np.ndarray, int]:
        """Bring the cache to ``ids``; return the last position's logits and tokens reused."""
        ids = list(ids)
        common = 0
        for a, b in zip(self.cached_ids, ids):
            if a != b:
                break
            common += 1
        common = min(common, len(ids) - 1)  # at least one token must run to get logits
        self.cache.truncate(common)
        self.cached_ids = ids[:common]
        h = None
        for start in range(common, len(ids), PREFILL_CHUNK):
            chunk = ids[start : start + PREFILL_CHUNK]
            h = self.model.forward(np.asarray([chunk], dtype=np.int64), self.cache)
            self.cached_ids.extend(chunk)
        logits = self.model.logits(h[:, -1:, :])[0, -1]
        return logits, common

    def step(self, token: int) -> np.ndarray:
        """Feed one token; return the next-token logits."""
        h = self.model.forward(np.asarray([[token]], dtype=np.int64), self.cache)
        self.cached_ids.append(token)
        return self.model.logits(h)[0, -1]

    def generate(
        self,
        prompt_ids: Sequence[int],
        params: SamplingParams,
        decode: Callable[[int], str],
        on_text: Optional[Callable[[str], bool | None]] = None,
        after_prefill: Optional[Callable[[np.ndarray], bool]] = None,
        flush: Optional[Callable[[], str]] = None,
        constraint: Any = None,
        token_text: Optional[Callable[[int], str]] = None,
    ) -> GenerationResult:
        """Prefill then decode until EOS, a stop string, ``max_tokens`` or the context end.

        ``decode(token)`` returns the new text for a token (a streaming
        detokeniser); ``on_text(piece)`` may return ``False`` to stop early;
        ``after_prefill(logits)`` may return ``False`` to skip decoding (the
        router decided to hand off); ``flush()`` returns text the detokeniser
        still holds (an incomplete character) once decoding ends.
        ``constraint`` (a :class:`cactus_core.constrain.CallConstraint`) limits each
        step to the tokens it allows, judged on ``token_text(token)``, and ends
        decoding when it is satisfied.
        """
        res = GenerationResult()
        rng = np.random.default_rng(params.seed)
        t0 = time.perf_counter()
        logits, res.reused_tokens = self.prefill(prompt_ids)
        res.prefill_tokens = len(prompt_ids) - res.reused_tokens
        res.last_prefill_logits = logits
        res.prefill_s = time.perf_counter() - t0
        if after_prefill is not None and after_prefill(logits) is False:
            res.finish_reason = "handoff"
            return res
        eos = set(params.eos_token_ids)
        history = list(prompt_ids)
        text = ""
        emitted = 0
        t1 = time.perf_counter()
        while True:
            if constraint is not None:
                greedy = params.temperature <= 0 and params.repetition_penalty == 1.0
                logits = constraint.mask(logits, token_text, greedy=greedy)
            tok = sample(logits, params, history, rng)
            if not res.tokens:
                res.time_to_first_token_ms = (time.perf_counter() - t0) * 1000.0
            if tok in eos:
                res.finish_reason = "stop"
                break
            res.tokens.append(tok)
            history.append(tok)
            text += decode(tok)
            if constraint is not None:
                constraint.advance(token_text(tok))
            hit = _find_stop(text, params.stop)
            if hit is not None:
                text = text[:hit]
                res.finish_reason = "stop"
                break
            # Hold back a tail that may turn out to be the start of a stop string.
            safe = len(text) - _stop_prefix_len(text, params.stop)
            if on_text is not None and safe > emitted:
                piece, emitted = text[emitted:safe], safe
                if on_text(piece) is False:
                    res.finish_reason = "cancelled"
                    break
            if constraint is not None and constraint.done:
                res.finish_reason = "stop"
                break
            if len(res.tokens) >= params.max_tokens:
                res.finish_reason = "length"
                break
            if self.cache.offset >= self.cache.max_len:
                res.finish_reason = "context"
                break
            logits = self.step(tok)
        if flush is not None and res.finish_reason in ("length", "context"):
            text += flush()
        if on_text is not None and len(text) > emitted and res.finish_reason != "cancelled":
            on_text(text[emitted:])
        res.decode_s = time.perf_counter() - t1
        res.text = text
        return res


def _find_stop(text: str, stops: Sequence[str]) -> Optional[int]:
    best = None
    for s in stops:
        if s:
            i = text.find(s)
            if i >= 0 and (best is None or i < best):
                best = i
    return best


def _stop_prefix_len(text: str, stops: Sequence[str]) -> int:
    """Length of the longest tail of ``text`` that is a proper prefix of a stop string."""
    best = 0
    for s in stops:
        for n in range(min(len(s) - 1, len(text)), best, -1):
            if text.endswith(s[:n]):
                best = n
                break
    return best
