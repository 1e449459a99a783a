"""cpu_neon kernels against numpy_ref and exact formulas, beyond the shared suite:
the GEMM's K blocks and edge tiles, every float16 bit pattern, accuracy of the
vector exp/erf/tanh over wide ranges, long and masked attention, zero-copy use
of memory-mapped weights, errors, and plugin registration."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest
from safetensors.numpy import save_file

from cactus_core import plugins
from cactus_core.backends.numpy_ref import NumpyBackend
from cactus_core.errors import BackendError
from cactus_core.formats import BFloat16, QuantizedTensor, f32_to_bf16, pack_bits
from cactus_core.graph import Ops
from cactus_core.weights import SafetensorsFile


@pytest.fixture
def ref():
    return NumpyBackend()


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def _rand(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _as(w32, dtype):
    return BFloat16(f32_to_bf16(w32)) if dtype == "bfloat16" else w32.astype(dtype)


# --- linear ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("M,K,N", [(1, 1031, 67), (2, 513, 5), (7, 600, 66), (33, 257, 130), (5, 3, 9)])
def test_linear_blocks_and_tails(neon, ref, rng, dtype, M, K, N):
    """K past one 256-wide block and not a multiple of 4; M and N off the 4x4 tile grid."""
    w = _as(_rand(rng, N, K, scale=0.05), dtype)
    x, b = _rand(rng, M, K), _rand(rng, N)
    np.testing.assert_allclose(neon.linear(x, w, b), ref.linear(x, w, b), rtol=1e-5, atol=2e-5)


def test_linear_float16_bias_and_empty_batch(neon, ref, rng):
    w, b = _rand(rng, 12, 20), _rand(rng, 12).astype(np.float16)
    x = _rand(rng, 3, 20)
    np.testing.assert_allclose(neon.linear(x, w, b), ref.linear(x, w, b), rtol=1e-5, atol=1e-5)
    assert neon.linear(np.zeros((0, 20), np.float32), w).shape == (0, 12)


def test_linear_same_result_on_one_and_many_threads(neon_backend_class, rng):
    w, x = _rand(rng, 300, 700).astype(np.float16), _rand(rng, 9, 700)
    one, two = neon_backend_class(threads=1), neon_backend_class(threads=2)
    np.testing.assert_array_equal(one.linear(x, w), two.linear(x, w))
    np.testing.assert_array_equal(one.linear(x[:1], w), two.linear(x[:1], w))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_linear_reads_mmapped_weights_in_place(neon, ref, rng, tmp_path, dtype):
    """A read-only memory-mapped weight is used without a widened or contiguous copy."""
    w32 = _rand(rng, 512, 1024, scale=0.05)
    raw = f32_to_bf16(w32) if dtype == "bfloat16" else w32.astype(dtype)
    save_file({"w": raw.view(np.uint16) if dtype == "bfloat16" else raw}, str(tmp_path / "m.safetensors"))
    # The test writes bf16 as uint16 (numpy has no bf16), so wrap it as the loader would.
    w = SafetensorsFile(str(tmp_path / "m.safetensors")).get("w")
    w = BFloat16(w) if dtype == "bfloat16" else w
    assert not (w.raw if dtype == "bfloat16" else w).flags.writeable
    x = _rand(rng, 1, 1024)
    tracemalloc.start()
    y = neon.linear(x, w)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 64 * 1024, f"linear allocated {peak} bytes: the weight was copied"
    np.testing.assert_allclose(y, ref.linear(x, w), rtol=1e-5, atol=2e-5)


# --- CQ quantized weights --------------------------------------------------------
def _cq(rng, N, K, bits, d, group=64, block=128):
    from cactus_core.formats import CQTensor

    idx = rng.integers(0, 1 << bits, (N, K // d))
    meta = dict(index_bits=bits, vec_dim=d, group_size=group, block_size=block, seed=0)
    return CQTensor(
        (N, K), meta, codes=pack_bits(idx, bits),
        scales=(rng.random((N, K // group)) + 0.5).astype(np.float16),
        codebook=rng.standard_normal((1 << bits, d)).astype(np.float16),
        signs=rng.integers(0, 256, K // 8).astype(np.uint8),
    )


@pytest.mark.parametrize("bits,d", [(8, 2), (6, 2), (8, 4), (6, 1), (5, 1), (4, 1), (5, 2), (3, 1)])
@pytest.mark.parametrize("M", [1, 6])
def test_cq_linear_matches_dequantized_reference(neon, ref, rng, bits, d, M):
    """The CQ presets (8x2 = CQ4, 6x2 = CQ3, 8x4 = CQ2), the scalar heads (6x1 = cq6, 5x1 =
    cq5) and layouts without a special kernel."""
    if "cq" not in neon.formats:
        pytest.skip("this cactus_core has no CQ format")
    w, b = _cq(rng, 37, 256, bits, d), _rand(rng, 37)
    x = _rand(rng, 1, M, 256)
    want = ref.linear(x, w, b)
    np.testing.assert_allclose(neon.linear(x, w, b), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("bits", [6, 5])
@pytest.mark.parametrize("K,group,block", [(1024, 128, 128), (320, 80, 64), (960, 120, 64), (512, 256, 128)])
@pytest.mark.parametrize("M", [1, 3, 40])
def test_cq_scalar_head_layouts_match_reference(neon, ref, rng, bits, K, group, block, M):
    """cq6 / cq5 heads: groups of whole 64-code blocks (AVX-512 VBMI lookups where built) and
    groups that are not (80, 120: the NEON loops), decode (on AVX2 without VBMI, pshufb lookups of
    groups of 32 codes), small and panel-sized prefill."""
    w, b = _cq(rng, 70, K, bits, 1, group, block), _rand(rng, 70)
    x = _rand(rng, 1, M, K)
    want = ref.linear(x, w, b)
    np.testing.assert_allclose(neon.linear(x, w, b), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("fmt,bits", [("int4", 4), ("int8", 8)])
@pytest.mark.parametrize("group", [128, 32, 6])
@pytest.mark.parametrize("M", [1, 5])
def test_affine_int_linear_matches_reference(neon, ref, rng, fmt, bits, group, M):
    """RTN/GPTQ int4 and int8 groups, including a group size off the vector width."""
    if fmt not in neon.formats:
        pytest.skip(f"this cactus_core has no {fmt} format")
    from cactus_core.formats import QUANTIZED_FORMATS

    N, K = 37, 384
    q = rng.integers(0, 1 << bits, (N, K))
    w = QUANTIZED_FORMATS[fmt](
        (N, K), {"group_size": group}, codes=pack_bits(q, bits),
        scales=(rng.random((N, K // group)) * 0.1).astype(np.float16),
        biases=(rng.standard_normal((N, K // group)) * 0.1).astype(np.float16),
    )
    x, b = _rand(rng, 1, M, K), _rand(rng, N)
    want = ref.linear(x, w, b)
    np.testing.assert_allclose(neon.linear(x, w, b), want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


def _affine(rng, fmt, N, K, group):
    from cactus_core.formats import QUANTIZED_FORMATS

    bits = 4 if fmt == "int4" else 8
    return QUANTIZED_FORMATS[fmt](
        (N, K), {"group_size": group}, codes=pack_bits(rng.integers(0, 1 << bits, (N, K)), bits),
        scales=(rng.random((N, K // group)) * 0.1).astype(np.float16),
        biases=(rng.standard_normal((N, K // group)) * 0.1).astype(np.float16),
    )


@pytest.mark.parametrize("fmt", ["cq4", "cq2", "cq6", "cq5", "int4", "int8"])
def test_quantized_embedding_matches_reference(neon, ref, rng, fmt):
    """Rows decoded in C, in the original (unrotated) space, dispatched to cpu_neon (cq6 / cq5:
    the scalar-codebook tied heads)."""
    if fmt.startswith("cq"):
        if "cq" not in neon.formats:
            pytest.skip("this cactus_core has no CQ format")
        bits, d = {"cq4": (8, 2), "cq2": (8, 4), "cq6": (6, 1), "cq5": (5, 1)}[fmt]
        table = _cq(rng, 50, 256, bits, d)
    else:
        if fmt not in neon.formats:
            pytest.skip(f"this cactus_core has no {fmt} format")
        table = _affine(rng, fmt, 50, 192, 64)
    ops = Ops([neon, ref])
    assert ops.backend_for("embedding", table.format) == "cpu_neon"
    assert not neon.supports("conv1d", table.format)
    ids = np.array([[3, 0, 49], [7, 7, 1]])
    got, want = ops.embedding(table, ids), ref.embedding(table, ids)
    assert got.shape == (2, 3, table.shape[1])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())
    with pytest.raises(BackendError, match="out of range"):
        neon.embedding(table, np.array([50]))  # a BackendError, one line


def test_every_float16_bit_pattern_widens_exactly(neon):
    """Normals, subnormals, zeros, infinities and NaNs, through the vector and scalar paths."""
    words = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    table = words.view(np.float16).reshape(-1, 8)  # D = 8: vector loads
    got = neon.embedding(table, np.arange(table.shape[0]))
    want = table.astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))
    odd = words[:65535].view(np.float16).reshape(-1, 5)  # D = 5: the scalar tail too
    got, want = neon.embedding(odd, np.arange(odd.shape[0])), odd.astype(np.float32)
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))


def test_embedding_out_of_range_is_one_line_error(neon):
    with pytest.raises(BackendError, match=r"token id out of range"):
        neon.embedding(np.zeros((10, 4), np.float32), np.array([3, 10]))


# --- vector math ---------------------------------------------------------------
def test_gelu_exact_has_small_error_everywhere(neon):
    x = np.linspace(-12, 12, 200_001, dtype=np.float32)
    want = np.array([0.5 * v * math.erfc(-v / math.sqrt(2.0)) for v in x.astype(np.float64)])
    got = neon.activation(x, "gelu").astype(np.float64)
    assert np.max(np.abs(got - want)) < 1e-6
    rel = np.abs(got - want) / np.maximum(np.abs(want), 1e-30)
    assert np.max(rel[np.abs(want) > 1e-30]) < 5e-6  # relative accuracy even in the far tail


@pytest.mark.parametrize("kind", ["silu", "gelu_tanh", "relu", "gelu"])
def test_activations_over_wide_range(neon, ref, kind):
    extremes = [0.0, -0.0, 1e-30, -1e-30, 88.5, -88.5, 1e30, -1e30, 3e38, -3e38]
    x = np.concatenate([np.linspace(-100, 100, 40_003), extremes]).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):  # the reference overflows to inf, harmlessly
        want = ref.activation(x, kind)
    np.testing.assert_allclose(neon.activation(x, kind), want, rtol=2e-6, atol=1e-6)


def test_exp_is_accurate_up_to_overflow(neon, ref):
    """softmax of [0, x] is 1 / (1 + e^-x): exercises exp near both ends of float32."""
    x = np.linspace(-88.7, 88.7, 20_001).astype(np.float32)
    pairs = np.stack([np.zeros_like(x), x], axis=-1)
    np.testing.assert_allclose(neon.softmax(pairs), ref.softmax(pairs), rtol=2e-6, atol=1e-30)


def test_softmax_extremes_and_other_axis(neon, ref, rng):
    x = _rand(rng, 4, 3, 1000, scale=40.0)
    x[1, 2] = -np.inf  # a fully masked row gives zeros
    x[2, 0, :999] = -np.inf  # a single survivor gets probability 1
    np.testing.assert_allclose(neon.softmax(x), ref.softmax(x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(neon.softmax(x[0], axis=0), ref.softmax(x[0], axis=0), rtol=1e-5, atol=1e-7)


def test_rope_at_large_positions(neon, ref, rng):
    x = _rand(rng, 1, 2, 3, 128)
    inv = (1.0 / 500000 ** (np.arange(0, 128, 2) / 128)).astype(np.float32)
    pos = np.array([131000, 131001, 131002])
    np.testing.assert_allclose(neon.rope(x, pos, inv), ref.rope(x, pos, inv), rtol=1e-5, atol=1e-5)


def test_hadamard_matches_sylvester_matrix(neon, rng):
    h = np.array([[1.0]])
    for _ in range(5):
        h = np.block([[h, h], [h, -h]])
    x = _rand(rng, 3, 64)
    want = (x.reshape(3, 2, 32) @ h.T / math.sqrt(32)).reshape(3, 64)
    np.testing.assert_allclose(neon.hadamard(x, 32), want, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="power of two"):
        neon.hadamard(x, 24)


def test_unknown_activation_is_clear_error(neon):
    with pytest.raises(BackendError, match="unknown activation 'swish'"):
        neon.activation(np.zeros(4, np.float32), "swish")


# --- attention -----------------------------------------------------------------
@pytest.mark.parametrize("L,S,offset,window,causal", [
    (1, 700, 699, None, True),      # decode over a long cache
    (1, 700, 699, 64, True),        # decode with a sliding window
    (37, 37, 0, 16, True),          # prefill with a window
    (5, 40, 35, None, False),       # bidirectional
    (3, 10, 0, 0, True),            # a zero window hides every key: zeros like the reference
])
def test_attention_long_and_windowed(neon, ref, rng, L, S, offset, window, causal):
    q, k, v = _rand(rng, 2, 8, L, 64), _rand(rng, 2, 2, S, 64), _rand(rng, 2, 2, S, 64)
    kw = dict(scale=0.125, q_offset=offset, sliding_window=window, causal=causal, softcap=50.0)
    np.testing.assert_allclose(neon.attention(q, k, v, **kw), ref.attention(q, k, v, **kw), rtol=1e-5, atol=1e-6)


def test_attention_full_mask_and_noncontiguous_inputs(neon, ref, rng):
    q = _rand(rng, 1, 6, 4, 32).transpose(0, 2, 1, 3).copy().transpose(0, 2, 1, 3)  # strided view
    k, v = _rand(rng, 1, 3, 9, 32), _rand(rng, 1, 3, 9, 32)
    mask = _rand(rng, 6, 4, 9)  # broadcast over batch, per head
    mask[2, 1] = -np.inf  # one row sees nothing
    kw = dict(scale=32**-0.5, q_offset=5, mask=mask)
    got = neon.attention(q, k, v, **kw)
    np.testing.assert_allclose(got, ref.attention(q, k, v, **kw), rtol=1e-5, atol=1e-6)
    assert not got[0, 2, 1].any()
    with pytest.raises(BackendError, match="does not broadcast"):
        neon.attention(q, k, v, scale=1.0, mask=np.zeros((5, 9), np.float32))


def test_attention_reads_kv_cache_views_in_place(neon, ref, rng):
    """cache[:, :, :S] views of a preallocated cache (heads max_len * d apart) are not copied."""
    cache_k = np.zeros((2, 4, 2048, 64), np.float32)
    cache_v = np.zeros((2, 4, 2048, 64), np.float32)
    cache_k[:, :, :300], cache_v[:, :, :300] = _rand(rng, 2, 4, 300, 64), _rand(rng, 2, 4, 300, 64)
    k, v = cache_k[:, :, :300], cache_v[:, :, :300]
    assert not k.flags.c_contiguous
    q = _rand(rng, 2, 8, 1, 64)
    tracemalloc.start()
    got = neon.attention(q, k, v, scale=0.125, q_offset=299)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 64 * 1024, f"attention allocated {peak} bytes: the KV cache was copied"
    np.testing.assert_allclose(got, ref.attention(q, k, v, scale=0.125, q_offset=299), rtol=1e-5, atol=1e-6)
    # A batch-1 view with a single KV head takes the same path.
    np.testing.assert_allclose(
        neon.attention(q[:1, :2], k[:1, :1], v[:1, :1], scale=0.125, q_offset=299),
        ref.attention(q[:1, :2], k[:1, :1], v[:1, :1], scale=0.125, q_offset=299), rtol=1e-5, atol=1e-6,
    )


@pytest.mark.parametrize("L,S,d", [(1, 333, 64), (5, 40, 24), (3, 9, 20)])
def test_attention_reads_float16_kv_cache_in_place(neon, ref, rng, L, S, d):
    """A half-size KV cache (float16 views) is widened in registers, not copied."""
    cache_k = np.zeros((1, 2, 512, d), np.float16)
    cache_v = np.zeros((1, 2, 512, d), np.float16)
    cache_k[:, :, :S], cache_v[:, :, :S] = _rand(rng, 1, 2, S, d), _rand(rng, 1, 2, S, d)
    k, v = cache_k[:, :, :S], cache_v[:, :, :S]
    q = _rand(rng, 1, 6, L, d)
    kw = dict(scale=d**-0.5, q_offset=S - L, softcap=20.0, sliding_window=30)
    tracemalloc.start()
    got = neon.attention(q, k, v, **kw)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 32 * 1024 + q.nbytes, f"attention allocated {peak} bytes: the KV cache was copied"
    np.testing.assert_allclose(got, ref.attention(q, k, v, **kw), rtol=1e-5, atol=1e-6)


# --- dispatch and plugin -------------------------------------------------------
class _Fake4Bit(QuantizedTensor):
    format = "fake4"

    def dequantize(self):
        return np.ones(self.shape, np.float32)


def test_ops_dispatch_falls_back_for_other_formats_and_ops(neon, ref):
    ops = Ops([neon, ref])
    assert ops.backend_for("linear", "float16") == "cpu_neon"
    assert ops.backend_for("linear", "bfloat16") == "cpu_neon"
    assert ops.backend_for("linear", "fake4") == "numpy_ref"
    assert ops.backend_for("conv1d") == "numpy_ref"
    y = ops.linear(np.ones((1, 4), np.float32), _Fake4Bit((3, 4), {}))
    np.testing.assert_array_equal(y, np.full((1, 3), 4.0, np.float32))


def test_plugin_registers_cpu_neon_above_numpy_ref(register_plugin):
    from cactus_cpu_neon import plugin

    register_plugin(plugin, name="cpu_neon")
    infos = {b.name: b for b in plugins.backends()}
    assert infos["cpu_neon"].available and infos["cpu_neon"].priority > infos["numpy_ref"].priority
    chain = plugins.select_backends("cpu_neon")
    assert [b.name for b in chain] == ["cpu_neon", "numpy_ref"]


def test_plugin_reports_unbuilt_kernels_in_one_line(register_plugin, monkeypatch):
    from cactus_cpu_neon import backend, plugin

    def not_built():
        raise ImportError("No module named 'cactus_cpu_neon._kernels'")

    monkeypatch.setattr(backend, "load_kernels", not_built)
    register_plugin(plugin, name="cpu_neon")
    info = {b.name: b for b in plugins.backends()}["cpu_neon"]
    assert not info.available
    assert "\n" not in info.unavailable_reason and "pip install" in info.unavailable_reason
    with pytest.raises(BackendError, match="not usable here"):
        plugins.select_backends("cpu_neon")


def test_threads_follow_cactus_threads(neon_backend_class, monkeypatch):
    monkeypatch.setenv("CACTUS_THREADS", "1")
    assert neon_backend_class().threads == 1


def test_cached_norm_weight_still_checks_its_length(neon, rng):
    """Norm weights are cached per array; a later call with another width must still be refused."""
    from cactus_cpu_neon.backend import KernelArgumentError

    for dtype in (np.float32, np.float16):
        w = np.ones(64, dtype)
        neon.rms_norm(_rand(rng, 2, 64), w, 1e-6)
        with pytest.raises(KernelArgumentError, match="64 values but the input has 32 channels"):
            neon.rms_norm(_rand(rng, 2, 32), w, 1e-6)
