"""HF checkpoint -> quantized bundle, read back through the format registry."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cactus_core.errors import QuantizationError
from cactus_core.formats import BFloat16, bf16_to_f32, f32_to_bf16, from_manifest
from cactus_quant.convert import convert, read_safetensors, write_safetensors


@pytest.fixture
def checkpoint(tmp_path):
    rng = np.random.default_rng(0)
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (src / "tokenizer.json").write_text("{}")
    tensors = {
        "model.embed_tokens.weight": ("BF16", f32_to_bf16(rng.standard_normal((64, 128)).astype(np.float32))),
        "model.layers.0.mlp.up_proj.weight": ("BF16", f32_to_bf16(0.02 * rng.standard_normal((256, 128)).astype(np.float32))),
        "model.layers.0.self_attn.q_proj.weight": ("F32", 0.02 * rng.standard_normal((128, 128)).astype(np.float32)),
        "model.layers.0.input_layernorm.weight": ("F32", np.ones(128, np.float32)),
        "model.layers.0.odd.weight": ("F16", rng.standard_normal((8, 40)).astype(np.float16)),
    }
    write_safetensors(src / "model.safetensors", tensors)
    return src, tensors


def _load_bundle(out):
    manifest = json.loads((out / "cactus.json").read_text())
    stored = read_safetensors(out / "model.safetensors")
    weights = {}
    for name, entry in manifest["quantization"]["tensors"].items():
        fields = {k.rsplit(".", 1)[1]: a for k, (_, a) in stored.items() if k.rsplit(".", 1)[0] == name}
        weights[name] = from_manifest(entry, fields)
    for name, (dt, a) in stored.items():
        if name not in weights and not any(name.startswith(q + ".") for q in weights):
            weights[name] = BFloat16(a) if dt == "BF16" else a
    return manifest, weights


@pytest.mark.parametrize("bits,method,fmt", [(4, "cq", "cq"), (3.26, "cq", "cq"), (4, "rtn", "int4")])
def test_convert_round_trip(checkpoint, tmp_path, bits, method, fmt):
    src, tensors = checkpoint
    out = tmp_path / "bundle"
    # the head kept in its dtype, so it is checked below as a kept tensor (the default: next test)
    report = convert(src, out, bits=bits, method=method, progress=False, head="keep")
    assert report["tensors_quantized"] == 2 and report["tensors_kept"] == 3
    assert report["bits_per_weight"] <= (bits if method == "cq" else 4.25) + 0.6  # small tensors: table overhead
    manifest, weights = _load_bundle(out)
    assert manifest["format_version"] == 1 and (out / "tokenizer.json").is_file()
    q = manifest["quantization"]
    assert set(q["tensors"]) == {"model.layers.0.mlp.up_proj.weight", "model.layers.0.self_attn.q_proj.weight"}
    for name, entry in q["tensors"].items():
        assert entry["format"] == fmt
        w = tensors[name][1]
        w = bf16_to_f32(w) if tensors[name][0] == "BF16" else w
        deq = weights[name].dequantize_unrotated()
        assert np.sum((deq - w) ** 2) / np.sum(w**2) < 0.05
    # kept tensors are byte-identical, bf16 stays bf16
    assert isinstance(weights["model.embed_tokens.weight"], BFloat16)
    np.testing.assert_array_equal(weights["model.embed_tokens.weight"].raw, tensors["model.embed_tokens.weight"][1])
    np.testing.assert_array_equal(weights["model.layers.0.odd.weight"], tensors["model.layers.0.odd.weight"][1])


def test_convert_stores_the_embedding_as_cq6_by_default(checkpoint, tmp_path):
    """Without ``head=``, the token table (bf16 here) becomes a 64-level scalar CQ table
    (``cactus convert``'s default); the other tensors are kept as they were."""
    src, tensors = checkpoint
    out = tmp_path / "bundle"
    report = convert(src, out, bits=4, progress=False)
    assert report["head"] == "cq6" and report["head_tensors"] == ["model.embed_tokens.weight"]
    assert report["tensors_quantized"] == 2 and report["tensors_kept"] == 2
    assert 6.0 < report["head_bits_per_weight"] < 6.4  # codes, a scale per 128, table and signs
    manifest, weights = _load_bundle(out)
    entry = manifest["quantization"]["tensors"]["model.embed_tokens.weight"]
    assert entry["format"] == "cq" and (entry["meta"]["index_bits"], entry["meta"]["vec_dim"]) == (6, 1)
    w = bf16_to_f32(tensors["model.embed_tokens.weight"][1])
    deq = weights["model.embed_tokens.weight"].dequantize_unrotated()
    assert np.sum((deq - w) ** 2) / np.sum(w**2) < 2e-3  # 64 Lloyd-Max levels of N(0, 1): ~5e-4
    np.testing.assert_array_equal(weights["model.layers.0.odd.weight"], tensors["model.layers.0.odd.weight"][1])


def test_convert_refuses_existing_output_unless_forced(checkpoint, tmp_path):
    src, _ = checkpoint
    out = tmp_path / "bundle"
    out.mkdir()
    with pytest.raises(QuantizationError, match="already exists"):
        convert(src, out, progress=False)
    convert(src, out, force=True, progress=False)
    assert (out / "cactus.json").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".bundle")] == []


def test_convert_bad_requests(checkpoint, tmp_path):
    src, _ = checkpoint
    with pytest.raises(QuantizationError, match="supports --bits"):
        convert(src, tmp_path / "o", bits=5, progress=False)
    with pytest.raises(QuantizationError, match="gptq needs calibration"):
        convert(src, tmp_path / "o", bits=4, method="gptq", progress=False)
    with pytest.raises(QuantizationError, match="no config.json"):
        convert(tmp_path, tmp_path / "o", progress=False)
    assert not (tmp_path / "o").exists()


def test_convert_command_line(checkpoint, tmp_path, capsys):
    import argparse

    from cactus_quant.convert import add_convert_command

    parser = argparse.ArgumentParser()
    add_convert_command(parser.add_subparsers())
    src, _ = checkpoint
    args = parser.parse_args(["convert", str(src), str(tmp_path / "b"), "--bits", "2", "--json"])
    assert args.func(args) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["scheme"] == "cq2" and (tmp_path / "b" / "cactus.json").is_file()


def test_the_source_probe_travels_with_the_bundle(tmp_path):
    """Converting the default model keeps its confidence probe, and the bundle routes with it."""
    from pathlib import Path

    import cactus_core as cactus

    src = Path(__file__).resolve().parents[2] / "models" / "spine"
    if not (src / "probe.safetensors").is_file():
        pytest.skip("models/spine is not in this checkout")
    out = tmp_path / "cq4"
    report = convert(src, out, bits=4, progress=False, self_calibrate=False)
    assert report["probe"] == "probe.safetensors" and (out / "probe.safetensors").is_file()
    manifest = json.loads((out / "cactus.json").read_text())
    assert manifest["probe"] == json.loads((src / "cactus.json").read_text())["probe"]
    r = cactus.load(str(out), backend="numpy_ref").complete([{"role": "user", "content": "Wake me at 6:45"}],
                                                          max_tokens=8)
    assert r["success"] and 0.0 <= r["confidence"] <= 1.0
