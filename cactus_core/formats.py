"""Tensor formats: the contract between weight files, quantizers and kernels.

Plain float tensors are numpy arrays (``float32``/``float16``).  numpy has no
bfloat16, so bf16 tensors are :class:`BFloat16` views over the raw 16-bit
words, still memory-mapped.  Quantized tensors are :class:`QuantizedTensor`
subclasses, one per format, whose fields are the named safetensors entries of
a bundle (docs/formats.md describes every byte so kernels can be written from
it alone).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np


class BFloat16:
    """A bfloat16 tensor kept as its raw ``uint16`` words (zero-copy over the mmap)."""

    format = "bfloat16"

    def __init__(self, raw: np.ndarray):
        if raw.dtype != np.uint16:
            raise TypeError("BFloat16 wraps uint16 words")
        self.raw = raw

    @property
    def shape(self) -> tuple[int, ...]:
        return self.raw.shape

    @property
    def nbytes(self) -> int:
        return self.raw.nbytes

    def __getitem__(self, idx) -> np.ndarray:
        return bf16_to_f32(self.raw[idx])

    def to_float32(self) -> np.ndarray:
        return bf16_to_f32(self.raw)


def bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    """Widen bfloat16 words to float32 exactly (bf16 is the top half of an f32)."""
    return (np.asarray(raw, dtype=np.uint32) << 16).view(np.float32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 words, round-to-nearest-even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounding = ((u >> 16) & 1) + 0x7FFF
    return ((u + rounding) >> 16).astype(np.uint16)


class QuantizedTensor:
    """Base class of every quantized format.

    A subclass sets ``format`` (the name kernels dispatch on), lists its
    safetensors entries in ``fields`` (stored as ``<tensor name>.<field>``), and
    implements :meth:`dequantize`, the reference every kernel is tested
    against.  ``shape`` is the logical ``(out, in)`` shape.
    """

    format: ClassVar[str] = "quantized"
    fields: ClassVar[tuple[str, ...]] = ()

    def __init__(self, shape: tuple[int, ...], meta: dict[str, Any], **arrays: np.ndarray):
        self.shape = tuple(int(s) for s in shape)
        self.meta = dict(meta)
        for name in self.fields:
            if name not in arrays:
                raise ValueError(f"{self.format} tensor is missing its '{name}' entry")
        self.arrays = arrays

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())

    @property
    def bits_per_weight(self) -> float:
        """True storage cost: every code, scale and table byte over the weight count."""
        return 8.0 * self.nbytes / float(np.prod(self.shape))

    def dequantize(self) -> np.ndarray:
        """The float32 ``(out, in)`` matrix this tensor stands for."""
        raise NotImplementedError

    def matmul_input_transform(self, x: np.ndarray) -> np.ndarray:
        """Transform applied to activations before multiplying (identity unless rotated)."""
        return x


#: format name -> QuantizedTensor subclass; quantizer packages add theirs.
QUANTIZED_FORMATS: dict[str, type[QuantizedTensor]] = {}


def register_format(cls: type[QuantizedTensor]) -> type[QuantizedTensor]:
    """Class decorator that makes a quantized format loadable from bundles."""
    QUANTIZED_FORMATS[cls.format] = cls
    return cls


def to_float32(w: Any) -> np.ndarray:
    """Any weight (ndarray, BFloat16, QuantizedTensor) as a float32 ndarray."""
    if isinstance(w, np.ndarray):
        return w if w.dtype == np.float32 else w.astype(np.float32)
    if isinstance(w, BFloat16):
        return w.to_float32()
    if isinstance(w, QuantizedTensor):
        return w.dequantize()
    raise TypeError(f"unsupported weight type {type(w).__name__}")
