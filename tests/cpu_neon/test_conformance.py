"""The shared backend conformance suite, run against cpu_neon."""

from __future__ import annotations

import pytest

from conformance import BackendConformance


class TestCpuNeon(BackendConformance):
    @pytest.fixture
    def backend(self, neon):
        return neon
