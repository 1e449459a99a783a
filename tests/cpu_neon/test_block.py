"""cpu_neon's fused ``decoder_block``: a whole Llama / Mistral / Qwen3 block of one decoded
token in one C call gives, bit for bit, what the op-by-op composition gives (output and
the K/V written to the cache), for CQ (exact and int8-activation decode) and float
weights; everything else composes; bad input gets one line."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from cactus_core.backends.numpy_ref import NumpyBackend
from cactus_core.errors import BackendError
from cactus_core.formats import BFloat16, f32_to_bf16
from cactus_core.graph import Backend, DecoderBlock, Ops

from test_kernels import _cq as random_cq


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def _weights(rng, fmt, shapes, bits=8, d=2, group=64):
    if fmt == "cq":
        ws = [random_cq(rng, N, K, bits, d, group) for N, K in shapes]
        for w in ws:  # one quantization seed: one sign vector per input size, as convert writes
            same = next(v for v in ws if v.shape[1] == w.shape[1])
            w.arrays["signs"] = same.arrays["signs"].copy()
        return ws
    ws = [(rng.standard_normal((N, K)) * K**-0.5).astype(np.float32) for N, K in shapes]
    if fmt == "bfloat16":
        return [BFloat16(f32_to_bf16(w)) for w in ws]
    return [w.astype(fmt) for w in ws]


def _block(rng, fmt="cq", D=256, F=384, H=4, Hkv=2, hd=64, qk_norm=True, bias=False, window=None, **layout):
    shapes = [(H * hd, D), (Hkv * hd, D), (Hkv * hd, D), (D, H * hd), (F, D), (F, D), (D, F)]
    q, k, v, o, gate, up, down = _weights(rng, fmt, shapes, **layout)

    def vec(n, around=0.0):
        return (around + 0.1 * rng.standard_normal(n)).astype(np.float32)

    biases = [vec(n) for n, _ in shapes] if bias else [None] * 7
    return DecoderBlock(
        attn_norm=vec(D, 1.0), mlp_norm=vec(D, 1.0), eps=1e-6, qkv=(q, k, v),
        qkv_bias=tuple(biases[:3]) if bias else None, q_norm=vec(hd, 1.0) if qk_norm else None,
        k_norm=vec(hd, 1.0) if qk_norm else None,
        inv_freq=(1.0 / 10000 ** (np.arange(0, hd, 2) / hd)).astype(np.float32), n_heads=H, n_kv_heads=Hkv,
        head_dim=hd, scale=hd**-0.5, sliding_window=window, o_proj=o, o_bias=biases[3], gate=gate, up=up, down=down,
        gate_bias=biases[4], up_bias=biases[5], down_bias=biases[6], act="silu")


def _cache(rng, blk, max_len, offset, dtype):
    """One layer's (1, Hkv, max_len, d) cache with offset positions already filled."""
    ck = np.zeros((1, blk.n_kv_heads, max_len, blk.head_dim), dtype)
    cv = np.zeros_like(ck)
    ck[:, :, :offset] = rng.standard_normal((1, blk.n_kv_heads, offset, blk.head_dim))
    cv[:, :, :offset] = rng.standard_normal((1, blk.n_kv_heads, offset, blk.head_dim))
    return ck, cv


def _fused_and_composed(backend, blk, x, ck, cv, offset):
    k2, v2 = ck.copy(), cv.copy()
    got = backend.decoder_block(x, blk, ck, cv, offset)
    want = Backend.decoder_block(backend, x, blk, k2, v2, offset)
    return got, want, (ck, cv), (k2, v2)


def _assert_same(backend, blk, x, ck, cv, offset):
    got, want, caches, ref_caches = _fused_and_composed(backend, blk, x, ck, cv, offset)
    assert got.dtype == np.float32 and got.shape == x.shape
    assert np.isfinite(got).all() and np.abs(got - x).max() > 0  # the block did something
    np.testing.assert_array_equal(got, want)
    for a, b in zip(caches, ref_caches):
        np.testing.assert_array_equal(a, b)
    assert np.abs(caches[0][:, :, offset].astype(np.float32)).max() > 0  # the new key was stored


@pytest.mark.parametrize("offset", [0, 1, 37])
@pytest.mark.parametrize("kv", [np.float16, np.float32])
@pytest.mark.parametrize("qk_norm,bias,window", [(True, False, None), (False, True, None), (False, False, 8)])
def test_cq_block_equals_composition(neon, rng, offset, kv, qk_norm, bias, window):
    blk = _block(rng, "cq", qk_norm=qk_norm, bias=bias, window=window)
    x = rng.standard_normal((1, 1, 256)).astype(np.float32)
    ck, cv = _cache(rng, blk, 48, offset, kv)
    _assert_same(neon, blk, x, ck, cv, offset)


@pytest.mark.parametrize("bits,d,group", [(8, 2, 64), (8, 2, 128), (6, 2, 64), (8, 4, 128), (4, 1, 64), (4, 1, 128)])
@pytest.mark.parametrize("offset", [0, 20])
def test_int8_activation_block_equals_composition(neon_i8, rng, bits, d, group, offset):
    """The default fast path (int8-activation decode): the same kernels, so the same bits."""
    if not neon_i8._int8_for(bits, d):
        pytest.skip(f"this build has no native int8 kernel for {bits}-bit codes of {d}-vectors")
    blk = _block(rng, "cq", bits=bits, d=d, group=group)
    assert neon_i8._block_args(blk).cq[3].cb_q8 != neon_i8._ffi.NULL  # o_proj takes the int8 kernel
    x = rng.standard_normal((1, 1, 256)).astype(np.float32)
    _assert_same(neon_i8, blk, x, *_cache(rng, blk, 32, offset, np.float16), offset)


def test_block_gives_the_same_bits_on_every_call(neon_backend_class, rng):
    """The thread pool cuts each region at fixed boundaries and threads steal whole pieces
    of each other's runs, so which thread ran a row never shows.  CQ2's exact decode is the
    gather kernel, whose rows go four at a time within a piece: a split that moved with
    the timing would change bits."""
    backend = neon_backend_class(threads=2, int8_activations=False, bf16_prefill=False)
    blk = _block(rng, "cq", D=512, F=1024, H=8, Hkv=4, hd=64, bits=8, d=4, group=128)
    x = rng.standard_normal((1, 1, 512)).astype(np.float32)
    ck, cv = _cache(rng, blk, 64, 40, np.float16)
    first = backend.decoder_block(x, blk, ck.copy(), cv.copy(), 40)
    for _ in range(30):
        np.testing.assert_array_equal(backend.decoder_block(x, blk, ck.copy(), cv.copy(), 40), first)
    _assert_same(backend, blk, x, ck, cv, 40)


@pytest.mark.parametrize("hq,hkv,hd,window", [(16, 8, 128, None), (32, 8, 64, 50), (12, 2, 80, None)])
@pytest.mark.parametrize("kv", [np.float16, np.float32])
def test_decode_attention_on_model_shapes(neon, rng, hq, hkv, hd, window, kv):
    """One-token attention over contexts of 1-300 keys on Qwen3-0.6B's heads (16 over 8 of 128),
    Llama-3.2-1B's (32 over 8 of 64) and an odd group (6 per KV head, 80 wide), against
    numpy_ref: the block's attention.  On AVX-512 builds this is attention_avx512.c, which
    sums in another order than the NEON kernel: close, not bit for bit."""
    ref = NumpyBackend()
    for S in (1, 3, 4, 5, 67, 300):
        q = rng.standard_normal((1, hq, 1, hd)).astype(np.float32)
        k = rng.standard_normal((1, hkv, S, hd)).astype(kv)
        v = rng.standard_normal((1, hkv, S, hd)).astype(kv)
        kw = dict(scale=hd**-0.5, q_offset=S - 1, sliding_window=window)
        got = neon.attention(q, k, v, **kw)
        want = ref.attention(q, k.astype(np.float32), v.astype(np.float32), **kw)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())


def test_one_position_rope_table_is_remade_when_its_inputs_change(neon, rng):
    """One-token rope_qk keeps each thread's last table of angles (one per token instead of
    one per layer); a new position, other frequencies in the same array, or another
    rotary width must each give their own rotation, and a repeat the same bits."""
    ref = NumpyBackend()
    q = rng.standard_normal((1, 4, 1, 64)).astype(np.float32)
    k = rng.standard_normal((1, 2, 1, 64)).astype(np.float32)
    inv = (1.0 / 10000 ** (np.arange(0, 64, 2) / 64)).astype(np.float32)
    cases = [(7, inv), (7, inv), (8, inv), (7, inv.copy()), (7, inv * 1.5), (7, inv[:16].copy()), (0, inv),
             (100000, inv)]
    for pos, freqs in cases:
        positions = np.array([pos], dtype=np.int64)
        got_q, got_k = neon.rope_qk(q, k, positions, freqs)
        np.testing.assert_allclose(got_q, ref.rope(q, positions, freqs), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got_k, ref.rope(k, positions, freqs), rtol=1e-5, atol=1e-5)
        assert np.array_equal(got_q, neon.rope_qk(q, k, positions, freqs)[0])
    inv[:] *= 0.5  # the same array, new contents
    np.testing.assert_allclose(neon.rope_qk(q, k, np.array([7]), inv)[0], ref.rope(q, np.array([7]), inv),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fmt", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("bias", [False, True])
def test_float_block_equals_composition(neon, rng, fmt, bias):
    blk = _block(rng, fmt, D=96, F=160, H=6, Hkv=3, hd=16, bias=bias)
    x = rng.standard_normal((1, 1, 96)).astype(np.float32)
    _assert_same(neon, blk, x, *_cache(rng, blk, 16, 5, np.float16), 5)


def test_block_dispatch_and_fallbacks(neon, rng):
    ops = Ops([neon, NumpyBackend()])
    for fmt in ("cq", "float16", "float32"):
        assert ops.backend_for("decoder_block", fmt) == "cpu_neon"
    assert ops.backend_for("decoder_block", "int8") == "composed"  # int4 / int8 linears compose
    blk = _block(rng, "cq")
    # prefill (several tokens) and batches run the ops one by one: same numbers as composing
    x = rng.standard_normal((1, 5, 256)).astype(np.float32)
    got, want, caches, ref_caches = _fused_and_composed(neon, blk, x, *_cache(rng, blk, 16, 3, np.float32), 3)
    np.testing.assert_array_equal(got, want)
    # a cache that is not one contiguous preallocated layer: composed, same result
    ck, cv = _cache(rng, blk, 32, 4, np.float32)
    x1 = x[:, :1].copy()
    want = Backend.decoder_block(neon, x1, blk, ck.copy()[:, :, :20], cv.copy()[:, :, :20], 4)
    np.testing.assert_array_equal(neon.decoder_block(x1, blk, ck[:, :, :20], cv[:, :, :20], 4), want)
    # weights of mixed formats: Ops composes (each projection on its own backend)
    mixed = _block(rng, "float32")
    mixed.o_proj = mixed.o_proj.astype(np.float16)
    mixed.__post_init__()
    assert mixed.format is None
    ck, cv = _cache(rng, mixed, 32, 4, np.float32)
    want = Backend.decoder_block(ops, x1, mixed, ck.copy(), cv.copy(), 4)
    np.testing.assert_array_equal(ops.decoder_block(x1, mixed, ck, cv, 4), want)


def test_block_bad_input_one_line(neon, rng):
    blk = _block(rng, "cq")
    ck, cv = _cache(rng, blk, 8, 0, np.float16)
    with pytest.raises(BackendError, match="features") as err:
        neon.decoder_block(np.zeros((1, 1, 128), np.float32), blk, ck, cv, 0)
    assert "\n" not in str(err.value)
    with pytest.raises(BackendError, match="does not fit"):
        neon.decoder_block(np.zeros((1, 1, 256), np.float32), blk, ck, cv, 8)
    bad = _block(rng, "cq")
    bad.down = random_cq(rng, 200, 384, 8, 2)
    with pytest.raises(BackendError, match="weight shapes"):
        neon.decoder_block(np.zeros((1, 1, 256), np.float32), bad, ck, cv, 0)


def test_block_state_is_dropped_with_block_and_cache(neon, rng):
    """Per-block C arguments and per-cache pointers go with their objects: a dead generator's
    cache is never kept alive (its pointers are bare addresses)."""
    import gc
    import weakref

    blk = _block(rng, "cq")
    ck, cv = _cache(rng, blk, 8, 2, np.float16)
    neon.decoder_block(rng.standard_normal((1, 1, 256)).astype(np.float32), blk, ck, cv, 2)
    alive = weakref.ref(ck)
    assert len(neon._caches) == 1 and len(neon._blocks) == 1
    del ck, cv, blk
    gc.collect()
    assert alive() is None and not neon._caches and not neon._blocks


@pytest.mark.parametrize("name", ["qwen3-gqa", "llama-bias-headdim", "mistral-sliding"])
def test_models_decode_the_same_with_the_block_op(neon_backend_class, name, tmp_path):
    """Whole models: greedy decode with one C call per step (every block inside it), and with
    one C call per block, gives the logits of the op-by-op path bit for bit (float32
    checkpoints, the default float16 cache)."""
    pytest.importorskip("torch")  # test_models builds the checkpoints with transformers
    test_models = pytest.importorskip("test_models")
    from cactus_core.generate import Generator
    from cactus_core.models import model_module
    from cactus_core.weights import load_weights

    _, path = test_models.build_reference(name, tmp_path)
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    logits = []
    for fused in ("stack", "block", None):
        neon = neon_backend_class(int8_activations=False, bf16_prefill=False)
        if fused != "stack":  # what Ops runs for a backend without the op: its composition
            neon.decoder_stack = lambda x, b, kv, o, n=neon: Backend.decoder_stack(n, x, b, kv, o)
        if fused is None:
            neon.decoder_block = lambda x, b, k, v, o, n=neon: Backend.decoder_block(n, x, b, k, v, o)
        ops = Ops([neon, NumpyBackend()])
        model = model_module(config).Model(config, load_weights(path), ops)
        gen = Generator(model)
        out, _ = gen.prefill([5, 17, 42, 99])
        steps = [out]
        for _ in range(12):
            steps.append(gen.step(int(np.argmax(steps[-1]))))
        logits.append(np.stack(steps))
        assert len(neon._stacks) == (fused == "stack")  # the stack call did run (or did not)
    np.testing.assert_array_equal(logits[0], logits[2])
    np.testing.assert_array_equal(logits[1], logits[2])



def test_bench_breakdown_splits_a_step_by_entry_point(neon_backend_class, register_plugin):
    """``bench --breakdown`` on the default model (float16, Llama blocks): one stack call per
    token, which runs one block per layer inside C."""
    from cactus_cpu_neon import bench, plugin

    register_plugin(plugin, name="cpu_neon")
    spine = os.path.join(os.path.dirname(__file__), "..", "..", "models", "spine")
    if not os.path.isdir(spine):
        pytest.skip("no default model in this checkout")
    with open(os.path.join(spine, "config.json")) as f:
        layers = json.load(f)["num_hidden_layers"]
    r = bench.breakdown(spine, tokens=4, context=3)
    assert r["calls"]["cn_decoder_stack"]["calls"] == 1 and "cn_decoder_block" not in r["calls"]
    assert r["blocks_per_token"] == layers and r["context"] == [3, 7]
    assert 0 < r["ms_outside_c_per_token"] < r["ms_per_token"]
    block_ms = r["calls"]["cn_decoder_stack"]["ms_per_token"]
    assert block_ms < r["ms_per_token"]
    # The block's own phase timer: every phase ran, the weight phases read bytes, and the
    # phases account for the calls' time (the rest is the call's own setup and the timer).
    phases = r["block_phases"]
    assert len(phases) == 6 and all(p["ms_per_token"] > 0 for p in phases.values())
    assert {name for name, p in phases.items() if "GBps" in p} == {
        "q/k/v (norm, rotation)", "o_proj + residual", "gate/up (norm, act)", "down + residual"}
    assert 0.5 * block_ms < sum(p["ms_per_token"] for p in phases.values()) <= block_ms


def _stack(rng, n, kv=np.float16, max_len=24, offset=6, **kw):
    """n blocks and one cache's layers, as a model and a KVCache hold them."""
    blocks = tuple(_block(rng, **kw) for _ in range(n))
    keys = np.zeros((n, 1, blocks[0].n_kv_heads, max_len, blocks[0].head_dim), kv)
    values = np.zeros_like(keys)
    keys[:, :, :, :offset] = rng.standard_normal(keys[:, :, :, :offset].shape)
    values[:, :, :, :offset] = rng.standard_normal(values[:, :, :, :offset].shape)
    return blocks, keys, values


@pytest.mark.parametrize("fmt,kv", [("cq", np.float16), ("cq", np.float32), ("float16", np.float16)])
def test_stack_equals_the_blocks_one_by_one(neon_i8, rng, fmt, kv):
    """One C call for all layers gives bit for bit what one call per block gives, and what
    the composition gives: the output and every layer's new K/V."""
    blocks, keys, values = _stack(rng, 3, kv, fmt=fmt)
    x = rng.standard_normal((1, 1, 256)).astype(np.float32)
    caches = [(keys.copy(), values.copy()) for _ in range(3)]
    layers = [list(zip(k, v)) for k, v in caches]
    got = neon_i8.decoder_stack(x, blocks, layers[0], 6)
    h = x
    for blk, (ck, cv) in zip(blocks, layers[1]):
        h = neon_i8.decoder_block(h, blk, ck, cv, 6)
    want = Backend.decoder_stack(Ops([NumpyBackend()]), x, blocks, layers[2], 6) if fmt != "cq" else None
    np.testing.assert_array_equal(got, h)
    np.testing.assert_array_equal(caches[0][0], caches[1][0])
    np.testing.assert_array_equal(caches[0][1], caches[1][1])
    assert len(neon_i8._stacks) == 1
    assert np.abs(caches[0][0][2, :, :, 6].astype(np.float32)).max() > 0  # the last layer stored its key
    if want is not None:  # numpy_ref's composition: the same math, other rounding
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)
    again = neon_i8.decoder_stack(x, blocks, list(zip(keys.copy(), values.copy())), 6)
    np.testing.assert_array_equal(again, got)  # a second cache: its own pointers, same result


def test_stack_falls_back_block_by_block(neon, rng):
    """Prefill, and a layer whose cache the C call does not take, run block by block: the
    same numbers as the composition, and nothing is cached for the stack."""
    blocks, keys, values = _stack(rng, 2, np.float32)
    x = rng.standard_normal((1, 4, 256)).astype(np.float32)
    want = Backend.decoder_stack(neon, x, blocks, list(zip(keys.copy(), values.copy())), 6)
    np.testing.assert_array_equal(neon.decoder_stack(x, blocks, list(zip(keys, values)), 6), want)
    x1 = x[:, :1].copy()
    layers = [(keys[0], values[0]), (keys[1][:, :, :20], values[1][:, :, :20])]  # not the whole preallocation
    want = Backend.decoder_stack(neon, x1, blocks, [(k.copy(), v.copy()) for k, v in layers], 6)
    np.testing.assert_array_equal(neon.decoder_stack(x1, blocks, layers, 6), want)
    assert not neon._stacks


def test_stack_bad_input_one_line_and_state_goes_with_the_model(neon, rng):
    import gc
    import weakref

    blocks, keys, values = _stack(rng, 2)
    layers = list(zip(keys, values))
    with pytest.raises(BackendError, match="features") as err:
        neon.decoder_stack(np.zeros((1, 1, 128), np.float32), blocks, layers, 0)
    assert "\n" not in str(err.value)
    with pytest.raises(BackendError, match="does not fit"):
        neon.decoder_stack(np.zeros((1, 1, 256), np.float32), blocks, layers, 24)
    assert len(neon._stacks) == 1
    alive = weakref.ref(blocks[0])
    del blocks, layers, keys, values, err  # err's traceback holds the call's frame
    gc.collect()
    assert alive() is None and not neon._stacks and not neon._blocks and not neon._caches
