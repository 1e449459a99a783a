"""Fused ops (graph.FUSED_OPS) and their dispatch: a backend that implements one gets
it only where it runs the parts; every other chain composes them, so backends without
fused ops, and Ops subclasses that intercept ``linear``, keep working unchanged."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from cactus_core.backends.numpy_ref import NumpyBackend
from cactus_core.graph import Backend, Ops


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


class FusedF16(NumpyBackend):
    """Implements float16 linear and a (marked) fused multi_linear; nothing else."""

    name = "fused_f16"
    formats = frozenset({"float16"})

    def supports(self, op, fmt=None):
        return op in ("linear", "multi_linear") and super().supports(op, fmt)

    def multi_linear(self, x, ws, biases=None, norm=None):
        self.calls = getattr(self, "calls", 0) + 1
        return Backend.multi_linear(self, x, ws, biases, norm)


def test_fused_op_runs_where_its_parts_run_else_composes():
    rng = np.random.default_rng(0)
    fused = FusedF16()
    ops = Ops([fused, NumpyBackend()])
    assert ops.backend_for("multi_linear", "float16") == "fused_f16"
    assert ops.backend_for("multi_linear", "float32") == "composed"  # numpy_ref multiplies float32
    assert ops.backend_for("gated_linear", "float16") == "composed"  # fused_f16 lacks gated_linear
    assert ops.backend_for("rope_qk") == "composed"
    x = _rand(rng, 1, 2, 8)
    w16 = [_rand(rng, 4, 8).astype(np.float16) for _ in range(2)]
    w32 = _rand(rng, 4, 8)
    got = ops.multi_linear(x, w16)
    assert fused.calls == 1
    ref = NumpyBackend()
    for g, w in zip(got, w16):
        np.testing.assert_allclose(g, ref.linear(x, w), rtol=1e-6)
    ops.multi_linear(x, [w16[0], w32])  # mixed formats: one linear each, no fused call
    assert fused.calls == 1
    np.testing.assert_allclose(ops.gated_linear(x, *w16, "silu"),
                               ref.gated_activation(ref.linear(x, w16[0]), ref.linear(x, w16[1]), "silu"),
                               rtol=1e-6)


def test_ops_that_intercept_linear_see_every_projection(tmp_path):
    """Calibration (quality.RecordingOps) records each q/k/v and gate/up input by tensor name."""
    pytest.importorskip("torch")
    from test_models import build_reference

    from cactus_core.models import model_module
    from cactus_core.quality import RecordingOps
    from cactus_core.generate import Generator
    from cactus_core.weights import load_weights

    _, path = build_reference("qwen3-gqa", tmp_path)
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    ops = RecordingOps([NumpyBackend()])
    model = model_module(config).Model(config, load_weights(path), ops)
    model.forward(np.asarray([[1, 2, 3]]), Generator(model).cache)
    for i in range(config["num_hidden_layers"]):
        for name in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "mlp.gate_proj", "mlp.up_proj"):
            assert f"model.layers.{i}.{name}.weight" in ops.inputs, name


def test_cache_layer_and_update_store_alike_and_refuse_overflow():
    """Models hand KVCache.layer's arrays to cached_attention; update() (for other callers)
    stores the same values, and both refuse positions past the cache."""
    from cactus_core.generate import KVCache

    rng = np.random.default_rng(3)
    a, b = KVCache(2, 2, 8, 6, dtype=np.float16), KVCache(2, 2, 8, 6, dtype=np.float16)
    ref = NumpyBackend()
    for L in (3, 2):  # a prompt chunk, then more
        q, k, v = _rand(rng, 1, 4, L, 8), _rand(rng, 1, 2, L, 8), _rand(rng, 1, 2, L, 8)
        keys, values = b.update(1, k, v)
        want = ref.attention(q, keys, values, scale=0.3, q_offset=b.offset)
        got = ref.cached_attention(q, k, v, *a.layer(1, L), a.offset, scale=0.3)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(a.keys, b.keys)
        np.testing.assert_array_equal(a.values, b.values)
        a.advance(L), b.advance(L)
    with pytest.raises(ValueError, match="KV cache overflow"):
        a.layer(0, 2)
    with pytest.raises(ValueError, match="KV cache overflow"):
        b.update(0, k, v)


class StackCounter(NumpyBackend):
    """numpy_ref with a (marked) decoder_stack: counts the stack calls a model makes."""

    name = "stack_counter"

    def supports(self, op, fmt=None):
        return op in ("linear", "decoder_stack") and super().supports(op, fmt)

    def decoder_stack(self, x, blocks, layers, offset):
        self.calls = getattr(self, "calls", 0) + 1
        return Backend.decoder_stack(self, x, blocks, layers, offset)


def test_models_make_one_stack_call_per_step_unless_layers_are_captured(tmp_path):
    """Llama-family models run all layers as one ``decoder_stack`` call (the same hidden
    states as layer-by-layer blocks); with a capture (the probe) they go layer by layer,
    and KVCache.layers refuses positions past the cache."""
    pytest.importorskip("torch")
    from test_models import build_reference

    from cactus_core.generate import Generator, KVCache
    from cactus_core.models import model_module
    from cactus_core.weights import load_weights

    _, path = build_reference("qwen3-gqa", tmp_path)
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    counter = StackCounter()
    ops = Ops([counter, NumpyBackend()])
    assert ops.backend_for("decoder_stack", "float32") == "stack_counter"
    model = model_module(config).Model(config, load_weights(path), ops)
    ids = np.asarray([[1, 2, 3]])
    stacked = model.forward(ids, Generator(model).cache)
    assert counter.calls == 1
    model.capture = (0,)
    layered = model.forward(ids, Generator(model).cache)
    assert counter.calls == 1 and model.captured[0].shape == stacked.shape
    np.testing.assert_array_equal(stacked, layered)
    with pytest.raises(ValueError, match="KV cache overflow"):
        KVCache(2, 2, 8, 4).layers(5)
