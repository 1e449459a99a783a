"""The ``metal`` backend: the MSL kernels of kernels.py, dispatched through MLX.

``mx.fast.metal_kernel`` compiles each kernel once, binds MLX arrays as Metal
buffers and schedules the dispatch on MLX's GPU stream, so these kernels share
buffers and command queues with everything else MLX runs (docs/metal.md says
why this beats driving Metal through PyObjC).

Ops here: quantized ``linear`` for the cq format (matrix-vector and tiled
matrix-matrix), ``attention`` over the KV cache, ``rms_norm``, ``rope`` and
``gated_activation``.  Every other op and weight format falls back through
:class:`cactus_core.graph.Ops` to the next backend (mlx_ref runs float matmuls
on the same GPU through MLX).

UNTESTED ON HARDWARE: see docs/metal.md.
"""

from __future__ import annotations

import weakref
from typing import Any, Optional

import numpy as np

from cactus_core.errors import BackendError
from cactus_core.formats import to_float32
from cactus_core.graph import Backend

from . import kernels as K

_NEED = "needs macOS on Apple silicon"


def unavailable_reason(device) -> Optional[str]:
    """None when Metal kernels can run here, else one line saying why not."""
    if not getattr(device, "apple_silicon", False):
        return f"{_NEED}; this device is {device.os} {device.arch}"
    try:
        import mlx.core as mx
    except Exception:
        return "mlx is not installed: pip install mlx"
    if not mx.metal.is_available():
        return "MLX reports no Metal GPU on this Mac"
    return None


class MetalBackend(Backend):
    """Metal kernels for the hot ops of decoding (name ``metal``)."""

    name = "metal"
    formats = frozenset({"cq"})  # float matmuls fall back to MLX's own GEMM via mlx_ref

    def __init__(self):
        import mlx.core as mx

        self.mx = mx
        self._built: dict[str, Any] = {}
        self._cq: dict[int, tuple] = {}

    def supports(self, op: str, fmt: Optional[str] = None) -> bool:
        if op == "linear":
            return fmt == "cq"
        return super().supports(op, None)

    # --- plumbing ----------------------------------------------------------------
    def kernel(self, name: str):
        """The compiled kernel ``name`` (built on first use)."""
        k = self._built.get(name)
        if k is None:
            spec = K.KERNELS[name]
            k = self._built[name] = self.mx.fast.metal_kernel(
                name=spec.name, input_names=list(spec.inputs), output_names=list(spec.outputs),
                source=spec.source, header=spec.header)
        return k

    def launch(self, launch: K.Launch, inputs: list, output_shape: tuple):
        """Run one dispatch and return its single float32 output (lazy MLX array)."""
        return self.kernel(launch.kernel)(
            inputs=inputs, template=list(launch.template), grid=launch.grid,
            threadgroup=launch.threadgroup, output_shapes=[tuple(output_shape)],
            output_dtypes=[self.mx.float32])[0]

    def _in(self, x):
        return self.mx.array(np.ascontiguousarray(x, dtype=np.float32))

    def _out(self, y) -> np.ndarray:
        self.mx.eval(y)
        return np.ascontiguousarray(np.asarray(y))

    # --- quantized linear ----------------------------------------------------------
    def _prepared(self, w):
        """The cq tensor's fields on the GPU, uploaded once and dropped with the tensor."""
        hit = self._cq.get(id(w))
        if hit is not None:
            return hit[1]
        mx = self.mx
        signs = np.unpackbits(np.asarray(w.arrays["signs"]), bitorder="little")
        p = dict(
            codes=mx.array(np.pad(np.asarray(w.arrays["codes"]), ((0, 0), (0, 2)))),  # see cq_code
            scales=mx.array(np.asarray(w.arrays["scales"], dtype=np.float16)),
            codebook=mx.array(np.asarray(w.arrays["codebook"], dtype=np.float16)),
            signs=mx.array((1.0 - 2.0 * signs).astype(np.float32)),
        )
        key = id(w)
        self._cq[key] = (weakref.ref(w, lambda _r: self._cq.pop(key, None)), p)
        return p

    def prepare(self, w):
        if getattr(w, "format", None) == "cq":
            self._prepared(w)
        return w

    def linear(self, x, w, bias=None):
        if getattr(w, "format", None) != "cq":
            raise BackendError(f"metal runs only cq weights, not {getattr(w, 'format', type(w).__name__)}")
        mx = self.mx
        n_out, n = w.shape
        x = np.asarray(x)
        if x.shape[-1] != n:
            raise BackendError(f"linear: input has {x.shape[-1]} features, weight expects {n}")
        p, meta = self._prepared(w), w.meta
        xm = self._in(x.reshape(-1, n)) * p["signs"]
        b = int(meta["block_size"])
        if b > 1:  # the format's online rotation, on MLX's own GPU Hadamard kernel
            xm = mx.hadamard_transform(xm.reshape(-1, n // b, b), scale=b**-0.5).reshape(-1, n)
        rows = xm.shape[0]
        spec = K.cq_linear_launch(rows, n_out, int(meta["index_bits"]), int(meta["vec_dim"]),
                                  int(meta["group_size"]))
        y = self.launch(spec, [mx.contiguous(xm), p["codes"], p["scales"], p["codebook"]], (rows, n_out))
        if bias is not None:
            y = y + self._in(bias)
        return self._out(y).reshape(x.shape[:-1] + (n_out,))

    # --- norms, position, activations ------------------------------------------------
    def rms_norm(self, x, weight, eps, unit_offset=False):
        x = np.asarray(x)
        D = x.shape[-1]
        rows = x.size // max(D, 1)
        w = self._in(to_float32(weight).reshape(-1))
        eps_arr = self.mx.array([float(eps)], dtype=self.mx.float32)
        y = self.launch(K.rms_norm_launch(rows, unit_offset), [self._in(x.reshape(rows, D)), w, eps_arr], (rows, D))
        return self._out(y).reshape(x.shape)

    def rope(self, x, positions, inv_freq):
        x = np.asarray(x)
        hd, L = x.shape[-1], x.shape[-2]
        angles = np.outer(np.asarray(positions, dtype=np.float64), np.asarray(inv_freq, dtype=np.float64))
        if 2 * angles.shape[1] > hd or angles.shape[0] != L:
            raise BackendError(f"rope: {angles.shape[0]} positions / rotary dim {2 * angles.shape[1]} "
                               f"do not fit x of shape {x.shape}")
        rows = x.size // hd
        cos, sin = (self._in(f(angles)) for f in (np.cos, np.sin))  # float64 angles, as numpy_ref
        y = self.launch(K.rope_launch(rows, hd), [self._in(x.reshape(rows, hd)), cos, sin], (rows, hd))
        return self._out(y).reshape(x.shape)

    def gated_activation(self, gate, up, kind):
        if kind not in K.ACT_CODES:
            raise BackendError(f"unknown activation '{kind}'")
        gate = np.asarray(gate)
        g, u = self._in(gate.reshape(-1)), self._in(np.asarray(up).reshape(-1))
        y = self.launch(K.gated_activation_launch(g.size, kind), [g, u], (g.size,))
        return self._out(y).reshape(gate.shape)

    # --- attention ---------------------------------------------------------------
    def attention(self, q, k, v, *, scale, q_offset=0, causal=True, sliding_window=None,
                  softcap=None, mask=None):
        mx = self.mx
        B, Hq, L, d = q.shape
        if Hq % k.shape[1]:
            raise BackendError(f"attention: {Hq} query heads do not group over {k.shape[1]} KV heads")
        qm, km, vm = self._in(q), self._in(k), self._in(v)
        if mask is not None:
            return self._out(self._masked_attention(qm, km, vm, float(scale), q_offset, causal,
                                                    sliding_window, softcap, self._in(mask)))
        iparams = mx.array([int(q_offset), int(bool(causal)), int(sliding_window or 0)], dtype=mx.int32)
        fparams = mx.array([float(scale), float(softcap or 0.0)], dtype=mx.float32)
        y = self.launch(K.attention_launch(B, Hq, L, d), [qm, km, vm, iparams, fparams], (B, Hq, L, d))
        return self._out(y)

    def _masked_attention(self, q, k, v, scale, q_offset, causal, window, softcap, add):
        """Additive masks (padding in encoders) run as plain MLX ops; decoding never passes one."""
        mx = self.mx
        B, Hq, L, d = q.shape
        Hkv, S = k.shape[1], k.shape[2]
        g = Hq // Hkv
        s = (q.reshape(B, Hkv, g * L, d) @ k.swapaxes(-1, -2)).reshape(B, Hkv, g, L, S) * scale
        if softcap:
            s = softcap * mx.tanh(s / softcap)
        qpos, kpos = q_offset + np.arange(L)[:, None], np.arange(S)[None, :]
        hidden = (kpos > qpos) if causal else np.zeros((L, S), bool)
        if window is not None:
            hidden |= kpos <= qpos - window
        s = mx.where(mx.array(hidden), -mx.inf, s) + mx.broadcast_to(add, (B, Hq, L, S)).reshape(s.shape)
        m = mx.max(s, axis=-1, keepdims=True)
        e = mx.exp(s - mx.where(mx.isfinite(m), m, 0.0))
        tot = e.sum(axis=-1, keepdims=True)
        p = (e / mx.where(tot == 0, 1.0, tot)).reshape(B, Hkv, g * L, S)
        return (p @ v).reshape(B, Hq, L, d)


def create() -> MetalBackend:
    """Factory registered by the plugin (only where :func:`unavailable_reason` is None)."""
    return MetalBackend()
