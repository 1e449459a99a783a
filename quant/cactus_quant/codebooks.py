"""Codebooks that minimise mean squared error for a standard Gaussian source.

After a randomized Hadamard rotation and division by the group's scale, weight
coordinates are close to i.i.d. N(0, 1), so the codebooks are fitted to that
distribution once, calibration-free:

- scalar (``vec_dim == 1``): the Lloyd-Max quantizer, computed exactly from the
  Gaussian density (centroid of N(0,1) on [a, b] is (pdf(a)-pdf(b))/(cdf(b)-cdf(a)));
- vector (``vec_dim > 1``): k-means (Lloyd's algorithm) on Gaussian samples,
  started from the product of the scalar quantizers so it can only improve on
  them.

The fitted codebook is stored inside every tensor, so kernels never recompute it.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

_SQRT2 = math.sqrt(2.0)


def _pdf(x: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _cdf(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.vectorize(math.erf, otypes=[np.float64])(x / _SQRT2))


@lru_cache(maxsize=None)
def lloyd_max(levels: int, iters: int = 2000) -> np.ndarray:
    """The ``levels``-point Lloyd-Max quantizer of N(0, 1), ascending (float64)."""
    # start from equal-probability cell centres, then alternate the two optimality conditions
    edges = np.concatenate(([-np.inf], np.linspace(-1, 1, levels + 1)[1:-1] * 2.5, [np.inf]))
    c = np.zeros(levels)
    for _ in range(iters):
        pa, pb = _pdf(edges[:-1]), _pdf(edges[1:])
        mass = _cdf(edges[1:]) - _cdf(edges[:-1])
        new = (pa - pb) / np.maximum(mass, 1e-300)
        new_edges = np.concatenate(([-np.inf], (new[1:] + new[:-1]) / 2, [np.inf]))
        if np.allclose(new, c, rtol=0, atol=1e-12):
            break
        c, edges = new, new_edges
    return c


def gaussian_mse_scalar(levels: int) -> float:
    """Expected squared error of :func:`lloyd_max` on N(0, 1) (per coordinate)."""
    c = lloyd_max(levels)
    e = np.concatenate(([-np.inf], (c[1:] + c[:-1]) / 2, [np.inf]))
    a, b = e[:-1], e[1:]
    # E[(x-c)^2 on cell] = E[x^2] - 2c E[x] + c^2 P, with E[x^2 on [a,b]] = P + a pdf(a) - b pdf(b)
    pa, pb = _pdf(a), _pdf(b)
    am = np.where(np.isfinite(a), np.nan_to_num(a) * pa, 0.0)  # x pdf(x) -> 0 at infinity
    bm = np.where(np.isfinite(b), np.nan_to_num(b) * pb, 0.0)
    mass = _cdf(b) - _cdf(a)
    ex2 = mass + am - bm
    ex = pa - pb
    return float(np.sum(ex2 - 2 * c * ex + c * c * mass))


def nearest(vectors: np.ndarray, codebook: np.ndarray, chunk: int = 1 << 16, exact: bool = False) -> np.ndarray:
    """Index of the nearest codebook row for each row of ``vectors`` (N, d) -> (N,) int32.

    Exact for ``d == 1`` (binary search on midpoints) and ``d > 2`` (brute force);
    for ``d == 2`` a precomputed 1024 x 1024 cell table over the codebook's range,
    which only differs from brute force for points within a cell of a Voronoi
    edge, so it costs under 0.1% extra MSE (measured).  ``exact=True`` forces
    brute force: cheaper than building a table for a codebook used only once
    on a few vectors (codebook fitting).
    """
    if codebook.shape[1] == 1:
        order = np.argsort(codebook[:, 0], kind="stable")
        sorted_c = codebook[order, 0]
        mids = (sorted_c[1:] + sorted_c[:-1]) / 2
        return order[np.searchsorted(mids, vectors[:, 0])].astype(np.int32)
    if codebook.shape[1] == 2 and not exact:
        table, lo, step = _grid_table(codebook.astype(np.float32).tobytes())
        cells = table.shape[0]
        ij = np.clip(((vectors - lo) / step).astype(np.int64), 0, cells - 1)
        return table[ij[:, 0], ij[:, 1]].astype(np.int32)
    return _brute_nearest(vectors, codebook, chunk)


def _brute_nearest(vectors: np.ndarray, codebook: np.ndarray, chunk: int = 1 << 16) -> np.ndarray:
    out = np.empty(len(vectors), dtype=np.int32)
    c = codebook.astype(np.float32)
    c2 = np.sum(c * c, axis=1)
    for i in range(0, len(vectors), chunk):
        v = vectors[i : i + chunk].astype(np.float32)
        out[i : i + chunk] = np.argmin(c2[None, :] - 2.0 * (v @ c.T), axis=1)
    return out


@lru_cache(maxsize=8)
def _grid_table(codebook_bytes: bytes, cells: int = 1024) -> tuple[np.ndarray, float, float]:
    c = np.frombuffer(codebook_bytes, dtype=np.float32).reshape(-1, 2)
    lo, hi = float(c.min()) - 0.5, float(c.max()) + 0.5
    step = (hi - lo) / cells
    centres = lo + step * (np.arange(cells, dtype=np.float32) + 0.5)
    grid = np.stack(np.meshgrid(centres, centres, indexing="ij"), -1).reshape(-1, 2)
    return _brute_nearest(grid, c).astype(np.int16).reshape(cells, cells), lo, step


@lru_cache(maxsize=None)
def gaussian_vq(index_bits: int, vec_dim: int, samples: int = 1 << 17, iters: int = 40) -> np.ndarray:
    """A ``2**index_bits``-entry codebook of ``vec_dim``-vectors for N(0, I) (float32).

    Deterministic: the training samples come from a fixed seed.
    """
    k = 1 << index_bits
    if vec_dim == 1:
        return lloyd_max(k)[:, None].astype(np.float32)
    rng = np.random.default_rng(0x43414354)  # "CACT"
    x = rng.standard_normal((samples, vec_dim)).astype(np.float32)
    if index_bits % vec_dim == 0:
        axis = lloyd_max(1 << (index_bits // vec_dim))
        grid = np.stack(np.meshgrid(*([axis] * vec_dim), indexing="ij"), -1).reshape(-1, vec_dim)
        c = grid.astype(np.float32)
    else:
        c = x[rng.choice(samples, k, replace=False)].copy()
    for _ in range(iters):
        idx = _brute_nearest(x, c)  # the codebook changes every step: no cell table
        counts = np.bincount(idx, minlength=k).astype(np.float32)
        sums = np.stack([np.bincount(idx, x[:, j], minlength=k) for j in range(vec_dim)], 1)
        live = counts > 0
        c[live] = (sums[live] / counts[live, None]).astype(np.float32)
    # symmetrise the trained codebook's scale drift: keep it exactly zero-mean per axis
    return c - c.mean(axis=0, keepdims=True)


@lru_cache(maxsize=None)
def uniform_grid(index_bits: int) -> np.ndarray:
    """``2**index_bits`` equally spaced levels ``(2k - (K - 1)) * h`` for N(0, 1) (float32, (K, 1)).

    Why a grid: a kernel can multiply the codes themselves (``k`` as an unsigned
    byte) and fold the offset into one sum of x per group, with no table lookup
    (the cq6 head on AVX2: docs/cpu_neon.md).  ``h`` is the MSE-best half step for
    N(0, 1) on a grid of ``m / 2**e`` with ``m < 32``, so every level is exact in
    float16 and a kernel can recognise the grid from the stored codebook.
    """
    k = 1 << index_bits
    odd = (2 * np.arange(k) - (k - 1)).astype(np.float64)

    def mse(h: float) -> float:
        return codebook_mse((odd * h).astype(np.float32)[:, None])

    coarse = min(np.linspace(0.5, 4.0, 141) / k, key=mse)  # the MSE-best step is near 3.5-sigma / K
    e = int(np.floor(np.log2(31.0 / coarse)))
    grid = [m / 2.0**e for m in range(max(1, int(coarse * 2**e) - 2), min(31, int(coarse * 2**e) + 2) + 1)]
    h = min(grid, key=mse)
    return (odd * h).astype(np.float32)[:, None]


def scalar_codebook(index_bits: int, vec_dim: int, levels: str = "gaussian") -> np.ndarray:
    """The starting codebook of a CQ tensor: :func:`gaussian_vq`, or with ``levels="uniform"``
    (scalars only) :func:`uniform_grid`."""
    if levels == "gaussian":
        return gaussian_vq(index_bits, vec_dim)
    if levels == "uniform" and vec_dim == 1:
        return uniform_grid(index_bits)
    raise ValueError(f"no {levels!r} codebook of {vec_dim}-vectors")


def codebook_mse(codebook: np.ndarray, samples: int = 1 << 16, seed: int = 7) -> float:
    """Monte-Carlo MSE per coordinate of ``codebook`` on held-out N(0, I) samples."""
    d = codebook.shape[1]
    x = np.random.default_rng(seed).standard_normal((samples, d)).astype(np.float32)
    err = x - codebook[nearest(x, codebook)]
    return float(np.mean(err * err))
