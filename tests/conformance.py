"""The shared backend conformance suite.

Every backend runs these tests against numpy_ref.  A plugin reuses them by
subclassing and providing a ``backend`` fixture::

    from conformance import BackendConformance

    class TestMyBackend(BackendConformance):
        @pytest.fixture
        def backend(self):
            return MyBackend()

Ops a backend does not implement (``supports(op)`` is false) are skipped with
that reason, because dispatch falls back to numpy_ref for them.  Tolerances are
for float32 arithmetic that may reassociate sums.
"""

from __future__ import annotations

import numpy as np
import pytest

from cactus_core.backends.numpy_ref import NumpyBackend
from cactus_core.formats import BFloat16, f32_to_bf16

RTOL = 1e-4
ATOL = 1e-5


def _rand(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _close(a, b, rtol=RTOL, atol=ATOL):
    assert a.dtype == np.float32, f"backend returned {a.dtype}, expected float32"
    assert a.shape == b.shape, f"shape {a.shape} != reference {b.shape}"
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


class BackendConformance:
    """Mixin of tests comparing ``backend`` against numpy_ref op by op."""

    @pytest.fixture
    def ref(self):
        return NumpyBackend()

    @pytest.fixture
    def rng(self):
        return np.random.default_rng(1234)

    def need(self, backend, op, fmt=None):
        if not backend.supports(op, fmt):
            pytest.skip(f"{backend.name} does not implement {op} for {fmt}; numpy_ref serves it")

    # --- linear ------------------------------------------------------------
    @pytest.mark.parametrize("L", [1, 3, 17])
    @pytest.mark.parametrize("dims", [(64, 32), (33, 47), (1, 8), (256, 128)])
    @pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
    def test_linear(self, backend, ref, rng, L, dims, dtype):
        out_f, in_f = dims
        w32 = _rand(rng, out_f, in_f, scale=0.1)
        if dtype == "bfloat16":
            w = BFloat16(f32_to_bf16(w32))
        else:
            w = w32.astype(dtype)
        self.need(backend, "linear", dtype)
        x = _rand(rng, 1, L, in_f)
        _close(backend.linear(x, w), ref.linear(x, w), rtol=2e-4, atol=2e-5)

    def test_linear_bias_and_batch(self, backend, ref, rng):
        self.need(backend, "linear", "float32")
        w, b, x = _rand(rng, 24, 40), _rand(rng, 24), _rand(rng, 2, 5, 40)
        _close(backend.linear(x, w, b), ref.linear(x, w, b), rtol=2e-4, atol=2e-5)

    # --- embedding ---------------------------------------------------------
    @pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
    def test_embedding(self, backend, ref, rng, dtype):
        t32 = _rand(rng, 50, 24)
        table = BFloat16(f32_to_bf16(t32)) if dtype == "bfloat16" else t32.astype(dtype)
        self.need(backend, "embedding", dtype)
        ids = np.array([[0, 49, 7, 7, 3]], dtype=np.int64)
        _close(backend.embedding(table, ids), ref.embedding(table, ids), rtol=0, atol=0)

    # --- norms -------------------------------------------------------------
    @pytest.mark.parametrize("shape", [(1, 1, 8), (2, 5, 33), (1, 7, 256)])
    @pytest.mark.parametrize("unit_offset", [False, True])
    def test_rms_norm(self, backend, ref, rng, shape, unit_offset):
        self.need(backend, "rms_norm")
        x, w = _rand(rng, *shape, scale=3.0), _rand(rng, shape[-1])
        _close(
            backend.rms_norm(x, w, 1e-6, unit_offset=unit_offset),
            ref.rms_norm(x, w, 1e-6, unit_offset=unit_offset),
        )

    @pytest.mark.parametrize("affine", [True, False])
    def test_layer_norm(self, backend, ref, rng, affine):
        self.need(backend, "layer_norm")
        x = _rand(rng, 2, 9, 37, scale=2.0) + 1.5
        w, b = (_rand(rng, 37), _rand(rng, 37)) if affine else (None, None)
        _close(backend.layer_norm(x, w, b, 1e-12), ref.layer_norm(x, w, b, 1e-12))

    # --- rope --------------------------------------------------------------
    @pytest.mark.parametrize("head_dim,rotary_dim", [(8, 8), (64, 64), (32, 16)])
    @pytest.mark.parametrize("L,offset", [(1, 0), (1, 40), (9, 3)])
    def test_rope(self, backend, ref, rng, head_dim, rotary_dim, L, offset):
        self.need(backend, "rope")
        x = _rand(rng, 1, 3, L, head_dim)
        inv_freq = (1.0 / 10000 ** (np.arange(0, rotary_dim, 2) / rotary_dim)).astype(np.float32)
        pos = np.arange(offset, offset + L)
        _close(backend.rope(x, pos, inv_freq), ref.rope(x, pos, inv_freq), rtol=1e-4, atol=1e-5)

    # --- attention ---------------------------------------------------------
    @pytest.mark.parametrize(
        "Hq,Hkv,L,S,offset",
        [(4, 4, 5, 5, 0), (8, 2, 1, 13, 12), (6, 3, 4, 11, 7), (2, 1, 1, 1, 0)],
    )
    @pytest.mark.parametrize("window,softcap", [(None, None), (4, None), (None, 30.0)])
    def test_attention(self, backend, ref, rng, Hq, Hkv, L, S, offset, window, softcap):
        self.need(backend, "attention")
        d = 16
        q, k, v = _rand(rng, 1, Hq, L, d), _rand(rng, 1, Hkv, S, d), _rand(rng, 1, Hkv, S, d)
        kw = dict(scale=d**-0.5, q_offset=offset, sliding_window=window, softcap=softcap)
        _close(backend.attention(q, k, v, **kw), ref.attention(q, k, v, **kw), rtol=2e-4, atol=2e-5)

    def test_attention_bidirectional_with_mask(self, backend, ref, rng):
        self.need(backend, "attention")
        q, k, v = _rand(rng, 2, 4, 6, 8), _rand(rng, 2, 4, 6, 8), _rand(rng, 2, 4, 6, 8)
        mask = np.zeros((2, 1, 1, 6), dtype=np.float32)
        mask[1, ..., 4:] = np.finfo(np.float32).min  # padding in the second sequence
        kw = dict(scale=8**-0.5, causal=False, mask=mask)
        _close(backend.attention(q, k, v, **kw), ref.attention(q, k, v, **kw), rtol=2e-4, atol=2e-5)

    # --- activations and softmax -------------------------------------------
    @pytest.mark.parametrize("kind", ["silu", "gelu", "gelu_tanh", "relu"])
    def test_activation(self, backend, ref, rng, kind):
        self.need(backend, "activation")
        x = _rand(rng, 1, 3, 37, scale=4.0)
        _close(backend.activation(x, kind), ref.activation(x, kind))

    @pytest.mark.parametrize("kind", ["silu", "gelu_tanh", "gelu"])
    def test_gated_activation(self, backend, ref, rng, kind):
        self.need(backend, "gated_activation")
        g, u = _rand(rng, 1, 4, 65, scale=3.0), _rand(rng, 1, 4, 65)
        _close(backend.gated_activation(g, u, kind), ref.gated_activation(g, u, kind))

    def test_softmax(self, backend, ref, rng):
        self.need(backend, "softmax")
        x = _rand(rng, 3, 1, 29, scale=10.0)
        x[0, 0, :5] = -np.inf
        out = backend.softmax(x, axis=-1)
        _close(out, ref.softmax(x, axis=-1))
        np.testing.assert_allclose(out.sum(-1), 1.0, rtol=1e-5)

    # --- hadamard ----------------------------------------------------------
    @pytest.mark.parametrize("n,block", [(8, 8), (64, 16), (256, 256), (96, 32), (1, 1)])
    def test_hadamard(self, backend, ref, rng, n, block):
        self.need(backend, "hadamard")
        x = _rand(rng, 2, 3, n)
        y = backend.hadamard(x, block)
        _close(y, ref.hadamard(x, block))
        _close(backend.hadamard(y, block), x, rtol=1e-4, atol=1e-5)  # its own inverse

    # --- conv1d ------------------------------------------------------------
    @pytest.mark.parametrize("stride,padding,groups", [(1, 0, 1), (2, 1, 1), (1, 2, 4)])
    def test_conv1d(self, backend, ref, rng, stride, padding, groups):
        self.need(backend, "conv1d")
        x, w, b = _rand(rng, 1, 8, 19), _rand(rng, 12, 8 // groups, 3), _rand(rng, 12)
        kw = dict(stride=stride, padding=padding, groups=groups)
        _close(backend.conv1d(x, w, b, **kw), ref.conv1d(x, w, b, **kw))
