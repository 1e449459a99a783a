"""The Metal kernels, unchanged, through the shared conformance suite on the CPU.

``mx.fast.metal_kernel`` is replaced by msl_emulator (g++ and std::threads,
see its docstring), so MetalBackend's wrapper and every MSL body run as they
would on a Mac, minus the Apple GPU compiler.  On Apple silicon the real
thing runs in test_metal_conformance.py."""

from __future__ import annotations

import shutil

import pytest

from conformance import BackendConformance
from cq_cases import LAYOUTS, check_cq_linear

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
