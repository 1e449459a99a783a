"""Every architecture against the transformers reference (torch, CPU) on small
random-init models: float32 logits within 1e-4 relative, greedy tokens identical."""

from __future__ import annotations

import json
import os
import zlib

import numpy as np
import pytest
import torch
import transformers

from cactus_core.backends.numpy_ref import NumpyBackend
from cactus_core.generate import Generator, SamplingParams
from cactus_core.graph import Ops
from cactus_core.models import model_module
from cactus_core.weights import load_weights

BASE = dict(vocab_size=211, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
            num_attention_heads=4, max_position_embeddings=256)

CONFIGS = {
    "llama-gqa-untied": ("LlamaConfig", "LlamaForCausalLM", dict(num_key_value_heads=2)),
    "llama-mha-tied": ("LlamaConfig", "LlamaForCausalLM", dict(tie_word_embeddings=True)),
    "llama3-rope-scaling": ("LlamaConfig", "LlamaForCausalLM", dict(
        num_key_value_heads=1, rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 32})),
    "llama-bias-headdim": ("LlamaConfig", "LlamaForCausalLM", dict(
        attention_bias=True, mlp_bias=True, head_dim=24, num_key_value_heads=2)),
    "mistral-sliding": ("MistralConfig", "MistralForCausalLM", dict(num_key_value_heads=2, sliding_window=8)),
    "qwen3-gqa": ("Qwen3Config", "Qwen3ForCausalLM", dict(num_key_value_heads=2, head_dim=32)),
    "qwen3-tied": ("Qwen3Config", "Qwen3ForCausalLM", dict(tie_word_embeddings=True, num_key_value_heads=4)),
    "gemma3-sliding": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(
        num_key_value_heads=2, head_dim=16, sliding_window=6, layer_types=None,
        sliding_window_pattern=2, query_pre_attn_scalar=16)),
    "gemma3-softcap": ("Gemma3TextConfig", "Gemma3ForCausalLM", dict(
        num_key_value_heads=1, head_dim=32, sliding_window=5, final_logit_softcapping=30.0,
        attn_logit_softcapping=50.0, query_pre_attn_scalar=24, num_hidden_layers=4,
        rope_scaling={"rope_type": "linear", "factor": 4.0})),
}


def build_reference(name: str, tmp_path, dtype=torch.float32):
    """Random-init transformers model saved as a safetensors checkpoint."""
    cfg_cls, model_cls, extra = CONFIGS[name]
    kwargs = {**BASE, **extra}
    if kwargs.get("layer_types", 1) is None:
        del kwargs["layer_types"]
        pattern = kwargs.pop("sliding_window_pattern")
        kwargs["layer_types"] = [
            "full_attention" if (i + 1) % pattern == 0 else "sliding_attention"
            for i in range(kwargs["num_hidden_layers"])
        ]
    torch.manual_seed(zlib.crc32(name.encode()) % 1000)  # str hash() changes per process
    config = getattr(transformers, cfg_cls)(**kwargs)
    config._attn_implementation = "eager"
    model = getattr(transformers, model_cls)(config).eval()
    with torch.no_grad():  # random init is tiny for some norms; spread them out
        for n, p in model.named_parameters():
            if "norm" in n:
                p.normal_(0.0 if "gemma" in name else 1.0, 0.2)
    path = tmp_path / name
    model.to(dtype).save_pretrained(path, safe_serialization=True)
    return model.float(), str(path)


def load_ours(path):
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    return model_module(config).Model(config, load_weights(path), Ops([NumpyBackend()]))


def our_logits(model, ids):
    gen = Generator(model)
    h = model.forward(np.asarray([ids]), gen.cache)
    return model.logits(h)[0]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_logits_match_transformers(name, tmp_path):
    ref, path = build_reference(name, tmp_path)
    ids = list(np.random.default_rng(0).integers(0, BASE["vocab_size"], size=20))
    with torch.no_grad():
        expected = ref(torch.tensor([ids])).logits[0].numpy()
    got = our_logits(load_ours(path), ids)
    rel = np.abs(got - expected).max() / np.abs(expected).max()
    assert rel < 1e-4, f"max relative error {rel:.2e}"


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_greedy_generation_matches_transformers(name, tmp_path):
    ref, path = build_reference(name, tmp_path)
    prompt = [5, 17, 42, 99, 3, 7]
    with torch.no_grad():
        out = ref.generate(torch.tensor([prompt]), max_new_tokens=32, do_sample=False,
                           eos_token_id=None, pad_token_id=0, min_new_tokens=32)
    expected = out[0, len(prompt):].tolist()
    gen = Generator(load_ours(path))
    res = gen.generate(prompt, SamplingParams(max_tokens=32), decode=lambda t: "")
    assert res.tokens == expected


def test_prefix_reuse_and_chunked_prefill_agree(tmp_path, monkeypatch):
    from cactus_core import generate

    _, path = build_reference("qwen3-gqa", tmp_path)
    model = load_ours(path)
    ids = list(np.random.default_rng(3).integers(0, 200, size=40))
    fresh = Generator(model).prefill(ids)[0]
    monkeypatch.setattr(generate, "PREFILL_CHUNK", 7)
    gen = Generator(model)
    gen.prefill(ids[:25] + [1, 2, 3])  # diverges after 25 tokens
    logits, reused = gen.prefill(ids)
    assert reused == 25
    np.testing.assert_allclose(logits, fresh, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_checkpoints_load(dtype, tmp_path):
    ref, path = build_reference("llama-gqa-untied", tmp_path, dtype=dtype)
    ids = [1, 2, 3, 4, 5]
    with torch.no_grad():
        expected = ref.to(dtype).float()(torch.tensor([ids])).logits[0].numpy()
    got = our_logits(load_ours(path), ids)
    rel = np.abs(got - expected).max() / np.abs(expected).max()
    assert rel < 1e-4


@pytest.mark.parametrize("f8", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_float8_checkpoints_load(f8, tmp_path):
    """Matrices stored as float8 (norms in float32), read as transformers reads them: widened."""
    from safetensors.torch import load_file, save_file

    _, path = build_reference("qwen3-tied", tmp_path)
    weights = os.path.join(path, "model.safetensors")
    state = {k: (v.to(f8) if v.ndim == 2 else v) for k, v in load_file(weights).items()}
    save_file(state, weights, metadata={"format": "pt"})
    ref = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    ids = [1, 2, 3, 4, 5]
    with torch.no_grad():
        expected = ref(torch.tensor([ids])).logits[0].numpy()
    got = our_logits(load_ours(path), ids)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def test_float8_codes_widen_exactly():
    from cactus_core.formats import f8_to_f16

    codes = torch.arange(256, dtype=torch.uint8)
    for kind, f8 in (("F8_E4M3", torch.float8_e4m3fn), ("F8_E5M2", torch.float8_e5m2)):
        want = codes.view(f8).to(torch.float32).numpy()
        got = f8_to_f16(codes.numpy(), kind).astype(np.float32)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        ok = ~np.isnan(want)
        np.testing.assert_array_equal(got[ok], want[ok])


def test_sharded_checkpoint_loads(tmp_path):
    cfg_cls, model_cls, extra = CONFIGS["qwen3-gqa"]
    torch.manual_seed(0)
    ref = getattr(transformers, model_cls)(getattr(transformers, cfg_cls)(**{**BASE, **extra})).eval()
    path = tmp_path / "sharded"
    ref.save_pretrained(path, safe_serialization=True, max_shard_size="60KB")
    shards = sorted(p.name for p in path.glob("*.safetensors"))
    assert len(shards) > 2 and (path / "model.safetensors.index.json").exists()
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    with torch.no_grad():
        expected = ref(torch.tensor([ids])).logits[0].numpy()
    got = our_logits(load_ours(str(path)), ids)
    assert np.abs(got - expected).max() / np.abs(expected).max() < 1e-4


def test_missing_shard_is_one_line(tmp_path):
    from cactus_core.errors import ModelLoadError

    cfg_cls, model_cls, extra = CONFIGS["llama-gqa-untied"]
    ref = getattr(transformers, model_cls)(getattr(transformers, cfg_cls)(**{**BASE, **extra}))
    path = tmp_path / "sharded"
    ref.save_pretrained(path, safe_serialization=True, max_shard_size="60KB")
    sorted(path.glob("*.safetensors"))[1].unlink()
    with pytest.raises(ModelLoadError, match="listed in model.safetensors.index.json is missing"):
        load_ours(str(path))


def test_gemma3_multimodal_checkpoint_runs_text_only(tmp_path):
    text = dict(vocab_size=211, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, sliding_window=6, query_pre_attn_scalar=16)
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                  image_size=28, patch_size=14)
    torch.manual_seed(5)
    config = transformers.Gemma3Config(text_config=text, vision_config=vision, mm_tokens_per_image=4)
    ref = transformers.Gemma3ForConditionalGeneration(config).eval()
    ref.save_pretrained(tmp_path / "g3", safe_serialization=True)
    ids = [5, 6, 7, 8, 9, 10, 11, 12, 13]
    with torch.no_grad():
        expected = ref(input_ids=torch.tensor([ids])).logits[0].numpy()
    got = our_logits(load_ours(str(tmp_path / "g3")), ids)
    assert np.abs(got - expected).max() / np.abs(expected).max() < 1e-4
