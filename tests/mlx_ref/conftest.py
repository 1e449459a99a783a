"""Fixtures for the mlx_ref plugin tests: skip with the install hint when MLX is missing."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def mlx_backend_module():
    backend = pytest.importorskip(
        "cactus_mlx_ref.backend", reason="cactus-mlx-ref not installed: pip install -e ./plugins/mlx_ref"
    )
    reason = backend.unavailable_reason()
    if reason:
        pytest.skip(reason)
    return backend


@pytest.fixture
def mlx_backend(mlx_backend_module):
    return mlx_backend_module.MlxBackend()
