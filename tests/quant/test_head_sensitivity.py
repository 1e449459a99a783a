"""The quantized embedding/head (``--head``) and mixed precision planned from measured KL."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import cactus_core as cactus
from cactus_core.backends.numpy_ref import NumpyBackend
from cactus_core.errors import QuantizationError

pytest.importorskip("cactus_quant", reason="the quantizer plugin is not installed (pip install ./quant)")

from cactus_quant.convert import convert, head_quantizer  # noqa: E402
from cactus_quant.mixed import MixedCQQuantizer  # noqa: E402
from cactus_quant.sensitivity import KLSensitivity, calibration_tokens, record_inputs  # noqa: E402


@pytest.fixture(scope="module")
def src(tiny_chat):
    return tiny_chat


def _kl(src, out, ids):
    f = cactus.load(src, backend="numpy_ref").logits(ids).astype(np.float64)
    q = cactus.load(str(out), backend="numpy_ref").logits(ids).astype(np.float64)
    lf = f - np.log(np.exp(f - f.max(-1, keepdims=True)).sum(-1, keepdims=True)) - f.max(-1, keepdims=True)
    lq = q - np.log(np.exp(q - q.max(-1, keepdims=True)).sum(-1, keepdims=True)) - q.max(-1, keepdims=True)
    return float(np.sum(np.exp(lf) * (lf - lq), axis=-1).mean())


@pytest.fixture(scope="module")
def keep(src, tmp_path_factory):
    """The same conversion with the head left in float16, and its KL on fixed tokens."""
    out = tmp_path_factory.mktemp("keep") / "b"
    return convert(src, out, bits=4, progress=False, head="keep"), _kl(src, out, IDS)


IDS = list(range(3, 60))


# cq6 (the default) measured 3.5e-5 here, int8 2.9e-6, cq5 1.6e-4, cq4 4.5e-4
@pytest.mark.parametrize("head,fmt,max_bpw,max_extra_kl", [("int8", "int8", 8.6, 2e-3), ("int4", "int4", 4.6, 0.03),
                                                           ("cq4", "cq", 4.6, 0.03), ("cq6", "cq", 6.2, 1e-4)])
def test_tied_head_is_quantized_and_runs(src, keep, tmp_path, head, fmt, max_bpw, max_extra_kl):
    out = tmp_path / head
    rep = convert(src, out, bits=4, progress=False, head=head)
    entry = json.loads((out / "cactus.json").read_text())["quantization"]["tensors"]["model.embed_tokens.weight"]
    assert entry["format"] == fmt and rep["head_tensors"] == ["model.embed_tokens.weight"]
    assert rep["head_bits_per_weight"] <= max_bpw
    assert rep["bundle_bytes"] < keep[0]["bundle_bytes"]
    engine = cactus.load(str(out), backend="numpy_ref")
    table = engine.model.embed_tokens
    assert table.format == fmt  # the tied lm_head multiplies by the quantized table too
    ids = np.array([[1, 5, 9], [9, 1, 0]])
    rows = NumpyBackend().embedding(table, ids)
    np.testing.assert_allclose(rows, table.dequantize_unrotated()[ids], atol=1e-6)
    assert abs(_kl(src, out, IDS) - keep[1]) < max_extra_kl  # what the head adds; int8: almost nothing
    assert engine.complete([{"role": "user", "content": "hi"}], max_tokens=3)["success"]


def test_unknown_head_choice():
    with pytest.raises(QuantizationError, match="unknown --head"):
        head_quantizer("fp8")


def test_measured_kl_drives_the_mixed_plan(src, tmp_path):
    engine = cactus.load(src, backend="numpy_ref", context_length=256)
    tokens = calibration_tokens(engine, samples=2, length=32)
    assert len(tokens) == 2 and all(len(t) > 8 for t in tokens)
    acts = record_inputs(src, tokens, backend="numpy_ref")
    assert acts["model.layers.0.mlp.down_proj.weight"].shape[1] == 256
    q = MixedCQQuantizer("cq3.26", 3.26)
    from cactus_core.weights import load_weights

    w = load_weights(src)
    measure = KLSensitivity(src, lambda n, b: q.inner[b].quantize(n, w[n]), tokens=tokens, backend="numpy_ref")
    name = "model.layers.0.mlp.down_proj.weight"
    assert sorted(q.inner) == [3, 4]  # no width below the target's floor (mixed.floor_widths)
    costs = [measure(name, b) for b in (3, 4)]
    assert costs[0] > costs[1] > 0  # fewer bits, more KL, measured on the running model
    assert measure.costs[(name, 4)] == costs[1] and (name, 4) in measure.tensors
    q.made = measure.tensors
    rep = convert(src, tmp_path / "m", bits=3.26, progress=False, quantizer=q, measure=measure)
    assert rep["allocation_source"] == "measured" and rep["bits_per_weight"] <= 3.26 + 1e-9
    assert len(measure.costs) == 2 * rep["tensors_quantized"] and rep["allocation"][2] == 0


def test_convert_cli_plans_mixed_precision_from_measured_kl(src, tmp_path):
    p = subprocess.run([sys.executable, "-m", "cactus_core.cli", "convert", src, str(tmp_path / "o"), "--bits",
                        "3.26", "--calibration-samples", "2", "--json"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["scheme"] == "cq3.26" and rep["allocation_source"] == "measured"
    assert rep["bits_per_weight"] <= 3.26 + 1e-9 and rep["head"] == "cq6"  # convert's default head


def test_a_tied_head_written_twice_is_stored_once(src, tmp_path):
    """Some exporters save lm_head.weight beside the tied embedding; the bundle keeps one."""
    from safetensors.numpy import load_file
    from tinymodel import edited_copy

    dup = edited_copy(src, tmp_path / "dup",
                      lambda t: t.__setitem__("lm_head.weight", t["model.embed_tokens.weight"].copy()))
    assert json.loads((tmp_path / "dup" / "config.json").read_text())["tie_word_embeddings"]
    once = convert(src, tmp_path / "once", bits=4, progress=False, head="int8")
    twice = convert(dup, tmp_path / "twice", bits=4, progress=False, head="int8")
    assert "lm_head.weight" not in load_file(str(tmp_path / "twice" / "model.safetensors"))
    assert twice["bundle_bytes"] == once["bundle_bytes"]
    np.testing.assert_array_equal(cactus.load(str(tmp_path / "twice"), backend="numpy_ref").logits(IDS),
                                  cactus.load(str(tmp_path / "once"), backend="numpy_ref").logits(IDS))


def test_mixed_plans_can_measure_on_the_cq4_calibration_text(src, monkeypatch):
    """With SELF_WRITTEN_TEXT (off by default) and no --calibration-text, the KL
    sensitivity reads the text CQ4 calibrates on (calibrate.self_written: plain texts,
    then chats of CHAT_TURNS rounds) and scores only the positions CQ4 records (not
    what a chat writes after closing its turn)."""
    from cactus_quant import sensitivity
    from cactus_quant.calibrate import CHAT_TURNS, PAST_END, self_written
    from cactus_quant.sensitivity import CalibrationTexts

    monkeypatch.setattr(sensitivity, "SELF_WRITTEN_TEXT", True)
    engine = cactus.load(src, backend="numpy_ref", context_length=256)
    tokens = calibration_tokens(engine, samples=4, length=16, seed=3)
    texts, keep = self_written(engine, 4, 16, 3, turns=CHAT_TURNS, past_end=PAST_END)
    assert isinstance(tokens, CalibrationTexts) and [list(t) for t in tokens] == texts
    assert all(np.array_equal(a, b) for a, b in zip(tokens.keep, keep))
    assert len(tokens[-1]) > 16 * CHAT_TURNS  # the chats have their rounds
    from cactus_core.weights import load_weights

    w = load_weights(src)
    q = MixedCQQuantizer("cq3.26", 3.26)
    name = "model.layers.0.mlp.down_proj.weight"
    scored = KLSensitivity(src, lambda n, b: q.inner[b].quantize(n, w[n]), tokens=tokens, backend="numpy_ref")
    assert [len(r) for r in scored.reference] == [int(k[:-1].sum()) for k in tokens.keep]
    every = KLSensitivity(src, lambda n, b: scored.tensors[(n, b)], tokens=[list(t) for t in tokens],
                          backend="numpy_ref")
    assert [len(r) for r in every.reference] == [len(t) - 1 for t in tokens]
    assert scored(name, 3) > 0 and every(name, 3) > 0
    assert calibration_tokens(engine, samples=2, length=8, text="hello there " * 20) == \
        [engine.tokenizer.encode("hello there " * 20)[i : i + 8] for i in range(0, 16, 8)]
