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
    # calibrated cq4 spends the 4.25 bpw budget widening its most sensitive tensors (widen.py);
    # data-free it has no KL to plan by and stays plain 4-bit
    assert free["bits_per_weight"] < fed["bits_per_weight"] <= 4.25
    assert fed["widened"] and "widened" not in free
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


def test_self_written_text_is_seeded_and_batched_sampling_is_a_distribution(tiny_chat):
    from cactus_core.engine import Engine
    from cactus_quant.calibrate import USER_TOKENS, _sample_rows, self_written_tokens

    engine = Engine.load(tiny_chat, context_length=8)
    a = self_written_tokens(engine, samples=6, length=20, seed=3)
    assert a == self_written_tokens(engine, samples=6, length=20, seed=3)  # a seed is one draw
    assert a != self_written_tokens(engine, samples=6, length=20, seed=4)  # another seed, another draw
    plain, chats = a[:3], a[3:]
    assert all(len(t) == 21 for t in plain)
    assert all(len(t) == len(chats[0]) > USER_TOKENS + 10 for t in chats)
    im_start = engine.tokenizer.encode_chat([{"role": "user", "content": "x"}])[0]
    assert all(t[0] == im_start for t in chats) and all(t[0] != im_start for t in plain)
    for bad in (dict(samples=0), dict(length=1), dict(temperature=0.0)):
        with pytest.raises(QuantizationError, match="calibration"):
            self_written_tokens(engine, **{"samples": 2, "length": 8, **bad})
    # nucleus sampling: only tokens inside top_p, in proportion to their probability
    logits = np.log(np.array([[0.5, 0.3, 0.15, 0.05]] * 20000))
    picks = _sample_rows(logits, 1.0, 0.9, np.random.default_rng(0))
    freq = np.bincount(picks, minlength=4) / len(picks)
    assert freq[3] == 0 and np.allclose(freq[:3], np.array([0.5, 0.3, 0.15]) / 0.95, atol=0.015)


def test_shared_inputs_share_one_sum_and_match_a_plain_float64_recording(tiny_chat):
    from cactus_core import plugins
    from cactus_core.engine import Engine
    from cactus_quant.calibrate import HessianOps, read_back, self_written_tokens

    class Plain(HessianOps):  # every layer its own float64 sum, no sharing
        def _record(self, name, x):
            rows = np.asarray(x, dtype=np.float64).reshape(-1, x.shape[-1])
            self.sums[name] = self.sums.get(name, 0) + rows.T @ rows
            self.counts[name] = self.counts.get(name, 0) + len(rows)

    texts = self_written_tokens(Engine.load(tiny_chat, context_length=8), samples=4, length=16, seed=1)
    texts.append(texts[0][:9])  # a shorter text reads back in its own batch
    fast = self_hessians(tiny_chat, tokens=texts, backend="numpy_ref")
    ops = Plain(plugins.select_backends("numpy_ref"))
    read_back(Engine.load(tiny_chat, context_length=8, ops=ops), texts)
    plain = ops.hessians()
    assert set(fast) == set(plain)
    for name in plain:
        assert np.allclose(fast[name], plain[name], rtol=1e-5, atol=1e-6 * np.abs(plain[name]).max()), name
    layer = "model.layers.0."
    assert fast[layer + "self_attn.q_proj.weight"] is fast[layer + "self_attn.k_proj.weight"]
    assert fast[layer + "mlp.gate_proj.weight"] is fast[layer + "mlp.up_proj.weight"]
    assert fast[layer + "mlp.down_proj.weight"] is not fast[layer + "mlp.up_proj.weight"]


def test_factor_cache_gives_bitwise_the_same_codes():
    """q/k/v (and gate/up) share one Hessian: its factor is computed once, and the
    codes are exactly those of a cold computation."""
    from cactus_quant.feedback import FACTORS

    rng = np.random.default_rng(5)
    x = rng.standard_normal((512, 128)) @ rng.standard_normal((128, 128))
    h = x.T @ x / len(x)
    ws = [0.02 * rng.standard_normal((64, 128)).astype(np.float32) for _ in range(3)]
    q = CQQuantizer("cq4", 4)
    cold = []
    for w in ws:
        FACTORS.clear()
        cold.append(q.quantize("w", w, hessian=h, damp=0.03))
    FACTORS.clear()
    warm = [q.quantize("w", w, hessian=h, damp=0.03) for w in ws]
    assert FACTORS.misses == 1 and FACTORS.hits == 2
    for a, b in zip(cold, warm):
        fa, fb = a.named_arrays("w"), b.named_arrays("w")
        assert fa.keys() == fb.keys() and all(np.array_equal(fa[k], fb[k]) for k in fa)
    q.quantize("w", ws[0], hessian=h, damp=0.1)  # another damping is another factor
    assert FACTORS.misses == 2


def test_sequential_calibration_sees_the_quantized_earlier_tensors(tiny_chat, tmp_path):
    from cactus_core.weights import load_weights
    from cactus_core.formats import to_float32
    from cactus_quant.calibrate import SELF_DAMP, sequential_quantize

    weights, q = load_weights(tiny_chat), CQQuantizer("cq4", 4)
    blocks = {n for n in weights if ".layers." in n and n.endswith("proj.weight")}
    calls = []

    def quantize(name, h):
        calls.append(name)
        return q.quantize(name, to_float32(weights[name]), hessian=h, damp=SELF_DAMP) if name in blocks else None

    made = sequential_quantize(tiny_chat, quantize, samples=4, length=24, seed=2)
    assert set(made) == blocks
    first = calls.index("model.layers.0.self_attn.q_proj.weight")
    assert first < calls.index("model.layers.1.mlp.down_proj.weight")  # stages run in the order the model calls them
    one_shot = self_hessians(tiny_chat, samples=4, length=24, seed=2)

    def same(name):
        a = made[name].named_arrays(name)
        b = q.quantize(name, to_float32(weights[name]), hessian=one_shot[name], damp=SELF_DAMP).named_arrays(name)
        return all(np.array_equal(a[k], b[k]) for k in a)

    assert same("model.layers.0.self_attn.q_proj.weight")  # the first stage reads float inputs
    assert not same("model.layers.1.mlp.down_proj.weight")  # later ones read the quantized model's

    seq = convert(tiny_chat, tmp_path / "seq", bits=4, progress=False, head="keep", calibration_samples=4,
                  sequential=True)
    convert(tiny_chat, tmp_path / "again", bits=4, progress=False, head="keep", calibration_samples=4, sequential=True)
    other = convert(tiny_chat, tmp_path / "other", bits=4, progress=False, head="keep", calibration_samples=4,
                    sequential=True, calibration_seed=1)
    assert seq["calibration"] == "self-written text" and seq["bits_per_weight"] == other["bits_per_weight"]
    data = {p: (tmp_path / p / "model.safetensors").read_bytes() for p in ("seq", "again", "other")}
    assert data["seq"] == data["again"] and data["seq"] != data["other"]  # seeded draws
    ref, quant = cactus.load(tiny_chat, backend="numpy_ref"), cactus.load(str(tmp_path / "seq"), backend="numpy_ref")
    assert 0 <= compare(ref, quant, max_windows=2)["kl_mean"] < 0.02
