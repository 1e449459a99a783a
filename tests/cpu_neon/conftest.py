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
    """The exact kernels: conformance and the reference comparisons hold it to 1e-5.

    CQ decode with int8 activations and CQ prefill in bfloat16 (on by default
    where they are faster) are not exact; test_int8_activations.py checks them
    against this backend.
    """
    return neon_backend_class(int8_activations=False, bf16_prefill=False)


@pytest.fixture
def neon_i8(neon_backend_class):
    """CQ decode with int8 activations turned on (the build must have a native kernel for it)."""
    backend = neon_backend_class(int8_activations=True, bf16_prefill=False)
    if not any(backend._int8_for(bits, d) for bits, d in [(8, 2), (4, 1)]):
        pytest.skip("this build has no native int8-activation kernel (SIMDe without AVX-512 VBMI/VNNI); "
                    "test_native_neon.py runs the NEON one through SIMDe and under qemu")
    return backend


@pytest.fixture
def neon_bf16(neon_backend_class):
    """CQ prefill with bfloat16 products (needs AVX512_BF16)."""
    backend = neon_backend_class(int8_activations=False, bf16_prefill=True)
    if not backend.bf16_prefill:
        pytest.skip("this CPU or build has no AVX512_BF16")
    return backend
