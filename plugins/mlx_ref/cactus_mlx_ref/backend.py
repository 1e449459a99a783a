"""The ``mlx_ref`` backend: the whole op interface on ``mlx.core`` arrays.

The graph contract is numpy float32 in and out, so every op converts at the
boundary: inputs are copied into MLX (``mx.array``), results come back as a
zero-copy numpy view of the evaluated MLX buffer.  Weights are converted once
and cached (see :class:`WeightCache`), never per call.

MLX picks the device itself (``mx.default_device()``): the CPU with
``mlx[cpu]`` on Linux, the GPU through Metal on Apple silicon, CUDA under
mlx's CUDA build.  Nothing here is platform specific.

Numerics follow numpy_ref: float32 arithmetic throughout (float16/bfloat16
weights are widened inside the matmul), RoPE angles computed in float64 like
the reference, softmax rows that are entirely masked give zeros.
"""

from __future__ import annotations

import math
import weakref
from typing import Any, Optional

import numpy as np

from cactus_core import formats as _formats
from cactus_core.errors import BackendError
from cactus_core.formats import BFloat16, QuantizedTensor
from cactus_core.graph import Backend

INSTALL_HINT = "mlx is not installed: pip install 'mlx[cpu]'"
_FLOAT_FORMATS = frozenset({"float32", "float16", "bfloat16"})
#: Quantized formats with an MLX implementation (see quant.py), when the core defines them.
_QUANT_FORMATS = frozenset(
    name for name, cls in (("cq", "CQTensor"), ("int4", "Int4Tensor"), ("int8", "Int8Tensor"))
    if hasattr(_formats, cls)
)


def unavailable_reason() -> Optional[str]:
    """None when ``mlx.core`` imports, else the one-line install hint."""
    try:
        import mlx.core  # noqa: F401
    except Exception:  # ImportError, or a broken native library
        return INSTALL_HINT
    return None


class KernelArgumentError(BackendError, ValueError):
    """Arguments an op cannot take (shapes, kinds); also a ValueError like numpy_ref's."""


class WeightCache:
    """MLX copies of weights, keyed on the identity of the numpy-side object.

    Each entry holds a weak reference to its source whose callback drops the
    entry, so a dead weight's ``id`` can never alias a live one and arrays
    passed only once (tests, temporaries) do not accumulate.  Weights are
    read-only memory maps, so a cached copy never goes stale.
    """

    def __init__(self):
        self._entries: dict[tuple[int, str], tuple[Any, Any]] = {}

    def get(self, w: Any, kind: str, build):
        key = (id(w), kind)
        hit = self._entries.get(key)
        if hit is not None:
            return hit[1]
        value = build(w)
        entries = self._entries
        try:
            ref = weakref.ref(w, lambda _r, k=key: entries.pop(k, None))
        except TypeError:  # not weak-referenceable: do not cache, id could be reused
            return value
        entries[key] = (ref, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)


class MlxBackend(Backend):
    """Every op of the interface on MLX arrays (name ``mlx_ref``)."""

    name = "mlx_ref"
    formats = _FLOAT_FORMATS | _QUANT_FORMATS

    def __init__(self):
        import mlx.core as mx

        from . import quant

        self.mx = mx
        self.device = mx.default_device()
        self._quant = quant
        self._weights = WeightCache()
        self._rope_tables: dict[tuple, tuple] = {}

    def supports(self, op: str, fmt: Optional[str] = None) -> bool:
        """Quantized formats only for linear; embedding lookups of them fall back."""
        if fmt in _QUANT_FORMATS and op != "linear":
            return False
        return super().supports(op, fmt)

    def describe(self) -> str:
        """One line for reports: the MLX version and device."""
        return f"mlx_ref (mlx {self.mx.__version__}, {self.device})"

    # --- boundary conversions -------------------------------------------------
    def _in(self, x: Any):
        return self.mx.array(np.ascontiguousarray(x, dtype=np.float32))

    def _out(self, y) -> np.ndarray:
        """Evaluate ``y`` and view it as numpy (zero-copy when MLX laid it out contiguously)."""
        y = y.astype(self.mx.float32) if y.dtype != self.mx.float32 else y
        self.mx.eval(y)
        return np.ascontiguousarray(np.asarray(y))

    def _float(self, w: Any):
        """A float weight as an MLX array in its stored dtype (bf16 stays bf16)."""
        mx = self.mx
        if isinstance(w, BFloat16):
            return mx.view(mx.array(np.ascontiguousarray(w.raw)), mx.bfloat16)
        a = np.asarray(w)
        if a.dtype not in (np.float32, np.float16):
            a = a.astype(np.float32)
        return mx.array(np.ascontiguousarray(a))

    def _matrix_t(self, w: Any):
        """A 2-D float weight ``(out, in)`` cached transposed ``(in, out)``, contiguous.

        ``x @ wT`` with the transpose laid out in memory runs 2x faster on
        mlx-cpu than ``x @ w.T``; embedding lookups of a tied table read the
        same copy column-wise, so a tied model holds the table once.
        """
        def build(w):
            m = self._float(w)
            if m.ndim != 2:
                raise KernelArgumentError(f"linear weight must be 2-D, got shape {tuple(m.shape)}")
            t = self.mx.contiguous(m.T)
            self.mx.eval(t)
            return t

        return self._weights.get(w, "T", build)

    def _vector(self, w: Any, n: int, what: str):
        """A small per-channel parameter (norm weight, bias) as float32 MLX, cached."""
        def build(w):
            v = self._float(w).astype(self.mx.float32).reshape(-1)
            self.mx.eval(v)
            return v

        v = self._weights.get(w, "v", build)
        if v.shape[0] != n:
            raise KernelArgumentError(f"{what} has {v.shape[0]} values but the input has {n} channels")
        return v

    def prepare(self, w: Any) -> Any:
        """Convert a linear weight to MLX once at load; the model keeps the original object."""
        if isinstance(w, QuantizedTensor):
            self._quant.prepared(self, w)
        else:
            self._matrix_t(w)
        return w

    # --- matrix products -------------------------------------------------------
    def linear(self, x, w, bias=None):
        x = np.asarray(x)
        if isinstance(w, QuantizedTensor):
            if w.format not in _QUANT_FORMATS:
                raise KernelArgumentError(f"mlx_ref has no kernel for {w.format} weights")
            n_out, n_in = w.shape
        else:
            wt = self._matrix_t(w)
            n_in, n_out = wt.shape
        if x.ndim == 0 or x.shape[-1] != n_in:
            raise KernelArgumentError(
                f"linear: input has {x.shape[-1] if x.ndim else 0} features, weight expects {n_in}"
            )
        xm = self._in(x.reshape(-1, n_in))
        if isinstance(w, QuantizedTensor):
            y = self._quant.linear(self, xm, w)
        else:
            y = xm @ wt  # float16/bfloat16 weights promote to float32 inside the product
        if bias is not None:
            y = y + self._vector(bias, n_out, "linear bias")
        return self._out(y).reshape(x.shape[:-1] + (n_out,))

    def embedding(self, table, ids):
        ids = np.asarray(ids, dtype=np.int64)
        vocab, dim = table.shape
        if ids.size and (ids.min() < 0 or ids.max() >= vocab):
            raise KernelArgumentError(f"token id out of range: ids must lie in [0, {vocab})")
        wt = self._matrix_t(table)  # (D, vocab): one copy shared with a tied lm_head
        rows = self.mx.take(wt, self.mx.array(ids.reshape(-1).astype(np.int32)), axis=1).T
        return self._out(rows).reshape(ids.shape + (dim,))

    # --- normalisation and position ---------------------------------------------
    def rms_norm(self, x, weight, eps, unit_offset=False):
        mx = self.mx
        xm = self._in(x)
        w = self._vector(weight, xm.shape[-1], "rms_norm weight")
        if unit_offset:
            w = w + 1.0
        return self._out(mx.fast.rms_norm(xm, w, float(eps)))

    def layer_norm(self, x, weight, bias, eps):
        xm = self._in(x)
        D = xm.shape[-1]
        w = None if weight is None else self._vector(weight, D, "layer_norm weight")
        b = None if bias is None else self._vector(bias, D, "layer_norm bias")
        return self._out(self.mx.fast.layer_norm(xm, w, b, float(eps)))

    def _cos_sin(self, positions: np.ndarray, inv_freq: np.ndarray):
        """cos/sin tables ``(L, half)``, angles in float64 exactly as numpy_ref.

        mx.fast.rope forms angles in float32, which drifts from the reference
        by ~1e-4 at positions in the thousands; the tables are tiny, so they
        are built here and memoised for the q/k pair of each layer.
        """
        pos = np.asarray(positions, dtype=np.float64).reshape(-1)
        key = (id(inv_freq), pos.shape[0], float(pos[0]) if pos.size else 0.0,
               float(pos[-1]) if pos.size else 0.0)
        hit = self._rope_tables.get(key)
        if hit is not None and hit[0] is inv_freq and np.array_equal(hit[1], pos):
            return hit[2], hit[3]
        angles = np.outer(pos, np.asarray(inv_freq, dtype=np.float64))
        cos = self.mx.array(np.cos(angles).astype(np.float32))
        sin = self.mx.array(np.sin(angles).astype(np.float32))
        if len(self._rope_tables) > 8:
            self._rope_tables.clear()
        self._rope_tables[key] = (inv_freq, pos, cos, sin)
        return cos, sin

    def rope(self, x, positions, inv_freq):
        mx = self.mx
        xm = self._in(x)
        hd, L = xm.shape[-1], xm.shape[-2]
        half = int(np.asarray(inv_freq).shape[0])
        if 2 * half > hd:
            raise KernelArgumentError(f"rope: rotary dim {2 * half} exceeds head_dim {hd}")
        if np.asarray(positions).size != L:
            raise KernelArgumentError(f"rope: {np.asarray(positions).size} positions for a sequence of length {L}")
        cos, sin = self._cos_sin(positions, inv_freq)
        x1, x2 = xm[..., :half], xm[..., half : 2 * half]
        parts = [x1 * cos - x2 * sin, x2 * cos + x1 * sin]
        if 2 * half < hd:
            parts.append(xm[..., 2 * half :])
        return self._out(mx.concatenate(parts, axis=-1))

    # --- attention ----------------------------------------------------------------
    def attention(self, q, k, v, *, scale, q_offset=0, causal=True, sliding_window=None,
                  softcap=None, mask=None):
        mx = self.mx
        B, Hq, L, d = q.shape
        Hkv, S = k.shape[1], k.shape[2]
        if Hq % Hkv:
            raise KernelArgumentError(f"attention: {Hq} query heads do not group over {Hkv} KV heads")
        qm, km, vm = self._in(q), self._in(k), self._in(v)
        qpos = q_offset + np.arange(L)[:, None]
        kpos = np.arange(S)[None, :]
        hidden = np.zeros((L, S), dtype=bool)
        if causal:
            hidden |= kpos > qpos
        if sliding_window is not None:
            hidden |= kpos <= qpos - sliding_window
        add = None if mask is None else self._in(mask)
        if softcap is None and not hidden.all(axis=1).any():
            # The fused kernel; MLX's "causal" aligns the last query with the last key.
            if causal and sliding_window is None and add is None and q_offset == S - L:
                m = "causal"
            elif add is None:
                m = mx.array(~hidden) if hidden.any() else None
            else:
                m = add if not hidden.any() else add + mx.array(np.where(hidden, -np.inf, 0.0).astype(np.float32))
            out = mx.fast.scaled_dot_product_attention(qm, km, vm, scale=float(scale), mask=m)
            return self._out(out)
        # Softcapping (or rows with nothing visible) needs the scores spelled out.
        group = Hq // Hkv
        scores = (qm.reshape(B, Hkv, group * L, d) @ km.swapaxes(-1, -2)) * float(scale)
        scores = scores.reshape(B, Hkv, group, L, S)
        if softcap is not None:
            scores = float(softcap) * mx.tanh(scores / float(softcap))
        scores = mx.where(mx.array(hidden), -mx.inf, scores)
        if add is not None:
            scores = scores + mx.broadcast_to(add, (B, Hq, L, S)).reshape(B, Hkv, group, L, S)
        probs = _softmax(mx, scores, -1).reshape(B, Hkv, group * L, S)
        return self._out((probs @ vm).reshape(B, Hq, L, d))

    # --- elementwise -------------------------------------------------------------
    def _act(self, xm, kind: str):
        mx = self.mx
        if kind == "silu":
            return xm * mx.sigmoid(xm)
        if kind == "relu":
            return mx.maximum(xm, 0.0)
        if kind == "gelu":
            return 0.5 * xm * (1.0 + mx.erf(xm * (1.0 / math.sqrt(2.0))))
        if kind == "gelu_tanh":
            c = math.sqrt(2.0 / math.pi)
            return 0.5 * xm * (1.0 + mx.tanh(c * (xm + 0.044715 * xm * xm * xm)))
        raise KernelArgumentError(f"unknown activation '{kind}'")

    def activation(self, x, kind):
        return self._out(self._act(self._in(x), kind))

    def gated_activation(self, gate, up, kind):
        return self._out(self._act(self._in(gate), kind) * self._in(up))

    def softmax(self, x, axis=-1):
        return self._out(_softmax(self.mx, self._in(x), axis))

    def hadamard(self, x, block_size):
        return self._out(hadamard_blocks(self.mx, self._in(x), int(block_size)))

    def conv1d(self, x, weight, bias=None, *, stride=1, padding=0, groups=1):
        mx = self.mx
        xm = self._in(x).swapaxes(1, 2)  # MLX is channels-last: (B, T, C_in)
        wm = self._weights.get(weight, "conv", lambda w: self._float(w).astype(mx.float32).swapaxes(1, 2))
        y = mx.conv1d(xm, wm, stride=int(stride), padding=int(padding), groups=int(groups))
        if bias is not None:
            y = y + self._vector(bias, y.shape[-1], "conv1d bias")
        return self._out(y.swapaxes(1, 2))


def _softmax(mx, x, axis: int):
    """Softmax whose rows of all ``-inf`` come out as zeros (as numpy_ref), not NaN."""
    m = mx.max(x, axis=axis, keepdims=True)
    m = mx.where(mx.isfinite(m), m, 0.0)
    e = mx.exp(x - m)
    s = mx.sum(e, axis=axis, keepdims=True)
    return e / mx.where(s == 0, 1.0, s)


def hadamard_blocks(mx, x, block_size: int):
    """Orthonormal Sylvester-order Hadamard transform of each ``block_size`` block of the last axis.

    ``mx.hadamard_transform`` uses the same natural order and scales by
    ``1/sqrt(n)`` by default, which makes it its own inverse like the reference.
    """
    n = x.shape[-1]
    if block_size < 1 or block_size & (block_size - 1) or n % block_size:
        raise KernelArgumentError(f"hadamard block {block_size} must be a power of two dividing {n}")
    if block_size == 1:
        return x
    y = x.reshape(-1, n // block_size, block_size)
    return mx.hadamard_transform(y, scale=1.0 / math.sqrt(block_size)).reshape(x.shape)


def create() -> MlxBackend:
    """Factory registered by the plugin."""
    return MlxBackend()
