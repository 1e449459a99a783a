"""Whole models on cpu_neon: the architectures of tests/test_models.py, run with
Ops([cpu_neon, numpy_ref]), against transformers (torch, CPU): logits within 1e-4
relative and identical greedy tokens, with float32 and 16-bit checkpoints."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
test_models = pytest.importorskip("test_models", reason="needs tests/test_models.py helpers")

from cactus_core.backends.numpy_ref import NumpyBackend  # noqa: E402
from cactus_core.generate import Generator, SamplingParams  # noqa: E402
from cactus_core.graph import Ops  # noqa: E402
from cactus_core.models import model_module  # noqa: E402
from cactus_core.weights import load_weights  # noqa: E402


def _load(path, neon):
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    ops = Ops([neon, NumpyBackend()])
    return model_module(config).Model(config, load_weights(path), ops), ops


@pytest.mark.parametrize(
    "name", ["llama-gqa-untied", "llama-bias-headdim", "mistral-sliding", "qwen3-gqa", "gemma3-softcap"]
)
def test_logits_match_transformers(neon, name, tmp_path):
    ref, path = test_models.build_reference(name, tmp_path)
    ids = list(np.random.default_rng(0).integers(0, test_models.BASE["vocab_size"], size=20))
    with torch.no_grad():
        expected = ref(torch.tensor([ids])).logits[0].numpy()
    model, ops = _load(path, neon)
    assert ops.backend_for("linear", "float32") == "cpu_neon"
    # float32 K/V for the 1e-4 parity; the float16 cache cpu_neon gets by default is tested below
    h = model.forward(np.asarray([ids]), Generator(model, kv_dtype=np.float32).cache)
    got = model.logits(h)[0]
    rel = np.abs(got - expected).max() / np.abs(expected).max()
    assert rel < 1e-4, f"max relative error {rel:.2e}"


@pytest.mark.parametrize("name", ["llama-gqa-untied", "gemma3-softcap"])
def test_float16_kv_cache_is_default_and_close(neon, name, tmp_path):
    """cpu_neon declares kv_dtype float16: the generator's cache is half size, logits stay
    within float16 rounding of the float32-cache result and greedy tokens are the same."""
    _, path = test_models.build_reference(name, tmp_path)
    model, _ = _load(path, neon)
    half, full = Generator(model), Generator(model, kv_dtype=np.float32)
    assert half.cache.keys.dtype == np.float16 and half.cache.nbytes * 2 == full.cache.nbytes
    ids = list(np.random.default_rng(1).integers(0, test_models.BASE["vocab_size"], size=20))
    # The prompt attends over its own K/V unrounded; the next step reads the cache back.
    for gen in (half, full):
        gen.prefill(ids)
    a, b = half.step(7), full.step(7)
    rel = np.abs(a - b).max() / np.abs(b).max()
    assert 0 < rel < 5e-3, f"relative difference {rel:.2e}"
    prompt, params = [5, 17, 42, 99, 3, 7], SamplingParams(max_tokens=16)
    got = Generator(model).generate(prompt, params, decode=lambda t: "").tokens
    want = Generator(model, kv_dtype=np.float32).generate(prompt, params, decode=lambda t: "").tokens
    assert got == want


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_greedy_generation_from_half_checkpoint(neon, dtype, tmp_path):
    """16-bit weights are multiplied in place by the kernels; tokens match torch."""
    ref, path = test_models.build_reference("qwen3-gqa", tmp_path, dtype=getattr(torch, dtype))
    ref = ref.to(getattr(torch, dtype)).float()  # the same rounded weights, in float32
    prompt = [5, 17, 42, 99, 3, 7]
    with torch.no_grad():
        out = ref.generate(torch.tensor([prompt]), max_new_tokens=24, do_sample=False,
                           eos_token_id=None, pad_token_id=0, min_new_tokens=24)
    model, ops = _load(path, neon)
    assert ops.backend_for("linear", dtype) == "cpu_neon"
    res = Generator(model).generate(prompt, SamplingParams(max_tokens=24), decode=lambda t: "")
    assert res.tokens == out[0, len(prompt):].tolist()
