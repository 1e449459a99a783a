"""numpy_ref against itself would prove nothing: these check it against
independent formulas (torch) and then run the shared suite as a self-check of
the suite's plumbing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from cactus_core.backends.numpy_ref import NumpyBackend
from conformance import BackendConformance


class TestNumpyRefConformance(BackendConformance):
    @pytest.fixture
    def backend(self):
        return NumpyBackend()


@pytest.fixture
def nb():
    return NumpyBackend()


def test_attention_matches_torch_sdpa(nb):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((1, 8, 7, 16)).astype(np.float32)
    k = rng.standard_normal((1, 2, 7, 16)).astype(np.float32)
    v = rng.standard_normal((1, 2, 7, 16)).astype(np.float32)
    ours = nb.attention(q, k, v, scale=0.25)
    kt = torch.from_numpy(k).repeat_interleave(4, dim=1)
    vt = torch.from_numpy(v).repeat_interleave(4, dim=1)
    ref = torch.nn.functional.scaled_dot_product_attention(
        torch.from_numpy(q), kt, vt, is_causal=True, scale=0.25
    )
    np.testing.assert_allclose(ours, ref.numpy(), rtol=1e-5, atol=1e-5)


def test_activations_match_torch(nb):
    x = np.linspace(-8, 8, 301, dtype=np.float32)
    t = torch.from_numpy(x)
    np.testing.assert_allclose(nb.activation(x, "silu"), torch.nn.functional.silu(t).numpy(), atol=1e-6)
    np.testing.assert_allclose(nb.activation(x, "gelu"), torch.nn.functional.gelu(t).numpy(), atol=1e-6)
    np.testing.assert_allclose(
        nb.activation(x, "gelu_tanh"), torch.nn.functional.gelu(t, approximate="tanh").numpy(), atol=1e-6
    )


def test_hadamard_is_orthonormal_sylvester(nb):
    n = 16
    H = nb.hadamard(np.eye(n, dtype=np.float32), n)
    np.testing.assert_allclose(H @ H.T, np.eye(n), atol=1e-6)
    sylvester = np.array([[1.0]])
    while sylvester.shape[0] < n:
        sylvester = np.block([[sylvester, sylvester], [sylvester, -sylvester]])
    np.testing.assert_allclose(H, sylvester / 4.0, atol=1e-6)


def test_conv1d_matches_torch(nb):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 6, 20)).astype(np.float32)
    w = rng.standard_normal((9, 2, 5)).astype(np.float32)
    b = rng.standard_normal(9).astype(np.float32)
    ref = torch.nn.functional.conv1d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), stride=2, padding=1, groups=3)
    np.testing.assert_allclose(nb.conv1d(x, w, b, stride=2, padding=1, groups=3), ref.numpy(), rtol=1e-5, atol=1e-5)


def test_softmax_all_masked_row_is_zero(nb):
    x = np.full((1, 4), -np.inf, dtype=np.float32)
    assert np.all(nb.softmax(x) == 0)
