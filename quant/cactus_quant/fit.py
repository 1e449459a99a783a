"""Fitting CQ to the tensor at hand: searched group scales and a per-tensor codebook.

Both stay inside the ``cq`` format (float16 scale per group, float16 codebook per
tensor), so they cost no bits; they only spend conversion time.

**Scale search.**  Alternating nearest-codeword assignment with the least-squares
scale stops at the first local optimum, and a group's error is a jagged
function of its scale (every codeword boundary a group vector crosses is a
kink).  Trying a grid of candidate scales around the group RMS, keeping each
group's best, then one least-squares polish of the winner, lowers the rotated
weight error of the default model's matrices by 12% (measured:
docs/quantization.md).

**Codebook fitting.**  The Gaussian codebook is right for an ideal rotated
source; a real tensor's scale-normalised vectors are close to, not exactly,
Gaussian (a group of 80 normalised by its own RMS has bounded coordinates).
Lloyd's algorithm on the tensor itself, started from the Gaussian codebook,
alternates codes, scales and centroids; the centroid of a cell is weighted by
the squared scales of its members, since the error it pays is ``s^2 |u - c|^2``
for a normalised vector ``u``.
"""

from __future__ import annotations

import numpy as np

from .codebooks import nearest

#: Candidate scales span the group RMS times [1 - SPAN, 1 + SPAN]; spans of
#: 20-40% were measured, and the wider ones gain under 1% more.
SPAN = 0.25


def _f16(x: np.ndarray) -> np.ndarray:
    """Round to the stored precision (float16) and back, so errors are judged as stored."""
    return np.asarray(x, dtype=np.float16).astype(np.float32)


def _assign(groups: np.ndarray, scale: np.ndarray, cb: np.ndarray, exact: bool) -> tuple[np.ndarray, np.ndarray]:
    """Codes of every group at ``scale`` and their squared error per group."""
    rows, ng, g = groups.shape
    d = cb.shape[1]
    safe = np.where(scale > 0, scale, 1.0).astype(np.float32)
    idx = nearest((groups / safe[..., None]).reshape(-1, d), cb, exact=exact).reshape(rows, ng, g // d)
    err = groups - cb[idx].reshape(rows, ng, g) * scale[..., None]
    return idx, np.einsum("rgk,rgk->rg", err, err)


def search_scales(
    groups: np.ndarray, cb: np.ndarray, candidates: int, exact: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Code ``groups`` (rows, n_groups, g) choosing each group's scale by search.

    ``candidates`` scales from ``rms * (1 - SPAN)`` to ``rms * (1 + SPAN)``, then the
    least-squares scale of the winning codes; a group keeps whichever had the
    smallest error as stored (float16).  Returns ``(idx int32, scales float16)``.
    """
    rms = np.sqrt(np.mean(groups * groups, axis=-1))
    best_err = np.full(rms.shape, np.inf, dtype=np.float32)
    best_idx = np.zeros(groups.shape[:2] + (groups.shape[2] // cb.shape[1],), dtype=np.int32)
    best_scale = np.zeros_like(rms)

    def consider(scale: np.ndarray) -> None:
        idx, err = _assign(groups, scale, cb, exact)
        better = err < best_err
        best_err[better], best_scale[better] = err[better], scale[better]
        best_idx[better] = idx[better]

    for m in np.linspace(1.0 - SPAN, 1.0 + SPAN, candidates):
        consider(_f16(rms * m))
    q = cb[best_idx].reshape(groups.shape)
    qq = np.einsum("rgk,rgk->rg", q, q)
    consider(_f16(np.where(qq > 0, np.einsum("rgk,rgk->rg", groups, q) / np.where(qq > 0, qq, 1.0), 0.0)))
    return best_idx, best_scale.astype(np.float16)


def fit_codebook(
    groups: np.ndarray, cb: np.ndarray, iters: int, candidates: int = 0, max_vectors: int = 1 << 16
) -> np.ndarray:
    """Lloyd iterations of codebook ``cb`` (K, d) on this tensor's rotated ``groups``.

    Each iteration codes the groups (searched scales with ``candidates``, else
    least squares), then moves every codeword to the scale-weighted centroid of
    its cell.  Rows are subsampled to about ``max_vectors`` vectors so the cost
    per tensor is bounded.  Returns the codebook rounded to float16 (as float32).
    """
    from .cq import encode_groups  # cq imports this module

    rows, ng, g = groups.shape
    d = cb.shape[1]
    per_row = ng * g // d
    if rows * per_row > max_vectors:  # evenly spaced rows: deterministic, covers the whole matrix
        groups = groups[np.linspace(0, rows - 1, max(1, max_vectors // per_row)).astype(np.int64)]
    vecs = groups.reshape(-1, d).astype(np.float64)
    cb = _f16(cb)
    for _ in range(iters):
        if candidates:
            idx, sc = search_scales(groups, cb, candidates, exact=True)
        else:
            idx, sc = encode_groups(groups, cb, 3, exact=True)
        w = np.repeat(sc.astype(np.float64).reshape(-1), g // d)
        flat = idx.reshape(-1)
        den = np.bincount(flat, w * w, minlength=len(cb))
        num = np.stack([np.bincount(flat, w * vecs[:, j], minlength=len(cb)) for j in range(d)], 1)
        live = den > 0  # an empty cell keeps its Gaussian codeword
        new = cb.astype(np.float64)
        new[live] = num[live] / den[live, None]
        cb = _f16(new)
    return cb
