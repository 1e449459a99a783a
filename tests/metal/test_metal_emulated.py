"""The Metal kernels, unchanged, through the shared conformance suite on the CPU.

``mx.fast.metal_kernel`` is replaced by msl_emulator (g++ and std::threads,
see its docstring), so MetalBackend's wrapper and every MSL body run as they
would on a Mac, minus the Apple GPU compiler.  On Apple silicon the real
thing runs in test_metal_conformance.py."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from conformance import BackendConformance
from cq_cases import HEAD_LAYOUTS, LAYOUTS, check_cq_linear

mx = pytest.importorskip("mlx.core", reason="mlx is not installed: pip install 'mlx[cpu]'")
if shutil.which("g++") is None:
    pytest.skip("g++ is needed to emulate the Metal kernels", allow_module_level=True)

from cactus_metal.backend import MetalBackend  # noqa: E402
from msl_emulator import metal_kernel_emulator  # noqa: E402


@pytest.fixture
def emulated(monkeypatch):
    monkeypatch.setattr(mx.fast, "metal_kernel", metal_kernel_emulator(mx))
    return MetalBackend()


class TestMetalEmulated(BackendConformance):
    @pytest.fixture
    def backend(self, emulated):
        return emulated


# Each (layout, rows<=8) pair is one matvec compile; every layout also runs the
# tiled matmul with 70 rows (three partial 32-row tiles).
@pytest.mark.parametrize("layout,rows", [(LAYOUTS[0], 1), (LAYOUTS[1], 8), (LAYOUTS[2], 3), (LAYOUTS[3], 5)]
                         + [(layout, 70) for layout in LAYOUTS[:4]])
def test_cq_linear_matches_reference(emulated, rows, layout):
    check_cq_linear(emulated, rows, layout, seed=rows)


# The default cq6 head (and cq5): decode (one row) and prefill (70 rows) through the same kernels.
@pytest.mark.parametrize("rows", [1, 70])
@pytest.mark.parametrize("layout,n", HEAD_LAYOUTS)
def test_cq_head_linear_matches_reference(emulated, rows, layout, n):
    check_cq_linear(emulated, rows, layout, seed=rows, n=n)


def test_the_heads_of_a_default_bundle_match_numpy_ref(emulated, tmp_path):
    """The tensors a conversion with every default writes (cq6: a separate lm_head, and
    the embedding table that a tied model multiplies by) through Metal's decode kernel;
    the layouts' prefill is test_cq_head_linear_matches_reference's."""
    quant = pytest.importorskip("cactus_quant.convert", reason="needs cactus-quant")
    from cactus_core.backends.numpy_ref import NumpyBackend
    from cactus_core.weights import load_weights
    from test_models import build_reference

    _, src = build_reference("llama-gqa-untied", tmp_path)
    quant.convert(src, tmp_path / "b", bits=4, progress=False, self_calibrate=False)
    weights = load_weights(str(tmp_path / "b"))
    x = np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)
    for name in ("lm_head.weight", "model.embed_tokens.weight"):
        w = weights[name]
        assert w.format == "cq" and (w.meta["index_bits"], w.meta["vec_dim"]) == (6, 1)
        want = NumpyBackend().linear(x, w)
        np.testing.assert_allclose(emulated.linear(x, w), want, rtol=2e-4, atol=2e-4 * np.abs(want).max())
