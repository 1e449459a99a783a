"""Refining error-feedback codes: coordinate descent on the codes, then least-squares scales.

GPTQ (feedback.py) picks each column's codes once, knowing only the columns before it:
the compensation pushes the error forward, and nothing goes back.  With the codes and
scales it chose as a start, the layer's output error for a row ``w`` (rotated, damped
Hessian ``H``)

    E(q) = (q - w)^T H (q - w),    q_k = s_g(k) * cb[c_k]

can still be lowered without touching the format:

1. **codes**: each column in turn, every row moves its code to the one that lowers E
   most with all other codes held (an exact step: for a change ``d`` of weight ``k``,
   ``dE = d^2 H_kk + 2 d r_k`` with ``r = H (q - w)``);
2. **scales**: with the codes held, E is quadratic in the row's group scales, so the
   best scales solve one small system per row (groups x groups); a row keeps them only
   where, rounded to float16 as stored, they lower its E.

Each round is one sweep of 1 then 2.  On the default model's self-written Hessians a
round lowers E by about 7% and three rounds by about 10% (docs/quantization.md,
"Session 15").  Columns are swept in blocks: inside a block ``r`` is updated exactly
after every column, and the rest of ``r`` once per block by a matrix product, so a sweep
costs about one ``out x in x in`` product.  Scalar codebooks only (vec_dim 1: cq4 and
the 5- and 6-bit widths it widens to).
"""

from __future__ import annotations

import numpy as np

#: Columns per block of a sweep (exact updates inside, one matrix product after).
BLOCK = 128


def output_error(w: np.ndarray, q: np.ndarray, h: np.ndarray) -> np.ndarray:
    """Per row, ``(q - w)^T H (q - w)``."""
    d = q - w
    return np.einsum("nk,nk->n", d @ h, d)


def sweep_codes(w: np.ndarray, h: np.ndarray, idx: np.ndarray, cb: np.ndarray, s: np.ndarray) -> np.ndarray:
    """One coordinate-descent sweep over the columns; ``s`` is each weight's scale (out, in).

    Returns the new codes; never raises E (every move is the best for its weight given
    the others, and no move is the current code).
    """
    idx = idx.copy()
    r = (cb[idx] * s - w) @ h
    n = w.shape[1]
    diag = np.diag(h)
    for b0 in range(0, n, BLOCK):
        b1 = min(n, b0 + BLOCK)
        dq = np.zeros((w.shape[0], b1 - b0))
        for k in range(b0, b1):
            sk, cur = s[:, k], cb[idx[:, k]]
            dc = cb[None, :] - cur[:, None]  # rows x entries: each entry's change of code value
            gain = (sk * sk * diag[k])[:, None] * dc * dc + 2.0 * (sk * r[:, k])[:, None] * dc
            best = np.argmin(gain, axis=1)
            step = (cb[best] - cur) * sk
            moved = step != 0.0
            if moved.any():
                idx[moved, k] = best[moved]
                r[moved, b0:b1] += np.outer(step[moved], h[k, b0:b1])
                dq[moved, k - b0] = step[moved]
        if b0 > 0:
            r[:, :b0] += dq @ h[b0:b1, :b0]
        if b1 < n:
            r[:, b1:] += dq @ h[b0:b1, b1:]
    return idx


def fit_scales(w: np.ndarray, h: np.ndarray, values: np.ndarray, scales: np.ndarray, group: int) -> np.ndarray:
    """Least-squares group scales (float16) for fixed code values ``values`` (out, in).

    Per row ``s = A^-1 b`` with ``A_gh = sum_{k in g, l in h} v_k H_kl v_l`` and
    ``b_g = sum_{k in g} v_k (H w)_k``; a row keeps its old scales unless the new ones,
    as stored, lower its output error.
    """
    out, n = w.shape
    ng = n // group
    b = (values * (w @ h)).reshape(out, ng, group).sum(-1)
    a = np.empty((out, ng, ng))
    for g in range(ng):
        vh = values[:, g * group:(g + 1) * group] @ h[g * group:(g + 1) * group]
        a[:, :, g] = (values * vh).reshape(out, ng, group).sum(-1)
    # a ridge far below any group's own term keeps a degenerate row solvable
    a += (1e-9 * np.trace(a, axis1=1, axis2=2) / ng)[:, None, None] * np.eye(ng)
    new = np.linalg.solve(a, b[..., None])[..., 0]
    new = np.clip(new, 0.0, float(np.finfo(np.float16).max)).astype(np.float16)
    old = scales.astype(np.float16)
    before = output_error(w, values * np.repeat(old.astype(np.float64), group, axis=1), h)
    after = output_error(w, values * np.repeat(new.astype(np.float64), group, axis=1), h)
    return np.where((after < before)[:, None], new, old)


def refine(w: np.ndarray, h: np.ndarray, idx: np.ndarray, scales: np.ndarray, cb: np.ndarray, group: int,
           rounds: int) -> tuple[np.ndarray, np.ndarray]:
    """``rounds`` of (code sweep, scale fit) from GPTQ's ``idx`` (out, in) and ``scales``
    (out, in / group) for rotated weights ``w`` and damped rotated Hessian ``h``; ``cb``
    is the scalar codebook (entries,).  Returns ``(idx, scales float16)``."""
    w = np.asarray(w, dtype=np.float64)
    cb = np.asarray(cb, dtype=np.float64).reshape(-1)
    scales = np.asarray(scales, dtype=np.float16)
    for _ in range(rounds):
        idx = sweep_codes(w, h, idx, cb, np.repeat(scales.astype(np.float64), group, axis=1))
        scales = fit_scales(w, h, cb[idx], scales, group)
    return idx, scales
