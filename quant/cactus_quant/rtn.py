"""Round-to-nearest affine integer baselines (``int4``/``int8``, group 128).

Each group of the input dimension gets ``scale = (max - min) / (2**bits - 1)``
and ``bias = min`` (both float16), and ``q = round((w - bias) / scale)``.  The
same affine grid is what GPTQ (gptq.py) writes, with error feedback instead of
independent rounding.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cactus_core.errors import QuantizationError
from cactus_core.formats import Int4Tensor, Int8Tensor, QuantizedTensor, pack_bits

from .cq import check_matrix, pow2_divisor

INT_FORMATS = {4: Int4Tensor, 8: Int8Tensor}


def affine_grid(groups: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """float16 ``(scale, bias)`` over the last axis of ``groups`` (min/max range)."""
    lo, hi = groups.min(axis=-1), groups.max(axis=-1)
    scale = np.asarray((hi - lo) / ((1 << bits) - 1), dtype=np.float16)
    scale = np.where(scale > 0, scale, np.float16(1.0))  # constant group: q = 0, w = bias
    return scale.astype(np.float16), np.asarray(lo, dtype=np.float16)


def affine_codes(w: np.ndarray, scale: np.ndarray, bias: np.ndarray, bits: int) -> np.ndarray:
    """``clip(round((w - bias) / scale))`` with the stored (float16) scale and bias."""
    s, b = scale.astype(np.float64), bias.astype(np.float64)
    return np.clip(np.rint((w - b) / s), 0, (1 << bits) - 1).astype(np.int32)


def make_int_tensor(codes: np.ndarray, scales: np.ndarray, biases: np.ndarray, bits: int, group: int) -> QuantizedTensor:
    """Pack integer codes ``(out, in)`` and their group grids into an int4/int8 tensor."""
    out, n = codes.shape
    return INT_FORMATS[bits](
        (out, n),
        {"group_size": group},
        codes=pack_bits(codes, bits),
        scales=np.ascontiguousarray(scales, dtype=np.float16),
        biases=np.ascontiguousarray(biases, dtype=np.float16),
    )


def rtn_quantize(w: np.ndarray, bits: int = 4, group_size: int = 128) -> QuantizedTensor:
    """Round-to-nearest affine quantization of a float ``(out, in)`` matrix."""
    if bits not in INT_FORMATS:
        raise QuantizationError(f"RTN supports 4 or 8 bits, not {bits}")
    w = np.asarray(w, dtype=np.float32)
    out, n = w.shape
    group = pow2_divisor(n, group_size)
    groups = w.reshape(out, n // group, group)
    scale, bias = affine_grid(groups, bits)
    codes = affine_codes(groups, scale[..., None], bias[..., None], bits).reshape(out, n)
    return make_int_tensor(codes, scale, bias, bits, group)


class RTNQuantizer:
    """``rtn4`` / ``rtn8``: the round-to-nearest group-128 baselines."""

    def __init__(self, name: str, bits: int, group_size: int = 128):
        self.name, self.bits, self.group_size = name, bits, group_size

    @property
    def bits_per_weight(self) -> float:
        """Codes plus a float16 scale and bias per group."""
        return self.bits + 32.0 / self.group_size

    def quantize(self, name: str, array: Any, **options: Any) -> QuantizedTensor:
        """Quantize one weight; option ``group_size`` overrides the default 128."""
        unknown = sorted(set(options) - {"group_size"})
        if unknown:
            raise QuantizationError(f"{self.name}: unknown option(s) {', '.join(unknown)}")
        return rtn_quantize(check_matrix(name, array), self.bits, options.get("group_size", self.group_size))
