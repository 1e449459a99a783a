"""Self-calibration (calibrate.py): Hessians from text the model writes itself, and the
error-feedback CQ4 that `cactus convert` makes with them by default."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import cactus_core as cactus
from cactus_core.errors import QuantizationError
from cactus_core.quality import compare
from cactus_quant import CQQuantizer
from cactus_quant.calibrate import self_hessians
from cactus_quant.convert import convert

SPINE = Path(__file__).resolve().parents[2] / "models" / "spine"


def out_err(w, deq, h):
    """Layer output error tr(dW H dW^T) / tr(W H W^T)."""
    d = (deq - w).astype(np.float64)
    w = w.astype(np.float64)
    return float(np.einsum("ri,ij,rj->", d, h, d) / np.einsum("ri,ij,rj->", w, h, w))


def test_self_hessians_cover_every_linear_and_are_deterministic(tiny_chat):
    h = self_hessians(tiny_chat, samples=4, length=24)
    blocks = {n for n in h if ".layers." in n}
    assert len(blocks) == 2 * 7  # two layers: q, k, v, o, gate, up, down
    for name, m in h.items():
        assert m.shape[0] == m.shape[1] and np.allclose(m, m.T)
        assert np.linalg.eigvalsh(m).min() > -1e-8 * np.trace(m)  # X^T X: positive semi-definite
    layer = "model.layers.1.self_attn."
    assert np.array_equal(h[layer + "q_proj.weight"], h[layer + "v_proj.weight"])  # one input, one H
    again = self_hessians(tiny_chat, samples=4, length=24)
    assert all(np.array_equal(h[n], again[n]) for n in h)  # seeded sampling


def test_convert_self_calibrates_cq4_by_default(tiny_chat, tmp_path):
    fed = convert(tiny_chat, tmp_path / "fed", bits=4, progress=False, head="keep", calibration_samples=4)
    free = convert(tiny_chat, tmp_path / "free", bits=4, progress=False, head="keep", self_calibrate=False)
    rtn = convert(tiny_chat, tmp_path / "rtn", bits=4, method="rtn", progress=False, head="keep")
    assert fed["calibration"] == "self-written text"
    assert free["calibration"] == "none" and rtn["calibration"] == "none"
    assert fed["bits_per_weight"] == free["bits_per_weight"]  # same format, same bits
    assert (tmp_path / "fed" / "model.safetensors").read_bytes() != (tmp_path / "free" / "model.safetensors").read_bytes()
    # the self-calibrated bundle runs and stays close to the float model
    ref, quant = cactus.load(tiny_chat, backend="numpy_ref"), cactus.load(str(tmp_path / "fed"), backend="numpy_ref")
    q = compare(ref, quant, max_windows=2)
    assert q["tokens"] > 100 and 0 <= q["kl_mean"] < 0.02
    manifest = json.loads((tmp_path / "fed" / "cactus.json").read_text())
    assert all(e["format"] == "cq" for e in manifest["quantization"]["tensors"].values())


def test_convert_without_a_runnable_model_stays_data_free(tmp_path):
    from cactus_quant.convert import write_safetensors

    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text(json.dumps({"model_type": "llama"}))  # not enough to run
    w = 0.02 * np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)
    write_safetensors(src / "model.safetensors", {"model.layers.0.mlp.up_proj.weight": ("F32", w)})
    report = convert(src, tmp_path / "out", bits=4, progress=False)
    assert report["calibration"].startswith("none")
    with pytest.raises(QuantizationError, match="cannot calibrate"):
        convert(src, tmp_path / "out2", bits=4, progress=False, self_calibrate=True)


def test_damp_option_is_checked():
    w = np.random.default_rng(1).standard_normal((16, 64)).astype(np.float32)
    x = np.random.default_rng(2).standard_normal((256, 64)).astype(np.float32)
    with pytest.raises(QuantizationError, match="damp"):
        CQQuantizer("cq4", 4).quantize("w", w, calibration=x, damp=0)


def test_feedback_cuts_output_error_on_trained_weights():
    """On held-out self-written text, self-calibrated CQ4 beats data-free CQ4 on the
    layer output error of trained matrices of the default model (the measurement
    behind the default; down_proj, whose inputs self-written text covers least, is
    left out: docs/quantization.md)."""
    if not (SPINE / "model.safetensors").is_file():
        pytest.skip("models/spine is not in this checkout")
    from cactus_core.engine import Engine
    from cactus_core.formats import to_float32
    from cactus_core.weights import load_weights
    from cactus_quant.sensitivity import calibration_tokens

    texts = calibration_tokens(Engine.load(str(SPINE), context_length=256), samples=16, length=64)
    cal = self_hessians(str(SPINE), tokens=texts[0::2] + texts[1:8:2])  # 8 texts, 4 chats; 4 chats held out
    held = self_hessians(str(SPINE), tokens=texts[9::2])
    weights = load_weights(str(SPINE))
    q = CQQuantizer("cq4", 4)
    ratios = []
    for name in ("model.layers.5.self_attn.o_proj.weight", "model.layers.1.mlp.gate_proj.weight",
                 "model.layers.2.self_attn.v_proj.weight"):
        w = to_float32(weights[name])
        free = out_err(w, q.quantize(name, w).dequantize_unrotated(), held[name])
        fed = out_err(w, q.quantize(name, w, hessian=cal[name]).dequantize_unrotated(), held[name])
        ratios.append(fed / free)
    assert max(ratios) < 0.95 and np.mean(ratios) < 0.8, ratios
