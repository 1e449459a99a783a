"""CQ and RTN quantizers: error bounds, true bits per weight, online rotation."""

from __future__ import annotations

import numpy as np
import pytest

from cactus_core.backends.numpy_ref import NumpyBackend
from cactus_core.errors import QuantizationError
from cactus_core.formats import CQTensor, random_signs
from cactus_quant import CQQuantizer, cq_quantize, rtn_quantize
from cactus_quant.codebooks import codebook_mse, gaussian_mse_scalar, gaussian_vq, uniform_grid
from cactus_quant.cq import PRESETS


def rel_mse(a, b):
    return float(np.sum((a - b) ** 2) / np.sum(b**2))


@pytest.fixture(scope="module")
def gaussian():
    return np.random.default_rng(0).standard_normal((256, 512)).astype(np.float32) * 0.02


# Gaussian relative-MSE bounds: the codebook's own N(0,1) error plus margin for
# group-scale estimation and float16 storage (measured: 0.0077 / 0.029 / 0.097).
CQ_BOUNDS = {4: 0.0085, 3: 0.031, 2: 0.103}


@pytest.mark.parametrize("bits", [4, 3, 2])
def test_cq_error_bound_gaussian(bits, gaussian):
    qt = CQQuantizer(f"cq{bits}", bits).quantize("w", gaussian)
    assert rel_mse(qt.dequantize_unrotated(), gaussian) < CQ_BOUNDS[bits]


@pytest.mark.parametrize("bits", [4, 3, 2])
def test_cq_error_bound_trained_weights(bits, minilm_weights):
    for name, w in minilm_weights.items():
        qt = CQQuantizer(f"cq{bits}", bits).quantize(name, w)
        assert rel_mse(qt.dequantize_unrotated(), w) < CQ_BOUNDS[bits], name


def test_vector_codebooks_beat_scalar_lloyd_max():
    # the measurement behind PRESETS: same rate, lower Gaussian MSE
    assert codebook_mse(gaussian_vq(8, 2)) < 0.88 * gaussian_mse_scalar(16)
    assert codebook_mse(gaussian_vq(6, 2)) < 0.90 * gaussian_mse_scalar(8)
    assert codebook_mse(gaussian_vq(8, 4)) < 0.86 * gaussian_mse_scalar(4)
    assert abs(gaussian_mse_scalar(16) - 0.009497) < 2e-5  # Max (1960), 16 levels


@pytest.mark.parametrize("index_bits", [4, 5, 6])
def test_uniform_grid_is_exact_in_float16_and_near_its_best_step(index_bits):
    grid = uniform_grid(index_bits)[:, 0]
    k = len(grid)
    step = grid[-1] / (k - 1)
    np.testing.assert_array_equal(grid, (2 * np.arange(k) - (k - 1)) * step)
    np.testing.assert_array_equal(grid.astype(np.float16).astype(np.float32), grid)
    mse = codebook_mse(grid[:, None])
    # a grid never beats Lloyd-Max, and a step 10% off either way is worse than the one chosen
    assert gaussian_mse_scalar(k) < mse
    for f in (0.9, 1.1):
        assert mse < codebook_mse((grid * f)[:, None])


def test_uniform_levels_option(gaussian):
    qt = CQQuantizer("cq6", 4, index_bits=6, vec_dim=1, levels="uniform").quantize("w", gaussian)
    np.testing.assert_array_equal(qt.arrays["codebook"].astype(np.float32), uniform_grid(6))
    lloyd = CQQuantizer("cq6", 4, index_bits=6, vec_dim=1).quantize("w", gaussian)
    e_u, e_l = rel_mse(qt.dequantize_unrotated(), gaussian), rel_mse(lloyd.dequantize_unrotated(), gaussian)
    assert e_l < e_u < 1.6 * e_l
    with pytest.raises(QuantizationError, match="levels"):
        CQQuantizer("cq3", 3, levels="uniform").quantize("w", gaussian)  # 2-vectors have no grid
    with pytest.raises(QuantizationError, match="levels"):
        CQQuantizer("cq4", 4, levels="evenly").quantize("w", gaussian)


def test_rtn_error_bounds(gaussian, minilm_weights):
    assert rel_mse(rtn_quantize(gaussian, 8).dequantize(), gaussian) < 1.5e-4
    assert rel_mse(rtn_quantize(gaussian, 4).dequantize(), gaussian) < 0.012
    for w in minilm_weights.values():
        assert rel_mse(rtn_quantize(w, 4).dequantize(), w) < 0.014
        assert rel_mse(rtn_quantize(w, 8).dequantize(), w) < 1.5e-4


@pytest.mark.parametrize("bits,nominal", [(4, 4.125), (3, 3.125), (2, 2.125)])
def test_true_bits_per_weight(bits, nominal):
    q = CQQuantizer(f"cq{bits}", bits)
    w = np.random.default_rng(1).standard_normal((512, 1024)).astype(np.float32)
    qt = q.quantize("w", w)
    index_bits, d = PRESETS[bits]["index_bits"], PRESETS[bits]["vec_dim"]
    counted = (
        512 * 1024 // d * index_bits  # codes
        + 16 * 512 * 1024 // 128  # float16 scale per group of 128
        + 16 * d * (1 << index_bits)  # float16 codebook
        + 1024  # one sign bit per input column
    )
    assert qt.bits_per_weight == pytest.approx(counted / (512 * 1024))
    assert q.bits_for_shape((512, 1024)) == pytest.approx(qt.bits_per_weight)
    assert nominal < q.bits_per_weight < nominal + 0.002  # 4096 x 4096
    assert CQQuantizer("cq4", 4).bits_per_weight <= 4.25


def test_online_rotation_matches_offline(gaussian):
    qt = CQQuantizer("cq4", 4).quantize("w", gaussian)
    x = np.random.default_rng(3).standard_normal((2, 5, 512)).astype(np.float32)
    # linear() on the rotated tensor == x @ (original-space dequantised)^T
    y = NumpyBackend().linear(x, qt)
    np.testing.assert_allclose(y, x @ qt.dequantize_unrotated().T, rtol=1e-4, atol=1e-4)
    # ... and is close to the float layer
    exact = x @ gaussian.T
    assert rel_mse(y, exact) < CQ_BOUNDS[4]
    # the transform is an isometry and the weights were rotated the same way
    xt = qt.matmul_input_transform(x)
    np.testing.assert_allclose(np.linalg.norm(xt, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5)
    s = 1.0 - 2.0 * random_signs(qt.meta["seed"], 512)
    assert not np.allclose(xt, x * s)  # a real mix, not just sign flips


def test_embedding_rows_are_original_space(gaussian):
    qt = CQQuantizer("cq4", 4).quantize("emb", gaussian)
    ids = np.array([[3, 0], [255, 3]])
    rows = NumpyBackend().embedding(qt, ids)
    np.testing.assert_allclose(rows, qt.dequantize_unrotated()[ids], atol=1e-6)
    assert rel_mse(rows, gaussian[ids]) < CQ_BOUNDS[4]


# Groups are the largest divisor <= 128 holding whole 4-vector runs (320 -> 80, 960 -> 120),
# not only powers of two; rotation blocks stay powers of two.
@pytest.mark.parametrize("n,block,group", [(96, 32, 96), (384, 128, 128), (1536, 128, 128), (160, 32, 80),
                                           (320, 64, 80), (960, 64, 120)])
def test_block_and_group_for_awkward_dims(n, block, group):
    w = np.random.default_rng(n).standard_normal((16, n)).astype(np.float32)
    qt = cq_quantize(w, 8, 2)
    assert (qt.meta["block_size"], qt.meta["group_size"]) == (block, group)
    x = np.random.default_rng(1).standard_normal((4, n)).astype(np.float32)
    assert rel_mse(NumpyBackend().linear(x, qt), x @ w.T) < 0.012


def test_bad_inputs_raise_one_line_errors():
    q = CQQuantizer("cq4", 4)
    with pytest.raises(QuantizationError, match="not a multiple of 32"):
        q.quantize("w", np.ones((4, 100), np.float32))
    with pytest.raises(QuantizationError, match="2-D"):
        q.quantize("w", np.ones(64, np.float32))
    with pytest.raises(QuantizationError, match="NaN"):
        q.quantize("w", np.full((4, 64), np.nan, np.float32))
    with pytest.raises(QuantizationError, match="unknown option"):
        q.quantize("w", np.ones((4, 64), np.float32), colour="red")


def test_accepts_bf16_and_fp16():
    from cactus_core.formats import BFloat16, f32_to_bf16

    w = np.random.default_rng(5).standard_normal((8, 64)).astype(np.float32)
    a = CQQuantizer("cq4", 4).quantize("w", BFloat16(f32_to_bf16(w)))
    b = CQQuantizer("cq4", 4).quantize("w", w.astype(np.float16))
    assert isinstance(a, CQTensor) and rel_mse(b.dequantize_unrotated(), w) < 0.012
