"""cpu_neon's fused ops beyond the conformance suite: CQ groups in one C call give the
very numbers of one call per weight (exact and int8-activation decode, prefill), share
one sign vector, and reject what they cannot run with one line."""

from __future__ import annotations

import numpy as np
import pytest

from cactus_core.backends.numpy_ref import NumpyBackend
from cactus_core.errors import BackendError
from cactus_core.graph import Ops

from test_kernels import _cq as random_cq


@pytest.fixture
def rng():
    return np.random.default_rng(5)


def _group(rng, Ns, K, layouts=((8, 2),), group=64, block=128, same_signs=True):
    """CQ weights reading one input; same_signs as the quantizer's shared seed gives them."""
    ws = [random_cq(rng, N, K, *layouts[i % len(layouts)], group, block) for i, N in enumerate(Ns)]
    if same_signs:
        for w in ws[1:]:
            w.arrays["signs"] = ws[0].arrays["signs"].copy()  # equal bytes, distinct arrays
    return ws


def _x(rng, M, K):
    return rng.standard_normal((1, M, K)).astype(np.float32)


def _need_cq(backend):
    if "cq" not in backend.formats:
        pytest.skip("this cactus_core has no CQ format")


@pytest.mark.parametrize("M", [1, 5])
@pytest.mark.parametrize("same_signs", [True, False])
@pytest.mark.parametrize("layouts", [((8, 2),), ((8, 2), (6, 2), (8, 4)), ((5, 2), (4, 1), (3, 1))])
def test_cq_multi_linear_equals_one_call_per_weight(neon, rng, M, same_signs, layouts):
    _need_cq(neon)
    ws = _group(rng, (96, 32, 32), 256, layouts, same_signs=same_signs)
    biases = [rng.standard_normal(96).astype(np.float32), None, rng.standard_normal(32).astype(np.float32)]
    x = _x(rng, M, 256)
    for b in (None, biases):
        got = neon.multi_linear(x, ws, b)
        for i, w in enumerate(ws):
            want = neon.linear(x, w, None if b is None else b[i])
            # Same kernels; decode rows go four at a time from where a thread's chunk
            # starts, so the last bit may differ where chunks are cut differently.
            np.testing.assert_allclose(got[i], want, rtol=1e-6, atol=1e-6 * np.abs(want).max())


@pytest.mark.parametrize("M", [1, 4])
def test_float_multi_linear_equals_one_call_per_weight(neon, rng, M):
    """Float32, float16 and bfloat16 weights in one call (one parallel region in decode)."""
    from cactus_core.formats import BFloat16, f32_to_bf16

    w32 = [rng.standard_normal((n, 96)).astype(np.float32) for n in (130, 40, 40)]
    ws = [w32[0], w32[1].astype(np.float16), BFloat16(f32_to_bf16(w32[2]))]
    x, b = _x(rng, M, 96), rng.standard_normal(40).astype(np.float32)
    got = neon.multi_linear(x, ws, [None, b, None])
    for g, w, bias in zip(got, ws, [None, b, None]):
        np.testing.assert_array_equal(g, neon.linear(x, w, bias))


# CQ4 since session 12 (4-bit scalars) shares x's int8 layout with 2-vectors: mixed, it is made once
@pytest.mark.parametrize("layouts", [((8, 2), (6, 2)), ((4, 1), (4, 1)), ((4, 1), (8, 2))])
def test_cq_multi_linear_int8_decode_equals_one_call_per_weight(neon_i8, rng, layouts):
    """One parallel region over every weight's rows, x rotated and quantized once: same numbers,
    and the pre-norm in the call is the rms_norm op's."""
    if not all(neon_i8._int8_for(bits, d) for bits, d in layouts):
        pytest.skip(f"this build has no native int8 kernel for one of {layouts}")
    ws = _group(rng, (128, 64, 64), 512, layouts, group=128)
    x = _x(rng, 1, 512)
    got = neon_i8.multi_linear(x, ws)
    for g, w in zip(got, ws):
        np.testing.assert_array_equal(g, neon_i8.linear(x, w))
    norm = (rng.standard_normal(512).astype(np.float32), 1e-6, True)
    xn = neon_i8.rms_norm(x, *norm)
    for g, w in zip(neon_i8.multi_linear(x, ws, None, norm), ws):
        np.testing.assert_array_equal(g, neon_i8.linear(xn, w))
    g = neon_i8.gated_linear(x, ws[1], ws[2], "silu")
    parts = neon_i8.linear(x, ws[1]), neon_i8.linear(x, ws[2])
    np.testing.assert_array_equal(g, neon_i8.gated_activation(*parts, "silu"))


@pytest.mark.parametrize("M", [1, 4])
@pytest.mark.parametrize("kind", ["silu", "gelu_tanh"])
def test_cq_gated_linear_equals_its_parts(neon, rng, M, kind):
    _need_cq(neon)
    gate, up = _group(rng, (80, 80), 256)
    x, gb = _x(rng, M, 256), rng.standard_normal(80).astype(np.float32)
    want = neon.gated_activation(neon.linear(x, gate, gb), neon.linear(x, up), kind)
    got = neon.gated_linear(x, gate, up, kind, gb, None)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())
    ref = NumpyBackend()
    np.testing.assert_allclose(want, ref.gated_linear(x, gate, up, kind, gb), rtol=1e-4, atol=1e-4)


def test_tensors_with_equal_signs_share_one_sign_array(neon, rng):
    _need_cq(neon)
    a, b, c = _group(rng, (32, 32), 256) + _group(rng, (32,), 256)
    sa, sb, sc = (neon._cq_prep(w)[0][0] for w in (a, b, c))
    assert sa is sb and sc is not sa


def test_ops_sends_cq_groups_to_cpu_neon_and_composes_the_rest(neon, rng):
    _need_cq(neon)
    from test_kernels import _affine

    ops = Ops([neon, NumpyBackend()])
    assert ops.backend_for("multi_linear", "cq") == "cpu_neon"
    assert ops.backend_for("gated_linear", "float16") == "cpu_neon"
    assert ops.backend_for("multi_linear", "int4") == "composed"  # int4 linear runs on cpu_neon, one call each
    assert ops.backend_for("rope_qk") == "cpu_neon"
    cq, i4 = random_cq(rng, 32, 128, 8, 2), _affine(rng, "int4", 32, 128, 32)
    x = _x(rng, 1, 128)
    got = ops.multi_linear(x, (cq, i4))  # mixed formats: each weight to its own backend
    np.testing.assert_array_equal(got[0], neon.linear(x, cq))
    np.testing.assert_array_equal(got[1], neon.linear(x, i4))


def test_bad_groups_are_one_line_errors(neon, rng):
    _need_cq(neon)
    a, b = random_cq(rng, 32, 256, 8, 2), random_cq(rng, 32, 128, 8, 2)
    x = _x(rng, 1, 256)
    cases = [
        (lambda: neon.multi_linear(x, [a, b]), "one input size"),
        (lambda: neon.multi_linear(x[..., :128], [b, b]), None),  # fine: a group may repeat a weight
        (lambda: neon.multi_linear(x, [a] * 9), "1 to 8 weights"),
        (lambda: neon.multi_linear(x[..., :100], [a, a]), "features"),
        (lambda: neon.multi_linear(x, [a, a], [None]), "biases"),
        (lambda: neon.gated_linear(x, a, random_cq(rng, 16, 256, 8, 2), "silu"), "outputs"),
        (lambda: neon.gated_linear(x, a, a, "swish"), "unknown activation"),
        (lambda: neon.rope_qk(np.zeros((1, 2, 3, 8), np.float32), np.zeros((1, 1, 2, 8), np.float32),
                              np.arange(3), np.ones(4, np.float32)), "same (L, head_dim)"),
        (lambda: neon.rope_qk(np.zeros((1, 2, 3, 8), np.float32), np.zeros((1, 1, 3, 8), np.float32),
                              np.arange(2), np.ones(4, np.float32)), "positions"),
        (lambda: neon.rope_qk(np.zeros((1, 2, 1, 8), np.float32), np.zeros((1, 1, 1, 8), np.float32),
                              np.arange(1), np.ones(4, np.float32), np.ones(5, np.float32)), "q_norm"),
    ]
    for call, words in cases:
        if words is None:
            call()
            continue
        with pytest.raises(BackendError) as err:
            call()
        assert words in str(err.value) and "\n" not in str(err.value), str(err.value)


def test_float_group_reads_mmapped_weights_without_copies(neon, rng):
    """Float groups hand C the weights in place (a copy would show in tracemalloc)."""
    import tracemalloc

    ws = [rng.standard_normal((512, 256)).astype(np.float16) for _ in range(3)]
    x = _x(rng, 1, 256)
    neon.multi_linear(x, ws)  # builds the group once
    tracemalloc.start()
    neon.multi_linear(x, ws)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 * 1024, peak  # the outputs (6 KB) and small objects, not 768 KB of weights


def test_bench_python_only_times_the_python_of_a_step(neon_backend_class, register_plugin):
    """``bench --python-only``: C stubbed for the timing, then put back."""
    import os

    import cactus_cpu_neon.backend as backend_module
    from cactus_cpu_neon import bench, plugin

    register_plugin(plugin, name="cpu_neon")
    spine = os.path.join(os.path.dirname(__file__), "..", "..", "models", "spine")
    if not os.path.isdir(spine):
        pytest.skip("no default model in this checkout")
    before = os.environ.get("CACTUS_THREADS")
    r = bench.python_only(spine, tokens=4, rounds=1)
    assert 0 < r["python_ms_per_token"] < 1000
    assert backend_module.np is np and os.environ.get("CACTUS_THREADS") == before


@pytest.mark.parametrize("d", [3, 8])  # 3: the scalar rounding; 8: the vector convert
def test_cached_attention_rounds_to_float16_like_numpy(neon, rng, d):
    """Every kind of float32 (subnormal halves, ties, overflow, inf, NaN) stored as numpy would."""
    bits = rng.integers(0, 1 << 32, 1 << 16, dtype=np.uint64).astype(np.uint32)
    bits[: 1 << 14] = (np.arange(1 << 14, dtype=np.uint32) << 18) | 0x1000  # exponent sweep, tie-ish mantissas
    vals = bits.view(np.float32)
    H = vals.size // d
    k = vals[: H * d].reshape(1, H, 1, d)
    q = np.zeros((1, H, 1, d), np.float32)
    ck, cv = np.zeros((1, H, 4, d), np.float16), np.zeros((1, H, 4, d), np.float16)
    with np.errstate(all="ignore"):
        neon.cached_attention(q, k, k, ck, cv, 2, scale=1.0)
        want = k[:, :, 0].astype(np.float16)
    got = ck[:, :, 2]
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got[~nan].view(np.uint16), want[~nan].view(np.uint16))
    assert not ck[:, :, [0, 1, 3]].any() and np.array_equal(cv.view(np.uint16), ck.view(np.uint16))


def test_cached_attention_checks_the_cache_fits(neon, rng):
    q, k = np.zeros((1, 4, 3, 8), np.float32), np.zeros((1, 2, 3, 8), np.float32)
    ck = np.zeros((1, 2, 10, 8), np.float16)
    with pytest.raises(BackendError, match="do not fit a cache"):
        neon.cached_attention(q, k, k, ck, ck.copy(), 8, scale=1.0)
    view = np.zeros((1, 2, 20, 8), np.float16)[:, :, :10]  # not contiguous: the composition runs
    out = neon.cached_attention(q, k, k, view, view.copy(), 0, scale=1.0)
    assert out.shape == q.shape


def test_groups_do_not_keep_their_weights_alive(neon, rng):
    """A model dropped (weights freed) takes its cached groups with it: nothing leaks."""
    import gc
    import weakref

    ws = [rng.standard_normal((16, 32)).astype(np.float16) for _ in range(3)]
    cq = _group(rng, (16, 16), 128) if "cq" in neon.formats else []
    neon.multi_linear(_x(rng, 1, 32), ws)
    if cq:
        neon.gated_linear(_x(rng, 1, 128), *cq, "silu")
    alive = [weakref.ref(w) for w in ws + cq]
    assert neon._groups
    del ws, cq
    gc.collect()
    assert not any(r() is not None for r in alive) and not neon._groups


def test_kernels_built_from_older_sources_are_reported_in_one_line(neon_backend_class, monkeypatch):
    import cactus_cpu_neon.backend as backend_module

    monkeypatch.setattr(backend_module, "_REQUIRED", backend_module._REQUIRED + ("cn_not_built_yet",))
    reason = backend_module.unavailable_reason()
    assert "predate" in reason and "cn_not_built_yet" in reason and "pip install" in reason and "\n" not in reason
