"""cq4's widening plan: 4-bit codes with the most KL-sensitive tensors at 5 or 6 bits."""

from __future__ import annotations

import json

import numpy as np
import pytest

import cactus_core as cactus
from cactus_core.quality import compare
from cactus_quant.convert import convert
from cactus_quant.cq import CQQuantizer
from cactus_quant.widen import (
    BUDGET_BPW,
    SENSITIVITY_TOKENS,
    WidenedCQQuantizer,
    coarse_error_ratio,
    sensitivity_texts,
    sensitivity_tokens,
    width_error_ratio,
)


def test_wider_codes_cut_the_error_by_about_a_quarter_per_bit():
    r3, r5, r6 = width_error_ratio(3), width_error_ratio(5), width_error_ratio(6)
    assert 2.5 < r3 < 4.5 and 0.2 < r5 < 0.3 and 0.06 < r6 < 0.12


def test_plan_spends_the_budget_on_the_tensors_with_most_kl_per_weight():
    shapes = {f"l{i}.{k}": s for i in range(4) for k, s in
              (("v", (64, 256)), ("q", (256, 256)), ("mlp", (1024, 256)))}
    kl4 = {n: (0.05 if n.endswith(".v") else 0.01 if n.endswith(".q") else 0.02) * (3.0 if n.startswith("l0") else 1)
           for n in shapes}
    q = WidenedCQQuantizer()
    plan = q.plan_widths(shapes, lambda n, b: kl4[n] if b == 4 else 1 / 0)  # only 4 bits is measured
    sizes = {n: np.prod(s) for n, s in shapes.items()}
    bpw = sum(sizes[n] * q.inner[b].bits_for_shape(shapes[n]) for n, b in plan.bits.items()) / sum(sizes.values())
    assert plan.average_bpw == pytest.approx(bpw) and q.base.bits_for_shape((256, 256)) < bpw <= BUDGET_BPW
    # the small, sensitive v tensors go first, and the worst of them furthest
    assert all(plan.bits[f"l{i}.v"] > 4 for i in range(4)) and plan.bits["l0.v"] == 6
    assert all(plan.bits[f"l{i}.mlp"] == 4 for i in range(1, 4))
    assert plan.total_error < sum(kl4.values())
    assert q.width("l0.v") == 6 and q.width("not planned") == 4


def test_unplanned_or_over_budget_is_plain_cq4():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((32, 128)).astype(np.float32)
    plain = CQQuantizer("cq4", 4).quantize("w", w)
    q = WidenedCQQuantizer()
    assert np.array_equal(q.quantize("w", w).arrays["codes"], plain.arrays["codes"])
    tight = WidenedCQQuantizer(budget_bpw=4.0)  # below plain CQ4's own cost: nothing to spend
    assert tight.plan_widths({"w": (32, 128)}, lambda n, b: 1.0) is None and tight.width("w") == 4
    assert q.quantize("w", w, bits=6).meta["index_bits"] == 6
    with pytest.raises(cactus.QuantizationError, match="bits must be one of"):
        q.quantize("w", w, bits=3)


def test_sensitivity_texts_alternate_plain_text_and_chats_within_the_budget():
    texts = [[0] * 10, [0] * 10, [0] * 10, [7] * 30, [7] * 30]
    keep = [np.ones(len(t), bool) for t in texts]
    keep[3][:5] = False
    out = sensitivity_texts(texts, keep, budget=35, plain=3)
    assert [t[0] for t in out] == [0, 7] and [len(t) for t in out] == [10, 25]
    assert [len(k) for k in out.keep] == [10, 25] and not out.keep[1][:5].any() and out.keep[1][5:].all()
    assert sum(map(len, sensitivity_texts(texts, None, budget=1000))) == 90
    lo, hi = SENSITIVITY_TOKENS
    assert sensitivity_tokens(10**6, 10) == hi and sensitivity_tokens(10**10, 200) == lo


def test_calibrated_cq4_widens_measured_tensors_and_every_backend_runs_the_mix(tiny_chat, tmp_path,
                                                                              register_plugin):
    opts = dict(bits=4, progress=False, head="keep", calibration_samples=4)
    rep = convert(tiny_chat, tmp_path / "wide", **opts)
    plain = convert(tiny_chat, tmp_path / "plain", quantizer=CQQuantizer("cq4", 4), **opts)
    assert rep["allocation_source"] == "measured" and rep["widened"]
    assert plain["bits_per_weight"] < rep["bits_per_weight"] <= BUDGET_BPW
    tensors = json.loads((tmp_path / "wide" / "cactus.json").read_text())["quantization"]["tensors"]
    widths = {n: e["meta"]["index_bits"] for n, e in tensors.items()}
    assert {n: w for n, w in widths.items() if w != 4} == rep["widened"]
    assert sum(rep["allocation"].values()) == rep["tensors_quantized"]
    ref = cactus.load(tiny_chat, backend="numpy_ref")
    wide = cactus.load(str(tmp_path / "wide"), backend="numpy_ref")
    kl_wide = compare(ref, wide, max_windows=2)["kl_mean"]
    kl_plain = compare(ref, cactus.load(str(tmp_path / "plain"), backend="numpy_ref"), max_windows=2)["kl_mean"]
    assert kl_wide < kl_plain
    neon = pytest.importorskip("cactus_cpu_neon.plugin", reason="cactus-cpu-neon not installed")
    register_plugin(neon, name="cpu_neon")
    msgs = [{"role": "user", "content": "Set a timer for ten minutes"}]
    fast = cactus.load(str(tmp_path / "wide"), backend="cpu_neon")
    a, b = fast.complete(msgs, max_tokens=12), wide.complete(msgs, max_tokens=12)
    assert (a["response"], a["function_calls"]) == (b["response"], b["function_calls"])


def test_the_benchmarks_stand_in_plan_widens_attention_within_the_budget():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "vs_llamacpp.py"
    spec = importlib.util.spec_from_file_location("vs_llamacpp", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    shapes = {f"model.layers.{i}.{k}.weight": s for i in range(4) for k, s in (
        ("self_attn.q_proj", (512, 512)), ("self_attn.k_proj", (128, 512)), ("self_attn.v_proj", (128, 512)),
        ("self_attn.o_proj", (512, 512)), ("mlp.gate_proj", (1536, 512)), ("mlp.up_proj", (1536, 512)),
        ("mlp.down_proj", (512, 1536)))}
    plan = bench.widened_plan(shapes, BUDGET_BPW)
    q = WidenedCQQuantizer()
    size = {n: s[0] * s[1] for n, s in shapes.items()}
    bpw = sum(q.inner[plan.get(n, 4)].bits_for_shape(s) * size[n] for n, s in shapes.items()) / sum(size.values())
    assert bpw <= BUDGET_BPW and all(plan.get(f"model.layers.{i}.self_attn.v_proj.weight") == 6 for i in range(4))
    assert not any("mlp" in n for n in plan)
    fives = [n for n, b in plan.items() if b == 5]
    assert fives and all(".layers.0." in n or ".layers.3." in n for n in fives[:2])  # outer layers first


def test_coarse_groups_pay_for_more_widening_within_the_budget():
    shapes = {f"l{i}.{k}": s for i in range(4) for k, s in (("v", (64, 320)), ("mlp", (960, 320)))}
    kl4 = {n: 0.05 if n.endswith(".v") else 0.02 for n in shapes}
    measure = lambda n, b: kl4[n] if b == 4 else 1 / 0
    plain = WidenedCQQuantizer()
    base = plain.plan_widths(shapes, measure)
    q = WidenedCQQuantizer(coarse=True)
    plan = q.plan_widths(shapes, measure, {n: 1.1 for n in shapes})
    assert plan.average_bpw <= BUDGET_BPW and plan.total_error < base.total_error
    assert q.coarse_plan and all(n.endswith(".mlp") for n in q.coarse_plan)  # the big, cheap ones
    assert sum(b - 4 for b in plan.bits.values()) > sum(b - 4 for b in base.bits.values())
    rng = np.random.default_rng(0)
    w = rng.standard_normal((960, 320)).astype(np.float32)
    name = sorted(q.coarse_plan)[0]
    assert q.quantize(name, w).meta["group_size"] == 160  # 80 -> 160 inputs
    assert q.quantize("l0.v", w[:64]).meta["group_size"] == 80
    assert 1.0 < coarse_error_ratio(w) < 1.2
