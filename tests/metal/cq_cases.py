"""cq weights for the Metal tests: shapes that exercise both linear kernels."""

from __future__ import annotations

import numpy as np

from cactus_core.formats import CQTensor, pack_bits

#: (index_bits, vec_dim, group_size, block_size): the CQ4/CQ3/CQ2 presets and scalar codebooks.
LAYOUTS = [(8, 2, 128, 128), (6, 2, 128, 64), (8, 4, 128, 128), (3, 1, 32, 32), (4, 1, 64, 64)]
#: (layout, input width) of the output heads ``cactus convert --head cq6`` (the default) and
#: ``cq5`` make: 64 / 32 scalar levels in groups of 128, and the default model's 320-wide
#: table (groups of 80, rotation blocks of 64: 6-bit codes straddle bytes and groups).
HEAD_LAYOUTS = [((6, 1, 128, 128), 256), ((5, 1, 128, 128), 256), ((6, 1, 80, 64), 320)]


def cq_tensor(rng, out, n, bits, vec_dim, group, block) -> CQTensor:
    return CQTensor(
        (out, n), dict(index_bits=bits, vec_dim=vec_dim, group_size=group, block_size=block, seed=1),
        codes=pack_bits(rng.integers(0, 1 << bits, size=(out, n // vec_dim)), bits),
        scales=(rng.random((out, n // group)) * 0.1 + 0.01).astype(np.float16),
        codebook=rng.standard_normal((1 << bits, vec_dim)).astype(np.float16),
        signs=rng.integers(0, 256, size=n // 8).astype(np.uint8),
    )


def check_cq_linear(backend, rows, layout, seed=0, n=256):
    """``backend.linear`` on a 70 x ``n`` cq weight against numpy_ref's dequantize path."""
    from cactus_core.backends.numpy_ref import NumpyBackend

    rng = np.random.default_rng(seed)
    w = cq_tensor(rng, 70, n, *layout)
    x = rng.standard_normal((rows, n)).astype(np.float32)
    bias = rng.standard_normal(70).astype(np.float32)
    want = NumpyBackend().linear(x, w, bias)
    got = backend.linear(x, w, bias)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4 * np.abs(want).max())
