"""Fixtures for the cpu_neon plugin tests: skip cleanly when it is not built."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def neon_backend_class():
    backend = pytest.importorskip(
        "cactus_cpu_neon.backend", reason="cactus-cpu-neon not installed: pip install ./plugins/cpu_neon"
    )
    reason = backend.unavailable_reason()
    if reason:
        pytest.skip(reason)
    return backend.NeonBackend


@pytest.fixture
def neon(neon_backend_class):
    return neon_backend_class()
