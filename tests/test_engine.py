"""Engine.complete / logits / embed on a small complete chat model, and bad input."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import torch
import transformers

import cactus_core as cactus
from cactus_core.errors import ModelLoadError
from tinymodel import edited_copy, make_chat_model

RESPONSE_FIELDS = {
    "success", "error", "response", "function_calls", "confidence", "confidence_threshold",
    "cloud_handoff", "cloud_handoff_reason", "time_to_first_token_ms", "total_time_ms",
    "prefill_tps", "decode_tps", "ram_usage_mb", "prefill_tokens", "decode_tokens",
    "total_tokens", "model", "backend",
}
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_chat_model(tmp_path_factory.mktemp("chat") / "tiny-qwen3")


@pytest.fixture(scope="module")
def engine(model_dir):
    return cactus.load(model_dir)


def test_complete_returns_every_field(engine):
    r = engine.complete([{"role": "user", "content": "hi"}], max_tokens=8)
    assert RESPONSE_FIELDS <= set(r)
    assert r["success"] and r["error"] is None
    assert r["backend"] == "numpy_ref" and r["model"] == "tiny-qwen3"
    assert 0.0 <= r["confidence"] <= 1.0 and r["confidence_threshold"] == 0.7
    assert r["cloud_handoff"] is False and r["cloud_handoff_reason"]
    assert r["prefill_tokens"] > 0 and 0 < r["decode_tokens"] <= 8
    assert r["total_tokens"] == r["prefill_tokens"] + r["decode_tokens"]
    assert r["time_to_first_token_ms"] > 0 and r["total_time_ms"] >= r["time_to_first_token_ms"]
    assert r["ram_usage_mb"] > 10 and r["decode_tps"] > 0 and r["prefill_tps"] > 0


def test_prompt_ids_and_greedy_tokens_match_transformers(engine, model_dir):
    from cactus_core.generate import SamplingParams

    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"}]
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    ids = tok.apply_chat_template(messages, tools=TOOLS, add_generation_prompt=True, tokenize=True, return_dict=False)
    assert engine.tokenizer.encode_chat(messages, tools=TOOLS) == list(ids)
    ref = transformers.AutoModelForCausalLM.from_pretrained(model_dir).eval()
    with torch.no_grad():
        out = ref.generate(torch.tensor([ids]), max_new_tokens=12, min_new_tokens=12, do_sample=False)
    res = engine.generator.generate(ids, SamplingParams(max_tokens=12), decode=lambda t: "")
    assert res.tokens == out[0, len(ids):].tolist()


def test_streaming_pieces_concatenate_to_response(engine):
    pieces = []
    r = engine.complete([{"role": "user", "content": "tell me"}], max_tokens=16, on_token=pieces.append)
    assert r["success"]
    assert "".join(pieces).strip() == r["response"].strip() or r["function_calls"]


def test_prefix_is_reused_across_turns(engine):
    convo = [{"role": "user", "content": "Set an alarm for 7:30 please"}]
    first = engine.complete(convo, max_tokens=4)
    convo += [{"role": "assistant", "content": first["response"]}, {"role": "user", "content": "thanks"}]
    second = engine.complete(convo, max_tokens=4)
    full = len(engine.tokenizer.encode_chat(convo, add_generation_prompt=True))
    assert second["prefill_tokens"] < full  # only the new turn was prefilled


def test_sampling_with_seed_is_reproducible(engine):
    msgs = [{"role": "user", "content": "hello"}]
    a = engine.complete(msgs, max_tokens=10, temperature=1.0, top_p=0.9, top_k=50, seed=7)
    b = engine.complete(msgs, max_tokens=10, temperature=1.0, top_p=0.9, top_k=50, seed=7)
    assert a["response"] == b["response"] and a["decode_tokens"] == b["decode_tokens"]


def test_logits_match_transformers(engine, model_dir):
    ref = transformers.AutoModelForCausalLM.from_pretrained(model_dir).eval()
    ids = [5, 9, 100, 42, 7]
    with torch.no_grad():
        expected = ref(torch.tensor([ids])).logits[0].numpy()
    got = engine.logits(ids)
    assert got.dtype == np.float32 and got.shape == expected.shape
    assert np.abs(got - expected).max() / np.abs(expected).max() < 1e-4


def test_embed_is_normalised(engine):
    v = engine.embed(["a cat", "a dog", "a cat"])
    assert v.shape == (3, 64)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(v[0], v[2], rtol=1e-5)


@pytest.mark.parametrize("messages,needle", [
    ("hello", "messages"),
    ([], "messages"),
    ([{"role": "wizard", "content": "x"}], "role"),
    ([{"role": "user", "content": 5}], "content"),
    ([{"content": "no role"}], "role"),
])
def test_malformed_messages_fail_cleanly(engine, messages, needle):
    r = engine.complete(messages)
    assert r["success"] is False and needle in r["error"] and "\n" not in r["error"]


@pytest.mark.parametrize("tools", [
    "nope", [{"type": "function"}], [{"type": "function", "function": {"name": "x", "parameters": "str"}}],
])
def test_malformed_tools_fail_cleanly(engine, tools):
    r = engine.complete([{"role": "user", "content": "hi"}], tools=tools)
    assert r["success"] is False and "tool" in r["error"].lower()


@pytest.mark.parametrize("opts,needle", [
    (dict(max_tokens=0), "max_tokens"), (dict(temperature=-1), "temperature"),
    (dict(top_p=2.0), "top_p"), (dict(stop=5), "stop"), (dict(confidence_threshold=3), "confidence_threshold"),
])
def test_bad_options_fail_cleanly(engine, opts, needle):
    r = engine.complete([{"role": "user", "content": "hi"}], **opts)
    assert r["success"] is False and needle in r["error"]


def test_prompt_longer_than_context(engine):
    r = engine.complete([{"role": "user", "content": "word " * 2000}])
    assert r["success"] is False and "context" in r["error"]
    assert engine.complete([{"role": "user", "content": "hi"}], max_tokens=2)["success"]


# --- loading errors: one clear line each ----------------------------------------
def test_missing_directory():
    with pytest.raises(ModelLoadError, match="not found"):
        cactus.load("/nonexistent/model")


def test_missing_config(tmp_path):
    with pytest.raises(ModelLoadError, match="config.json"):
        cactus.load(str(tmp_path))


def test_unknown_model_type_lists_supported(tmp_path, model_dir):
    d = tmp_path / "m"
    shutil.copytree(model_dir, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["model_type"] = "mamba9000"
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelLoadError, match=r"unknown model_type 'mamba9000'; supported: .*llama.*qwen3"):
        cactus.load(str(d))


def test_truncated_safetensors(tmp_path, model_dir):
    d = tmp_path / "m"
    shutil.copytree(model_dir, d)
    f = d / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelLoadError, match="truncated"):
        cactus.load(str(d))


def test_corrupt_safetensors_header(tmp_path, model_dir):
    d = tmp_path / "m"
    shutil.copytree(model_dir, d)
    f = d / "model.safetensors"
    data = bytearray(f.read_bytes())
    data[8:20] = b"not json!!!!"
    f.write_bytes(bytes(data))
    with pytest.raises(ModelLoadError, match="corrupt header"):
        cactus.load(str(d))


def test_shapes_that_do_not_match_config(tmp_path, model_dir):
    d = tmp_path / "m"
    shutil.copytree(model_dir, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["intermediate_size"] = 100
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ModelLoadError, match="does not match|do not match"):
        cactus.load(str(d))


def test_missing_tensor(tmp_path, model_dir):
    d = edited_copy(model_dir, tmp_path / "m", lambda t: t.pop("model.layers.1.mlp.up_proj.weight"))
    with pytest.raises(ModelLoadError, match="missing tensor 'model.layers.1.mlp.up_proj.weight'"):
        cactus.load(str(d))


def test_loading_is_memory_mapped(tmp_path):
    """A 200 MB checkpoint loads without its bytes becoming resident."""
    import subprocess
    import sys

    path = make_chat_model(tmp_path / "big", arch="llama", hidden_size=1024, intermediate_size=4096,
                           num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=8,
                           head_dim=128, tie_word_embeddings=False)
    size_mb = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path)) / 2**20
    assert size_mb > 150
    code = (
        "import cactus_core as c; from cactus_core.device import rss_mb; import sys\n"
        "before = rss_mb(); e = c.load(sys.argv[1]); print(rss_mb() - before)"
    )
    out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, check=True)
    grown = float(out.stdout.strip().splitlines()[-1])
    assert grown < size_mb * 0.2, f"loading grew RSS by {grown:.0f} MB for a {size_mb:.0f} MB model"
