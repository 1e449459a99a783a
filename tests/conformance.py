"""The shared backend conformance suite.

Every backend runs these tests against numpy_ref.  A plugin reuses them by
subclassing and providing a ``backend`` fixture::

    from conformance import BackendConformance

    class TestMyBackend(BackendConformance):
        @pytest.fixture
        def backend(self):
            return MyBackend()

Ops a backend does not implement (``supports(op)`` is false) are skipped with
that reason, because dispatch falls back to numpy_ref for them.  The fused ops
(``graph.FUSED_OPS``) run on every backend: one that does not implement them
inherits ``Backend``'s composition of its own ops, which must agree too.
Tolerances are for float32 arithmetic that may reassociate sums.
"""

from __future__ import annotations

import numpy as np
import pytest

from cactus_core.backends.numpy_ref import NumpyBackend
from cactus_core.formats import BFloat16, f32_to_bf16
from cactus_core.graph import FUSED_OPS

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

    def need_fused(self, backend, op, fmt=None, *parts):
        """A fused op runs on the backend itself, or as its composition of ``parts``."""
        if not backend.supports(op, fmt):
            for part in (FUSED_OPS[op],) + parts:
                self.need(backend, part, fmt if part == "linear" else None)

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

    # --- fused ops -----------------------------------------------------------
    @pytest.mark.parametrize("L", [1, 4])
    @pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
    @pytest.mark.parametrize("biased", [False, True])
    @pytest.mark.parametrize("normed", [None, False, True])  # no pre-norm; RMSNorm; with unit offset
    def test_multi_linear(self, backend, ref, rng, L, dtype, biased, normed):
        self.need_fused(backend, "multi_linear", dtype, *(("rms_norm",) if normed is not None else ()))
        ws32 = [_rand(rng, n, 48, scale=0.1) for n in (64, 16, 16)]  # q, k, v of a GQA layer
        ws = [BFloat16(f32_to_bf16(w)) if dtype == "bfloat16" else w.astype(dtype) for w in ws32]
        biases = [_rand(rng, 64), None, _rand(rng, 16)] if biased else None
        norm = None if normed is None else (_rand(rng, 48), 1e-6, normed)
        x = _rand(rng, 1, L, 48, scale=3.0)
        got, want = backend.multi_linear(x, ws, biases, norm), ref.multi_linear(x, ws, biases, norm)
        assert len(got) == 3
        for g, w in zip(got, want):
            _close(np.ascontiguousarray(g), w, rtol=2e-4, atol=2e-5)

    @pytest.mark.parametrize("kind", ["silu", "gelu_tanh", "gelu"])
    @pytest.mark.parametrize("L", [1, 5])
    def test_gated_linear(self, backend, ref, rng, kind, L):
        self.need_fused(backend, "gated_linear", "float16", "gated_activation")
        gate, up = _rand(rng, 40, 24, scale=0.3).astype(np.float16), _rand(rng, 40, 24, scale=0.3).astype(np.float16)
        x = _rand(rng, 1, L, 24)
        _close(backend.gated_linear(x, gate, up, kind), ref.gated_linear(x, gate, up, kind), rtol=2e-4, atol=2e-5)
        gb, ub = _rand(rng, 40), _rand(rng, 40)
        _close(backend.gated_linear(x, gate, up, kind, gb, ub), ref.gated_linear(x, gate, up, kind, gb, ub),
               rtol=2e-4, atol=2e-5)
        if backend.supports("gated_linear", "float16") or backend.supports("rms_norm"):
            norm = (_rand(rng, 24), 1e-6)  # the MLP's pre-norm in the same call
            _close(backend.gated_linear(x, gate, up, kind, norm=norm), ref.gated_linear(x, gate, up, kind, norm=norm),
                   rtol=2e-4, atol=2e-5)

    @pytest.mark.parametrize("normed", [False, True])
    @pytest.mark.parametrize("unit_offset", [False, True])
    @pytest.mark.parametrize("L,offset,rotary_dim", [(1, 0, 16), (1, 37, 16), (6, 3, 8)])
    def test_rope_qk(self, backend, ref, rng, normed, unit_offset, L, offset, rotary_dim):
        self.need_fused(backend, "rope_qk", None, "rms_norm")
        q, k = _rand(rng, 1, 4, L, 16, scale=2.0), _rand(rng, 1, 2, L, 16, scale=2.0)  # GQA: 4 query heads, 2 kv
        inv_freq = (1.0 / 10000 ** (np.arange(0, rotary_dim, 2) / rotary_dim)).astype(np.float32)
        pos = np.arange(offset, offset + L)
        norms = (_rand(rng, 16), _rand(rng, 16)) if normed else (None, None)
        got = backend.rope_qk(q, k, pos, inv_freq, *norms, 1e-6, unit_offset)
        want = ref.rope_qk(q, k, pos, inv_freq, *norms, 1e-6, unit_offset)
        for g, w in zip(got, want):
            _close(g, w, rtol=1e-4, atol=1e-5)

    @pytest.mark.parametrize("cache_dtype", ["float32", "float16"])
    @pytest.mark.parametrize("offset,L", [(0, 5), (7, 1), (9, 4)])
    @pytest.mark.parametrize("window,softcap", [(None, None), (4, 30.0)])
    def test_cached_attention(self, backend, ref, rng, cache_dtype, offset, L, window, softcap):
        self.need_fused(backend, "cached_attention")
        B, Hq, Hkv, d, max_len = 1, 4, 2, 16, 24
        prefix = _rand(rng, B, Hkv, offset, d).astype(cache_dtype)
        caches = []
        for _ in range(2):  # the backend's and the reference's, holding the same earlier positions
            ck, cv = np.zeros((B, Hkv, max_len, d), cache_dtype), np.zeros((B, Hkv, max_len, d), cache_dtype)
            ck[:, :, :offset], cv[:, :, :offset] = prefix, prefix[..., ::-1]
            caches.append((ck, cv))
        q, k, v = _rand(rng, B, Hq, L, d), _rand(rng, B, Hkv, L, d), _rand(rng, B, Hkv, L, d)
        kw = dict(scale=d**-0.5, sliding_window=window, softcap=softcap)
        got = backend.cached_attention(q, k, v, *caches[0], offset, **kw)
        want = ref.cached_attention(q, k, v, *caches[1], offset, **kw)
        _close(got, want, rtol=2e-4, atol=2e-5)
        for a, b in zip(caches[0], caches[1]):  # the new positions stored, rounded the same way
            np.testing.assert_array_equal(a, b)
