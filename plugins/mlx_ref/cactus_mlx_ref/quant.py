"""Quantized ``linear`` on MLX: the formats of cactus_core.formats, run as stored.

The choice (docs/mlx_ref.md): quantized weights stay quantized.  Their codes,
scales and tables are copied into MLX once; each call dequantizes a block of
rows to float32 *inside MLX* and multiplies it, so results equal numpy_ref's
``dequantize()`` path up to float32 summation order, and the model keeps its
quantized RAM size (plus one float32 block of at most ``BLOCK_BYTES``).
Nothing is re-quantized or rounded to float16: model quality is unchanged.

- ``cq``: activations get the format's rotation ``H_b(x * s)`` once, then each
  row block is rebuilt as ``codebook[idx] * scale`` in the rotated domain;
- ``int4``/``int8``: MLX's own affine format is bit-identical to ours (codes
  packed little-endian, first value in the lowest bits; ``w = scale*q + bias``),
  so those run through ``mx.quantized_matmul`` when MLX supports the group
  size, and through the same dequantize-a-block path otherwise.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cactus_core.formats import QuantizedTensor

#: Largest float32 block of dequantized rows materialised at once.
BLOCK_BYTES = 16 << 20
#: Group sizes and bit widths mx.quantized_matmul accepts.
_MLX_AFFINE_GROUPS = (32, 64, 128)


def _unpack(mx, codes, bits: int, count: int, gather):
    """Codes ``(rows, bytes)`` uint8 -> ``(rows, count)`` uint32 indices (formats.pack_bits layout)."""
    if bits == 8:
        return codes[:, :count].astype(mx.uint32)
    if bits == 4:
        c = codes.astype(mx.uint32)
        return mx.stack([c & 15, c >> 4], axis=-1).reshape(c.shape[0], -1)[:, :count]
    # General widths: code j starts at stream bit j*bits and spans at most three
    # bytes (bits <= 16, shift <= 7), so gather those bytes and shift.
    first, shift = gather
    c = codes.astype(mx.uint32)
    word = mx.take(c, first, axis=1) | (mx.take(c, first + 1, axis=1) << 8) | (mx.take(c, first + 2, axis=1) << 16)
    return (word >> shift) & ((1 << bits) - 1)


def _gather_plan(mx, bits: int, count: int):
    offsets = np.arange(count, dtype=np.int64) * bits
    return mx.array((offsets >> 3).astype(np.int32)), mx.array((offsets & 7).astype(np.uint32))


class _Prepared:
    """A quantized tensor's arrays in MLX plus what its kernel needs to know."""

    def __init__(self, backend, w: QuantizedTensor):
        mx = backend.mx
        self.format = w.format
        self.out, self.n = w.shape
        meta = w.meta
        codes = np.asarray(w.arrays["codes"])
        # Two zero bytes per row let the general unpack read past the last code.
        self.codes = mx.array(np.pad(codes, ((0, 0), (0, 2))))
        self.scales = mx.array(np.asarray(w.arrays["scales"], dtype=np.float32))
        self.group = int(meta["group_size"])
        self.affine = None
        if w.format == "cq":
            self.bits, self.vec_dim = int(meta["index_bits"]), int(meta["vec_dim"])
            self.block = int(meta["block_size"])
            self.codebook = mx.array(np.asarray(w.arrays["codebook"], dtype=np.float32))
            signs = np.unpackbits(np.asarray(w.arrays["signs"]), bitorder="little")
            self.signs = mx.array((1.0 - 2.0 * signs).astype(np.float32))
        else:  # int4 / int8
            self.bits, self.vec_dim = int(w.bits), 1
            self.biases = mx.array(np.asarray(w.arrays["biases"], dtype=np.float32))
            if self.group in _MLX_AFFINE_GROUPS and self.n % (32 // self.bits) == 0:
                # Same bits, same order: reinterpret the bytes as MLX's uint32 words,
                # and keep no second (byte) copy of the codes.
                self.affine = mx.array(np.ascontiguousarray(codes).view(np.uint32))
                self.codes = None
        self.count = self.n // self.vec_dim
        self.gather = _gather_plan(mx, self.bits, self.count) if self.bits not in (4, 8) else None
        mx.eval(*[a for a in vars(self).values() if isinstance(a, mx.array)])

    def rows(self, mx, r0: int, r1: int):
        """Dequantized rows ``[r0, r1)`` as float32 ``(r1 - r0, n)`` (rotated domain for cq)."""
        idx = _unpack(mx, self.codes[r0:r1], self.bits, self.count, self.gather)
        G = self.n // self.group
        if self.format == "cq":
            vals = mx.take(self.codebook, idx, axis=0).reshape(r1 - r0, G, self.group)
            return (vals * self.scales[r0:r1, :, None]).reshape(r1 - r0, self.n)
        q = idx.astype(mx.float32).reshape(r1 - r0, G, self.group)
        return (q * self.scales[r0:r1, :, None] + self.biases[r0:r1, :, None]).reshape(r1 - r0, self.n)


def prepared(backend, w: QuantizedTensor) -> _Prepared:
    """The cached MLX form of ``w`` (built on first use or by ``Backend.prepare``)."""
    return backend._weights.get(w, "q", lambda w: _Prepared(backend, w))


def linear(backend, x, w: QuantizedTensor) -> Any:
    """``x @ W.T`` for quantized ``w``; x is float32 MLX ``(M, in)``; returns ``(M, out)``."""
    from .backend import hadamard_blocks

    mx = backend.mx
    p = prepared(backend, w)
    if p.affine is not None:
        return mx.quantized_matmul(x, p.affine, p.scales, p.biases, transpose=True,
                                   group_size=p.group, bits=p.bits)
    if p.format == "cq":
        x = hadamard_blocks(mx, x * p.signs, p.block)
    step = max(1, BLOCK_BYTES // (4 * p.n))
    if step >= p.out:
        return x @ p.rows(mx, 0, p.out).T
    parts = []
    for r0 in range(0, p.out, step):
        part = x @ p.rows(mx, r0, min(p.out, r0 + step)).T
        mx.eval(part)  # bound the live float32 block to BLOCK_BYTES
        parts.append(part)
    return mx.concatenate(parts, axis=1)
