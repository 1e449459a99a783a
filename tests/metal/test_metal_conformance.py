"""The shared conformance suite on the Metal kernels (Apple silicon only).

Elsewhere the whole module skips with the backend's unavailable reason, the
same line ``cactus plugins`` prints."""

from __future__ import annotations

import pytest

from cactus_core.device import detect_device
from cactus_metal.backend import unavailable_reason

REASON = unavailable_reason(detect_device())
if REASON:
    pytest.skip(REASON, allow_module_level=True)

from cactus_metal.backend import MetalBackend  # noqa: E402
from conformance import BackendConformance  # noqa: E402
from cq_cases import HEAD_LAYOUTS, LAYOUTS, check_cq_linear  # noqa: E402


class TestMetal(BackendConformance):
    @pytest.fixture
    def backend(self):
        return MetalBackend()


@pytest.mark.parametrize("rows", [1, 5, 8, 9, 70])  # matvec up to 8 rows, tiled matmul beyond
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cq_linear_matches_reference(rows, layout):
    check_cq_linear(MetalBackend(), rows, layout, seed=rows)


@pytest.mark.parametrize("rows", [1, 8, 70])
@pytest.mark.parametrize("layout,n", HEAD_LAYOUTS)
def test_cq_head_linear_matches_reference(rows, layout, n):
    """The output heads of --head cq6 (the default) and cq5."""
    check_cq_linear(MetalBackend(), rows, layout, seed=rows, n=n)
