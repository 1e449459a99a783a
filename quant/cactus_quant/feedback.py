"""CQ with error feedback: GPTQ's column-by-column compensation in the rotated basis.

The same format as plain CQ (rotation, codebook, group scales) but the codes are
chosen knowing which input directions the layer actually sees.  With the
rotation ``R`` (``x' = R x``), the layer's output error for a rotated-weight
change ``dW'`` is ``tr(dW' H' dW'^T) / 2`` with ``H' = R H R^T``; GPTQ on ``W'``
and ``H'`` minimises it.  Vectors of ``vec_dim`` columns are coded together
(nearest codeword of the error-updated columns), then each column's residual is
fed forward in turn, so the compensation stays exact for what was chosen (the
vector variant of GPTQ that QuIP# calls LDLQ).

Calibration-free in the product sense: the lead feeds activations from text the
model generates itself; nothing here needs a dataset.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict

import numpy as np

from cactus_core.errors import QuantizationError
from cactus_core.formats import CQTensor, pack_bits

from .codebooks import nearest, scalar_codebook
from .cq import DEFAULT_SEED, MAX_BLOCK, choose_group, encode_groups, make_cq_tensor, pow2_divisor, rotate_rows
from .fit import fit_codebook
from .gptq import hessian_from, inverse_cholesky


def rotate_hessian(h: np.ndarray, block: int, seed: int) -> np.ndarray:
    """``R H R^T`` for the CQ rotation ``R`` (applied to rows, then to columns)."""
    hr = rotate_rows(h.astype(np.float32), block, seed)
    return rotate_rows(np.ascontiguousarray(hr.T), block, seed).astype(np.float64)


class FactorCache:
    """The last few rotated, damped inverse-Cholesky factors, keyed by the Hessian's bytes.

    q/k/v read one input and so do gate/up: their Hessians are equal, and the
    factor (an ``in x in`` inversion and Cholesky, the costly step on wide
    layers) is the same.  Keying on the content rather than the array object
    keeps it right whoever built the Hessians; two entries per kind (factor, damped Hessian) cover a
    checkpoint's tensor order (k, o, q, v: o_proj sits between the shared ones).
    """

    def __init__(self, size: int = 4):
        self.size, self.hits, self.misses = size, 0, 0
        self._factors: OrderedDict[tuple, np.ndarray] = OrderedDict()

    def factor(self, h: np.ndarray, block: int, seed: int, damp: float) -> np.ndarray:
        """Upper ``U`` with ``U^T U = (R H R^T + damp * mean diag * I)^-1`` (read-only)."""
        return self._get(h, block, seed, damp, "factor", lambda hr: inverse_cholesky(hr, damp))

    def damped(self, h: np.ndarray, block: int, seed: int, damp: float) -> np.ndarray:
        """``R H R^T + damp * mean diag * I`` itself (read-only), for refine.py."""

        def add(hr: np.ndarray) -> np.ndarray:
            hr[np.diag_indices(len(hr))] += damp * np.mean(np.diag(hr))
            return hr

        return self._get(h, block, seed, damp, "damped", add)

    def _get(self, h, block, seed, damp, kind, make) -> np.ndarray:
        h = np.ascontiguousarray(h, dtype=np.float64)
        key = (hashlib.blake2b(h.data, digest_size=16).digest(), h.shape, block, seed, float(damp), kind)
        u = self._factors.get(key)
        if u is not None:
            self.hits += 1
            self._factors.move_to_end(key)
            return u
        self.misses += 1
        u = make(rotate_hessian(h, block, seed))
        u.flags.writeable = False  # shared between tensors
        self._factors[key] = u
        while len(self._factors) > self.size:
            self._factors.popitem(last=False)
        return u

    def clear(self) -> None:
        self._factors.clear()
        self.hits = self.misses = 0


#: Shared by every feedback quantization in the process.
FACTORS = FactorCache()


def cq_quantize_feedback(
    w: np.ndarray,
    x_or_h: np.ndarray,
    index_bits: int,
    vec_dim: int,
    group_size: int = 128,
    max_block: int = MAX_BLOCK,
    seed: int = DEFAULT_SEED,
    scale_iters: int = 3,
    scale_search: int = 0,
    fit_iters: int = 0,
    levels: str = "gaussian",
    damp: float = 0.3,
    is_hessian: bool | None = None,
    refine: int = 0,
) -> CQTensor:
    """Quantize ``w`` (out, in) to a :class:`CQTensor` with GPTQ-style error feedback.

    ``damp`` (times the mean of diag H) is 0.3 rather than GPTQ's usual 0.01: a
    few thousand calibration tokens (``--calibrate``'s 16 self-written samples,
    the MiniLM benchmark's 64 sentences) pin the Hessian down only roughly.
    ``cactus convert``'s own self-calibration reads ~16K tokens and passes 0.03
    (calibrate.SELF_DAMP); both measured in docs/quantization.md.  ``refine`` rounds of
    coordinate descent on the codes and least-squares scales follow (refine.py; scalar
    codebooks only).
    """
    w = np.asarray(w, dtype=np.float32)
    out, n = w.shape
    block = pow2_divisor(n, max_block)
    group = choose_group(n, group_size, vec_dim)
    if group % vec_dim:
        raise QuantizationError(f"group {group} is not a multiple of the vector size {vec_dim}")
    if refine and vec_dim != 1:
        raise QuantizationError(f"refine runs on scalar codebooks only, not {vec_dim}-vectors")
    h = hessian_from(x_or_h, n, is_hessian)
    u = FACTORS.factor(h, block, seed, damp)
    wr = rotate_rows(w, block, seed).astype(np.float64)
    w0 = wr.copy() if refine else None  # GPTQ updates wr in place
    codebook = scalar_codebook(index_bits, vec_dim, levels).astype(np.float16)
    if fit_iters:  # fitted to the weights as they are; feedback then codes around it
        groups = wr.astype(np.float32).reshape(out, n // group, group)
        codebook = fit_codebook(groups, codebook.astype(np.float32), fit_iters, scale_search).astype(np.float16)
    cb = codebook.astype(np.float32)

    idx = np.zeros((out, n // vec_dim), dtype=np.int32)
    scales = np.zeros((out, n // group), dtype=np.float16)
    for g0 in range(0, n, group):  # one group = one lazy-update block
        g1 = g0 + group
        w1 = wr[:, g0:g1].copy()
        err1 = np.zeros_like(w1)
        u1 = u[g0:g1, g0:g1]
        # the group's scale from its error-updated weights, fixed for the group
        _, sc = encode_groups(w1[:, None, :].astype(np.float32), cb, scale_iters, scale_search)
        scales[:, g0 // group] = sc[:, 0]
        s = sc[:, 0].astype(np.float64)
        safe = np.where(s > 0, s, 1.0)[:, None]
        for i in range(0, group, vec_dim):
            k = nearest((w1[:, i : i + vec_dim] / safe).astype(np.float32), cb)
            idx[:, (g0 + i) // vec_dim] = k
            q = cb[k].astype(np.float64) * s[:, None]
            for j in range(i, i + vec_dim):
                e = (w1[:, j] - q[:, j - i]) / u1[j, j]
                w1[:, j:] -= np.outer(e, u1[j, j:])
                err1[:, j] = e
        wr[:, g1:] -= err1 @ u[g0:g1, g1:]
    if refine:
        from .refine import refine as refine_codes

        idx, scales = refine_codes(w0, FACTORS.damped(h, block, seed, damp), idx, scales, cb[:, 0], group, refine)
    meta = {"index_bits": index_bits, "vec_dim": vec_dim, "group_size": group, "block_size": block, "seed": seed}
    return make_cq_tensor((out, n), meta, pack_bits(idx, index_bits), scales, codebook)
