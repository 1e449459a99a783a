"""Reference kernels in numpy: always present, lowest priority, the ground truth.

Every other backend is tested against these (tests/conformance.py).  They
favour clarity and float32 accuracy over speed, but avoid needless copies:
float16/bfloat16 and quantized weights are widened per call, never cached, so
a memory-mapped model stays memory-mapped.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

from ..formats import BFloat16, QuantizedTensor, to_float32
from ..graph import Backend


def _f32(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32)


def _erf(x: np.ndarray) -> np.ndarray:
    """erf by Abramowitz & Stegun 7.1.26 in float64: |error| < 1.5e-7, below float32 resolution here."""
    x = np.asarray(x, dtype=np.float64)
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))


class NumpyBackend(Backend):
    """The reference backend (name ``numpy_ref``)."""

    name = "numpy_ref"
    formats = None  # every format: float dtypes through to_float32, quantized through dequantize

    def linear(self, x, w, bias=None):
        x = _f32(x)
        if isinstance(w, QuantizedTensor):
            x = _f32(w.matmul_input_transform(x))
        # A 2-D product reaches BLAS directly; a stacked 3-D one loops over the batch.
        y = x.reshape(-1, x.shape[-1]) @ to_float32(w).T
        if bias is not None:
            y += to_float32(bias)
        return _f32(y).reshape(x.shape[:-1] + (y.shape[-1],))

    def embedding(self, table, ids):
        ids = np.asarray(ids, dtype=np.int64)
        if isinstance(table, QuantizedTensor):
            rows = table.dequantize_rows(ids.reshape(-1)) if hasattr(table, "dequantize_rows") else table.dequantize()[ids.reshape(-1)]
        elif isinstance(table, BFloat16):
            rows = table[ids.reshape(-1)]
        else:
            rows = np.asarray(table[ids.reshape(-1)], dtype=np.float32)
        return _f32(rows).reshape(ids.shape + (table.shape[-1],))

    def rms_norm(self, x, weight, eps, unit_offset=False):
        x = _f32(x)
        w = to_float32(weight)
        if unit_offset:
            w = w + 1.0
        var = np.mean(np.square(x, dtype=np.float32), axis=-1, keepdims=True)
        return _f32(x / np.sqrt(var + eps) * w)

    def layer_norm(self, x, weight, bias, eps):
        x = _f32(x)
        mean = x.mean(axis=-1, keepdims=True)
        var = np.mean(np.square(x - mean), axis=-1, keepdims=True)
        y = (x - mean) / np.sqrt(var + eps)
        if weight is not None:
            y = y * to_float32(weight)
        if bias is not None:
            y = y + to_float32(bias)
        return _f32(y)

    def rope(self, x, positions, inv_freq):
        x = _f32(x)
        half = inv_freq.shape[0]
        rot = 2 * half
        angles = np.outer(np.asarray(positions, dtype=np.float64), inv_freq.astype(np.float64))
        cos = np.cos(angles).astype(np.float32)  # (L, half)
        sin = np.sin(angles).astype(np.float32)
        x1 = x[..., :half]
        x2 = x[..., half:rot]
        out = np.empty_like(x)
        out[..., :half] = x1 * cos - x2 * sin
        out[..., half:rot] = x2 * cos + x1 * sin
        out[..., rot:] = x[..., rot:]
        return out

    def attention(
        self,
        q,
        k,
        v,
        *,
        scale,
        q_offset=0,
        causal=True,
        sliding_window=None,
        softcap=None,
        mask: Optional[np.ndarray] = None,
    ):
        q, k, v = _f32(q), _f32(k), _f32(v)
        B, Hq, L, d = q.shape
        Hkv, S = k.shape[1], k.shape[2]
        group = Hq // Hkv
        # Fold the query heads of one KV head together: (B, Hkv, group*L, d).
        qg = q.reshape(B, Hkv, group * L, d)
        scores = (qg @ k.transpose(0, 1, 3, 2)) * np.float32(scale)  # (B, Hkv, group*L, S)
        scores = scores.reshape(B, Hkv, group, L, S)
        if softcap is not None:
            scores = np.float32(softcap) * np.tanh(scores / np.float32(softcap))
        qpos = q_offset + np.arange(L)[:, None]
        kpos = np.arange(S)[None, :]
        hidden = np.zeros((L, S), dtype=bool)
        if causal:
            hidden |= kpos > qpos
        if sliding_window is not None:
            hidden |= kpos <= qpos - sliding_window
        scores = np.where(hidden, -np.inf, scores)
        if mask is not None:
            m = np.broadcast_to(_f32(mask), (B, Hq, L, S)).reshape(B, Hkv, group, L, S)
            scores = scores + m
        probs = self.softmax(scores, axis=-1).reshape(B, Hkv, group * L, S)
        out = (probs @ v).reshape(B, Hq, L, d)
        return _f32(out)

    def activation(self, x, kind):
        x = _f32(x)
        if kind == "silu":
            return _f32(x / (1.0 + np.exp(-x)))
        if kind == "relu":
            return np.maximum(x, 0.0)
        if kind == "gelu":
            return _f32(0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))))
        if kind == "gelu_tanh":
            c = math.sqrt(2.0 / math.pi)
            return _f32(0.5 * x * (1.0 + np.tanh(c * (x + 0.044715 * x**3))))
        raise ValueError(f"unknown activation '{kind}'")

    def gated_activation(self, gate, up, kind):
        return _f32(self.activation(gate, kind) * _f32(up))

    def softmax(self, x, axis=-1):
        x = _f32(x)
        m = np.max(x, axis=axis, keepdims=True)
        m = np.where(np.isfinite(m), m, 0.0)  # rows that are all -inf stay all zero
        e = np.exp(x - m)
        s = e.sum(axis=axis, keepdims=True)
        return _f32(e / np.where(s == 0, 1.0, s))

    def hadamard(self, x, block_size):
        x = _f32(x)
        n = x.shape[-1]
        if block_size & (block_size - 1) or n % block_size:
            raise ValueError(f"hadamard block {block_size} must be a power of two dividing {n}")
        y = x.reshape(-1, n // block_size, block_size).copy()
        h = 1
        while h < block_size:
            y = y.reshape(y.shape[0], y.shape[1], -1, 2, h)
            a, b = y[..., 0, :].copy(), y[..., 1, :].copy()
            y[..., 0, :], y[..., 1, :] = a + b, a - b
            y = y.reshape(y.shape[0], y.shape[1], block_size)
            h *= 2
        return _f32(y.reshape(x.shape) / np.float32(math.sqrt(block_size)))

    def conv1d(self, x, weight, bias=None, *, stride=1, padding=0, groups=1):
        x = _f32(x)
        w = to_float32(weight)
        B, Cin, T = x.shape
        Cout, cin_g, K = w.shape
        if padding:
            x = np.pad(x, ((0, 0), (0, 0), (padding, padding)))
        Tout = (x.shape[-1] - K) // stride + 1
        # Windows: (B, Cin, Tout, K), a strided view with no copy.
        win = np.lib.stride_tricks.sliding_window_view(x, K, axis=-1)[:, :, ::stride][:, :, :Tout]
        cout_g = Cout // groups
        out = np.empty((B, Cout, Tout), dtype=np.float32)
        for g in range(groups):
            xs = win[:, g * cin_g : (g + 1) * cin_g]  # (B, cin_g, Tout, K)
            ws = w[g * cout_g : (g + 1) * cout_g]  # (cout_g, cin_g, K)
            out[:, g * cout_g : (g + 1) * cout_g] = np.einsum("bctk,ock->bot", xs, ws)
        if bias is not None:
            out += to_float32(bias)[None, :, None]
        return out


def create(_: Any = None) -> NumpyBackend:
    """Factory registered by the built-in plugin."""
    return NumpyBackend()
