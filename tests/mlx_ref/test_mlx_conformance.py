"""The shared backend conformance suite, run against mlx_ref."""

from __future__ import annotations

import pytest

from conformance import BackendConformance


class TestMlxRef(BackendConformance):
    @pytest.fixture
    def backend(self, mlx_backend):
        return mlx_backend
