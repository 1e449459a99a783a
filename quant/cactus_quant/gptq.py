"""GPTQ (Frantar et al. 2022): quantize column by column, feeding each column's
rounding error forward into the columns not yet quantized, weighted by the
inverse Hessian of the layer's output error.

For a linear layer with calibration inputs ``X`` (tokens, in), the output error
of a weight change ``dW`` is ``||X dW^T||^2 = tr(dW H dW^T) / 2`` with
``H = 2 X^T X``.  Steps: dampen ``H`` (``+ damp * mean(diag H) * I``), take the
upper Cholesky factor ``U`` of ``H^-1``, then for each column ``i`` round it on
its group's affine grid and subtract ``err_i * U[i, i:] / U[i, i]`` from the
remaining columns.  Updates are applied inside blocks of 128 columns and to the
rest of the matrix once per block ("lazy batch updates"), which is what makes it
fast.  The output is the ordinary int4/int8 affine group format.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from cactus_core.errors import QuantizationError

from .cq import check_matrix, pow2_divisor
from .rtn import INT_FORMATS, affine_codes, affine_grid, make_int_tensor


def hessian(x: np.ndarray) -> np.ndarray:
    """``H = 2 X^T X / tokens`` from calibration activations ``x`` (..., in)."""
    x = np.asarray(x, dtype=np.float64).reshape(-1, np.shape(x)[-1])
    return 2.0 * (x.T @ x) / max(len(x), 1)


def hessian_from(x_or_h: np.ndarray, n: int, is_hessian: Optional[bool]) -> np.ndarray:
    """A float64 Hessian ``(n, n)`` from activations or a Hessian (see :func:`gptq_quantize`)."""
    a = np.asarray(x_or_h, dtype=np.float64)
    if a.shape[-1] != n:
        raise QuantizationError(f"GPTQ calibration has {a.shape[-1]} features, the weight takes {n}")
    if is_hessian is None:
        is_hessian = a.shape == (n, n) and np.allclose(a, a.T)
    return a.copy() if is_hessian else hessian(a)


def inverse_cholesky(h: np.ndarray, damp: float) -> np.ndarray:
    """Upper ``U`` with ``(H + damp * mean(diag H) * I)^-1 = U^T U`` (modifies ``h``)."""
    h[np.diag_indices(len(h))] += damp * np.mean(np.diag(h))
    try:
        hinv = np.linalg.inv(h)
        return np.linalg.cholesky((hinv + hinv.T) / 2).T
    except np.linalg.LinAlgError:
        raise QuantizationError("GPTQ Hessian is not positive definite; raise damp") from None


def gptq_quantize(
    w: np.ndarray,
    x_or_h: np.ndarray,
    bits: int = 4,
    group_size: int = 128,
    damp: float = 0.01,
    block_size: int = 128,
    is_hessian: Optional[bool] = None,
):
    """Quantize ``w`` (out, in) with GPTQ given calibration activations or a Hessian.

    ``x_or_h`` is either activations ``(tokens, in)`` (any leading shape) or the
    Hessian ``(in, in)``; a symmetric square ``(in, in)`` array is taken as a
    Hessian unless ``is_hessian`` says otherwise.  Returns an int4/int8 tensor.
    """
    if bits not in INT_FORMATS:
        raise QuantizationError(f"GPTQ supports 4 or 8 bits, not {bits}")
    w = np.array(check_matrix("weight", w), dtype=np.float64)
    out, n = w.shape
    h = hessian_from(x_or_h, n, is_hessian)
    dead = np.diag(h) == 0  # inputs never seen: their weights cannot matter
    h[dead, dead] = 1.0
    w[:, dead] = 0.0
    u = inverse_cholesky(h, damp)

    group = pow2_divisor(n, group_size)
    block = group * max(1, block_size // group)  # groups never straddle blocks
    codes = np.zeros((out, n), dtype=np.int32)
    scales = np.zeros((out, n // group), dtype=np.float16)
    biases = np.zeros((out, n // group), dtype=np.float16)
    for i1 in range(0, n, block):
        i2 = min(i1 + block, n)
        w1 = w[:, i1:i2].copy()
        err1 = np.zeros_like(w1)
        u1 = u[i1:i2, i1:i2]
        for i in range(i2 - i1):
            col = i1 + i
            if col % group == 0:  # this group's grid from the error-updated weights
                s, b = affine_grid(w1[:, i : i + group], bits)
                scales[:, col // group], biases[:, col // group] = s, b
            s = scales[:, col // group].astype(np.float64)
            b = biases[:, col // group].astype(np.float64)
            q = affine_codes(w1[:, i], s, b, bits)
            codes[:, col] = q
            e = (w1[:, i] - (s * q + b)) / u1[i, i]
            w1[:, i:] -= np.outer(e, u1[i, i:])
            err1[:, i] = e
        w[:, i2:] -= err1 @ u[i1:i2, i2:]
    return make_int_tensor(codes, scales, biases, bits, group)


class GPTQQuantizer:
    """``gptq4``: GPTQ into the int4 group-128 format; needs calibration data.

    ``quantize(name, w, calibration=X)`` or ``quantize(name, w, hessian=H)``.
    """

    def __init__(self, name: str, bits: int = 4, group_size: int = 128):
        self.name, self.bits, self.group_size = name, bits, group_size

    @property
    def bits_per_weight(self) -> float:
        return self.bits + 32.0 / self.group_size

    def quantize(self, name: str, array: Any, **options: Any):
        calib, hess = options.pop("calibration", None), options.pop("hessian", None)
        unknown = sorted(set(options) - {"group_size", "damp"})
        if unknown:
            raise QuantizationError(f"{self.name}: unknown option(s) {', '.join(unknown)}")
        if (calib is None) == (hess is None):
            raise QuantizationError(
                f"{self.name} needs exactly one of calibration=<activations> or hessian=<H> for '{name}'"
            )
        w = check_matrix(name, array)
        return gptq_quantize(
            w,
            hess if hess is not None else calib,
            bits=self.bits,
            group_size=options.get("group_size", self.group_size),
            damp=options.get("damp", 0.01),
            is_hessian=hess is not None,
        )
