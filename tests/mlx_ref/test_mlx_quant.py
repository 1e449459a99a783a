"""Quantized linear on mlx_ref against numpy_ref's ``dequantize()`` path, per format."""

from __future__ import annotations

import numpy as np
import pytest

from cactus_core.backends.numpy_ref import NumpyBackend
from cactus_core.formats import CQTensor, Int4Tensor, Int8Tensor, pack_bits


def cq_tensor(rng, out, n, bits, vec_dim, group, block):
    codes = rng.integers(0, 1 << bits, size=(out, n // vec_dim))
    return CQTensor(
        (out, n), dict(index_bits=bits, vec_dim=vec_dim, group_size=group, block_size=block, seed=1),
        codes=pack_bits(codes, bits),
        scales=(rng.random((out, n // group)) * 0.1 + 0.01).astype(np.float16),
        codebook=rng.standard_normal((1 << bits, vec_dim)).astype(np.float16),
        signs=rng.integers(0, 256, size=n // 8).astype(np.uint8),
    )


def affine_tensor(rng, cls, out, n, group):
    codes = rng.integers(0, 1 << cls.bits, size=(out, n))
    scales = rng.random((out, n // group)) * 0.2 / (1 << cls.bits)
    # Biases centre the levels on zero, as a real quantizer's would.
    biases = -scales * ((1 << cls.bits) - 1) / 2 + rng.standard_normal(scales.shape) * 0.01
    return cls((out, n), dict(group_size=group), codes=pack_bits(codes, cls.bits),
               scales=scales.astype(np.float16), biases=biases.astype(np.float16))


CASES = {
    "cq4-preset": lambda r: cq_tensor(r, 48, 256, 8, 2, 128, 128),
    "cq3-preset": lambda r: cq_tensor(r, 40, 256, 6, 2, 128, 64),
    "cq2-preset": lambda r: cq_tensor(r, 33, 256, 8, 4, 128, 128),
    "cq-scalar-3bit": lambda r: cq_tensor(r, 17, 96, 3, 1, 32, 32),
    "int4-mlx-affine": lambda r: affine_tensor(r, Int4Tensor, 40, 256, 64),
    "int4-group16": lambda r: affine_tensor(r, Int4Tensor, 24, 96, 16),
    "int8": lambda r: affine_tensor(r, Int8Tensor, 24, 128, 32),
}


@pytest.mark.parametrize("L", [1, 7])
@pytest.mark.parametrize("case", sorted(CASES))
def test_quantized_linear_matches_reference(mlx_backend, case, L):
    rng = np.random.default_rng(7)
    w = CASES[case](rng)
    assert mlx_backend.supports("linear", w.format)
    x = rng.standard_normal((1, L, w.shape[1])).astype(np.float32)
    bias = rng.standard_normal(w.shape[0]).astype(np.float32)
    got, want = mlx_backend.linear(x, w, bias), NumpyBackend().linear(x, w, bias)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4 * np.abs(want).max())


def test_int4_uses_mlx_affine_kernel_only_when_layout_fits(mlx_backend):
    from cactus_mlx_ref import quant

    rng = np.random.default_rng(0)
    assert quant.prepared(mlx_backend, CASES["int4-mlx-affine"](rng)).affine is not None
    assert quant.prepared(mlx_backend, CASES["int4-group16"](rng)).affine is None


def test_row_blocks_bound_memory_and_agree(mlx_backend, monkeypatch):
    from cactus_mlx_ref import quant

    rng = np.random.default_rng(3)
    w = cq_tensor(rng, 50, 128, 6, 2, 64, 128)
    x = rng.standard_normal((3, 128)).astype(np.float32)
    whole = mlx_backend.linear(x, w)
    monkeypatch.setattr(quant, "BLOCK_BYTES", 7 * 128 * 4)  # 7 rows a block, 8 blocks
    np.testing.assert_allclose(mlx_backend.linear(x, w), whole, rtol=1e-6, atol=1e-6)


def test_quantized_embedding_falls_back(mlx_backend):
    assert not mlx_backend.supports("embedding", "cq")
    assert mlx_backend.supports("embedding", "bfloat16")
