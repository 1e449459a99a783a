"""CQ: randomized Hadamard rotation + Gaussian codebook + per-group scales.

Why it works: a trained weight row has uneven columns and a few outliers; after
``w' = H_b(w * s)`` (random signs ``s``, orthonormal Hadamard blocks ``H_b``)
every coordinate is a mix of ``b`` inputs, so groups look i.i.d. Gaussian and one
MSE-optimal Gaussian codebook fits them all.  The rotation is orthogonal, so
the error in ``w'`` is the error in ``w``, and the matmul stays exact once the
activations get the same rotation online (``CQTensor.matmul_input_transform``).

Encoding a group: try candidate scales around the group's RMS, keep the best
coding as stored, polish it with the least-squares scale ``<w', c> / <c, c>``
(fit.py); or, cheaper (cq2), alternate nearest-codeword assignment and the
least-squares scale from the RMS.  Scales are rounded to float16, the stored
precision, before they are judged.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from cactus_core.errors import QuantizationError
from cactus_core.formats import CQTensor, hadamard, pack_bits, random_signs, to_float32

from .codebooks import nearest, scalar_codebook
from .fit import fit_codebook, search_scales

#: Seed of the rotation signs.  One seed for every tensor means tensors that
#: read the same activations (q/k/v, gate/up) share one online rotation.
DEFAULT_SEED = 0x5EED

#: Bits of the scheme -> encoder parameters, chosen by measurement
#: (docs/quantization.md): 2-D vectors at 3 bits and 4-D vectors at 2 bits beat
#: scalar Lloyd-Max by 12-17% MSE at the same rate.  At 4 bits they do too, but
#: with cq4's self-calibrated error feedback the 16-level scalar codebook gave the
#: default model less KL divergence (0.31 +- 0.08 of MLX 4-bit g64's over three
#: calibration draws, against 0.40 +- 0.17 for 8-bit codes of 2-vectors), and 16
#: entries are what one pshufb / vqtbl1q looks up, so decode reaches memory
#: speed on CPUs without AVX-512 VBMI (session 12).  Searching 8 candidate scales
#: per group (fit.py) cuts cq4's weight error on the default model by 12% (its
#: layer output error by 13%) for 1.2x the conversion time.  4-D nearest-codeword search is brute force, so cq2 neither
#: searches (1% MSE for 3.5x the time) nor refines its scales more than once.
PRESETS: dict[int, dict[str, int]] = {
    4: {"index_bits": 4, "vec_dim": 1, "group_size": 128, "scale_iters": 3, "scale_search": 8},
    3: {"index_bits": 6, "vec_dim": 2, "group_size": 128, "scale_iters": 3, "scale_search": 8},
    2: {"index_bits": 8, "vec_dim": 4, "group_size": 128, "scale_iters": 1},
}

MAX_BLOCK = 128
MIN_DIM_MULTIPLE = 32

#: Widths whose ``cactus convert`` calibrates on text the model writes itself
#: (calibrate.py) and codes with error feedback (feedback.py), unless told not to:
#: measured on the default model, docs/quantization.md (session 16: CQ3 3.26x -> 2.44x MLX
#: 4-bit's KL, CQ2 13.4x -> 8.9x).
SELF_CALIBRATED = frozenset({4, 3, 2})


def pow2_divisor(n: int, cap: int) -> int:
    """The largest power of two that divides ``n``, at most ``cap``."""
    return math.gcd(n, 1 << (max(cap, 1).bit_length() - 1))


def choose_group(n: int, group_size: int, vec_dim: int) -> int:
    """The scale group for input dim ``n``: the largest divisor of ``n`` up to
    ``group_size`` that holds a whole number of 4-vector runs (kernels read codes
    four vectors at a time), so ``in = 320`` gets 80 and ``in = 960`` gets 120
    rather than the 64 a power of two would allow.  Groups need not align with
    the rotation blocks: the format scales coordinates after rotating."""
    step = 4 * vec_dim
    fits = [g for g in range(step, min(group_size, n) + 1, step) if n % g == 0]
    return max(fits) if fits else pow2_divisor(n, group_size)


def check_matrix(name: str, array: Any) -> np.ndarray:
    """``array`` as a finite float32 ``(out, in)`` matrix, or a one-line QuantizationError."""
    w = to_float32(array) if not isinstance(array, np.ndarray) else np.asarray(array, dtype=np.float32)
    if w.ndim != 2:
        raise QuantizationError(f"cannot quantize '{name}': expected a 2-D weight, got shape {list(w.shape)}")
    if w.shape[1] % MIN_DIM_MULTIPLE:
        raise QuantizationError(
            f"cannot quantize '{name}': input dim {w.shape[1]} is not a multiple of "
            f"{MIN_DIM_MULTIPLE}; keep this tensor in float"
        )
    if not np.all(np.isfinite(w)):
        raise QuantizationError(f"cannot quantize '{name}': it contains NaN or infinite values")
    return w


def rotate_rows(w: np.ndarray, block: int, seed: int) -> np.ndarray:
    """``H_b(w * s)`` for every row: the offline half of the CQ rotation."""
    s = 1.0 - 2.0 * random_signs(seed, w.shape[1]).astype(np.float32)
    return hadamard(w * s, block)


def encode_groups(
    groups: np.ndarray, codebook: np.ndarray, scale_iters: int = 3, scale_search: int = 0, exact: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """Code ``groups`` (rows, n_groups, g) with ``codebook`` (K, d).

    ``scale_search > 0`` tries that many candidate scales per group (fit.py);
    otherwise the scale alternates with the codes ``scale_iters`` times.
    Returns ``(idx (rows, n_groups, g // d) int32, scales (rows, n_groups) float16)``.
    """
    if scale_search:
        return search_scales(groups, codebook.astype(np.float32), scale_search, exact)
    rows, ng, g = groups.shape
    d = codebook.shape[1]
    vecs = groups.reshape(rows, ng, g // d, d)
    scale = np.sqrt(np.mean(groups * groups, axis=-1))
    cb = codebook.astype(np.float32)
    for it in range(scale_iters + 1):
        safe = np.where(scale > 0, scale, 1.0).astype(np.float32)
        idx = nearest((vecs / safe[..., None, None]).reshape(-1, d), cb, exact=exact).reshape(rows, ng, g // d)
        if it == scale_iters:
            break
        q = cb[idx].reshape(rows, ng, g)
        qq = np.sum(q * q, axis=-1)
        ls = np.sum(groups * q, axis=-1) / np.where(qq > 0, qq, 1.0)
        scale = np.asarray(np.where(qq > 0, ls, 0.0), dtype=np.float16).astype(np.float32)
    return idx, np.asarray(scale, dtype=np.float16)


def cq_quantize(
    w: np.ndarray,
    index_bits: int,
    vec_dim: int,
    group_size: int = 128,
    max_block: int = MAX_BLOCK,
    seed: int = DEFAULT_SEED,
    scale_iters: int = 3,
    scale_search: int = 0,
    fit_iters: int = 0,
    levels: str = "gaussian",
    rows_per_chunk: int = 1024,
) -> CQTensor:
    """Quantize a float ``(out, in)`` matrix to a :class:`CQTensor`.

    The rotation block is the largest power of two dividing ``in`` (at most
    ``max_block``); the group is :func:`choose_group`, so no padding is ever needed.
    ``scale_search`` candidate scales per group (0: least squares only) and
    ``fit_iters`` Lloyd iterations of the codebook on this tensor (0: the
    Gaussian codebook) trade conversion time for error (fit.py).  ``levels="uniform"``
    codes scalars on an equally spaced grid instead of Lloyd-Max levels (codebooks.uniform_grid).
    """
    w = np.asarray(w, dtype=np.float32)
    out, n = w.shape
    block = pow2_divisor(n, max_block)
    group = choose_group(n, group_size, vec_dim)
    if group % vec_dim:
        raise QuantizationError(f"group {group} is not a multiple of the vector size {vec_dim}")
    codebook = scalar_codebook(index_bits, vec_dim, levels).astype(np.float16)
    if fit_iters:
        sample = rotate_rows(w[np.linspace(0, out - 1, min(out, rows_per_chunk)).astype(np.int64)], block, seed)
        codebook = fit_codebook(sample.reshape(len(sample), n // group, group), codebook.astype(np.float32),
                                fit_iters, scale_search).astype(np.float16)
    cb32 = codebook.astype(np.float32)
    codes, scales = [], []
    for r in range(0, out, rows_per_chunk):  # bounded memory on large matrices
        wr = rotate_rows(w[r : r + rows_per_chunk], block, seed)
        idx, sc = encode_groups(wr.reshape(len(wr), n // group, group), cb32, scale_iters, scale_search)
        codes.append(pack_bits(idx.reshape(len(wr), -1), index_bits))
        scales.append(sc)
    meta = {"index_bits": index_bits, "vec_dim": vec_dim, "group_size": group, "block_size": block, "seed": seed}
    return make_cq_tensor((out, n), meta, np.concatenate(codes), np.concatenate(scales), codebook)


def make_cq_tensor(shape, meta: dict, codes: np.ndarray, scales: np.ndarray, codebook: np.ndarray) -> CQTensor:
    """Assemble a :class:`CQTensor` from packed codes, float16 scales and the codebook."""
    return CQTensor(
        shape,
        meta,
        codes=codes,
        scales=np.asarray(scales, dtype=np.float16),
        codebook=np.asarray(codebook, dtype=np.float16),
        signs=np.packbits(random_signs(meta["seed"], shape[1]), bitorder="little"),
    )


def cq_bits_for_shape(shape: tuple[int, int], index_bits: int, vec_dim: int, group_size: int = 128) -> float:
    """True bits per weight of a CQ tensor of ``shape``: codes, scales, codebook and signs."""
    out, n = shape
    group = choose_group(n, group_size, vec_dim)
    nbytes = out * -(-(n // vec_dim) * index_bits // 8)
    nbytes += 2 * out * (n // group) + 2 * (1 << index_bits) * vec_dim + n // 8
    return 8.0 * nbytes / (out * n)


class CQQuantizer:
    """A CQ scheme (``cq4``, ``cq3``, ``cq2``) as registered with the plugin manager."""

    def __init__(self, name: str, bits: int, **params: Any):
        if bits not in PRESETS:
            raise QuantizationError(f"no CQ preset for {bits} bits (have {sorted(PRESETS)})")
        self.name = name
        self.bits = bits
        self.params = {**PRESETS[bits], **params}
        #: ``cactus convert`` feeds this scheme Hessians from self-written text by default
        self.self_calibrate = bits in SELF_CALIBRATED

    @property
    def bits_per_weight(self) -> float:
        """True bits per weight of a 4096 x 4096 tensor, every field included."""
        return self.bits_for_shape((4096, 4096))

    def bits_for_shape(self, shape: tuple[int, int]) -> float:
        p = self.params
        return cq_bits_for_shape(tuple(shape), p["index_bits"], p["vec_dim"], p["group_size"])

    def quantize(self, name: str, array: Any, **options: Any) -> CQTensor:
        """Quantize one weight; ``options`` override the preset (seed, group_size, max_block...).

        With ``calibration=<activations>`` or ``hessian=<H>`` the codes are chosen
        with GPTQ-style error feedback in the rotated basis (see feedback.py;
        ``damp=`` overrides its damping); without, each group is coded on its own
        (data-free).
        """
        calib, hess = options.pop("calibration", None), options.pop("hessian", None)
        damp = options.pop("damp", None)
        params = {**self.params, **options}
        allowed = {"index_bits", "vec_dim", "group_size", "max_block", "seed", "scale_iters", "scale_search",
                   "fit_iters", "levels", "refine"}
        unknown = sorted(set(params) - allowed)
        if unknown:
            raise QuantizationError(f"{self.name}: unknown option(s) {', '.join(unknown)}")
        for key in ("scale_iters", "scale_search", "fit_iters", "refine"):
            value = params.get(key, 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise QuantizationError(f"{self.name}: {key} must be a whole number >= 0, got {value!r}")
        levels = params.get("levels", "gaussian")
        if levels not in ("gaussian", "uniform") or (levels == "uniform" and params["vec_dim"] != 1):
            raise QuantizationError(f"{self.name}: levels must be 'gaussian', or 'uniform' for scalars, got {levels!r}")
        w = check_matrix(name, array)
        refine = params.pop("refine", 0)  # rounds after error feedback: nothing to refine without data
        if calib is None and hess is None:
            return cq_quantize(w, **params)
        from .feedback import cq_quantize_feedback

        if damp is not None:
            if isinstance(damp, bool) or not isinstance(damp, (int, float)) or not damp > 0:
                raise QuantizationError(f"{self.name}: damp must be a number > 0, got {damp!r}")
            params["damp"] = float(damp)
        return cq_quantize_feedback(w, hess if hess is not None else calib, is_hessian=hess is not None,
                                    refine=refine, **params)

    def __repr__(self) -> str:
        return f"CQQuantizer({self.name!r}, {self.bits_per_weight:.3f} bpw)"
