"""GPTQ against RTN, mixed-precision allocation, and plugin registration."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from cactus_core import plugins
from cactus_core.errors import QuantizationError
from cactus_core.formats import Int4Tensor
from cactus_quant import (
    GPTQQuantizer,
    MixedCQQuantizer,
    allocate_bits,
    gptq_quantize,
    hessian,
    proxy_measure,
    rtn_quantize,
)
from cactus_quant.mixed import floor_widths


def correlated_inputs(n_tokens, dim, seed=0):
    """Activations with strongly correlated channels and a few loud ones, like real layers."""
    rng = np.random.default_rng(seed)
    mix = rng.standard_normal((dim // 4, dim))
    x = rng.standard_normal((n_tokens, dim // 4)) @ mix + 0.1 * rng.standard_normal((n_tokens, dim))
    x[:, rng.choice(dim, 4, replace=False)] *= 8.0
    return x.astype(np.float32)


def output_error(x, w, qt):
    return float(np.sum((x @ w.T - x @ qt.dequantize().T) ** 2) / np.sum((x @ w.T) ** 2))


def test_gptq_beats_rtn_on_correlated_inputs():
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((128, 256)) * 0.05).astype(np.float32)
    x = correlated_inputs(2560, 256, seed=2)
    calib, test = x[:2048], x[2048:]  # held-out tokens of the same distribution
    g = gptq_quantize(w, calib, bits=4, group_size=128)
    r = rtn_quantize(w, 4, 128)
    assert isinstance(g, Int4Tensor) and g.meta == {"group_size": 128}
    assert output_error(test, w, g) < 0.6 * output_error(test, w, r)
    # same result from the Hessian as from the activations
    h = gptq_quantize(w, hessian(calib), bits=4, group_size=128)
    np.testing.assert_array_equal(h.arrays["codes"], g.arrays["codes"])


@pytest.mark.parametrize("bits", [4, 2])
def test_cq_error_feedback_beats_data_free_cq(bits):
    from cactus_quant import CQQuantizer

    rng = np.random.default_rng(5)
    w = (rng.standard_normal((64, 256)) * 0.05).astype(np.float32)
    x = correlated_inputs(2560, 256, seed=6)
    calib, test = x[:2048], x[2048:]
    q = CQQuantizer(f"cq{bits}", bits)
    plain, fb = q.quantize("w", w), q.quantize("w", w, calibration=calib)
    assert fb.meta == plain.meta and fb.bits_per_weight == plain.bits_per_weight

    def err(qt):  # through the format's own online rotation
        y = test @ w.T
        return float(np.sum((qt.matmul_input_transform(test) @ qt.dequantize().T - y) ** 2) / np.sum(y**2))

    assert err(fb) < 0.3 * err(plain)


def test_gptq_identity_hessian_is_rtn():
    # with uncorrelated unit inputs there is no error to feed forward
    w = np.random.default_rng(4).standard_normal((32, 128)).astype(np.float32)
    g = gptq_quantize(w, np.eye(128) * 2.0, bits=4, damp=0.0)
    np.testing.assert_array_equal(g.dequantize(), rtn_quantize(w, 4).dequantize())


def test_gptq_quantizer_needs_calibration():
    q = GPTQQuantizer("gptq4")
    w = np.ones((4, 64), np.float32)
    with pytest.raises(QuantizationError, match="calibration"):
        q.quantize("w", w)
    with pytest.raises(QuantizationError, match="features"):
        q.quantize("w", w, calibration=np.ones((10, 32)))
    assert q.bits_per_weight == 4.25


def _toy_problem(n=6, seed=0):
    rng = np.random.default_rng(seed)
    sizes = {f"t{i}": int(rng.integers(1, 10)) * 1000 for i in range(n)}
    sens = {k: float(rng.uniform(0.1, 10)) for k in sizes}
    return sizes, (lambda name, bits: sens[name] * 4.0 ** (-bits))


@pytest.mark.parametrize("target,seed", [(2.54, 0), (3.26, 0), (3.9, 0), (4.0, 1), (3.26, 2), (2.2, 3)])
def test_allocation_hits_target_and_is_optimal(target, seed):
    sizes, measure = _toy_problem(seed=seed)
    alloc = allocate_bits(sizes, target, measure)
    total = sum(sizes.values())
    assert alloc.average_bpw <= target + 1e-9
    assert alloc.average_bpw == pytest.approx(sum(sizes[n] * b for n, b in alloc.bits.items()) / total)
    best = min(
        sum(measure(n, b) for n, b in zip(sizes, combo))
        for combo in itertools.product((2, 3, 4), repeat=len(sizes))
        if sum(sizes[n] * b for n, b in zip(sizes, combo)) <= target * total + 1e-9
    )
    assert alloc.total_error <= best * (1 + 1e-9)


def test_allocation_rejects_impossible_target():
    sizes, measure = _toy_problem()
    with pytest.raises(QuantizationError, match="below the smallest width"):
        allocate_bits(sizes, 1.5, measure)


def test_mixed_plan_on_weights_with_proxy():
    rng = np.random.default_rng(7)
    # l0 is small enough that its CQ4 fits in the 0.06 bpw above uniform CQ3
    weights = {f"l{i}.w": (rng.standard_normal((64 if i == 0 else 256, 1024)) * 0.02).astype(np.float32)
               for i in range(8)}
    act = {name: 1.0 for name in weights}
    act["l0.w"] = 1e4  # a layer whose inputs are loud is worth more bits
    mixed = MixedCQQuantizer("cq3.26", 3.26)
    alloc = mixed.plan(weights, measure=proxy_measure(weights, act, mixed.inner))
    assert alloc.bits["l0.w"] == 4 and set(alloc.bits.values()) <= {3, 4}
    tensors = {n: mixed.quantize(n, w) for n, w in weights.items()}
    true_avg = sum(t.bits_per_weight * t.shape[0] * t.shape[1] for t in tensors.values()) / sum(w.size for w in weights.values())
    assert true_avg == pytest.approx(alloc.average_bpw)
    assert 3.0 < true_avg <= 3.26
    assert mixed.bits_per_weight == alloc.average_bpw
    with pytest.raises(QuantizationError, match="call plan"):
        MixedCQQuantizer("cq2.54", 2.54).quantize("x", weights["l1.w"])


def test_mixed_widths_stop_at_the_targets_floor():
    assert floor_widths(3.26) == (3, 4) and floor_widths(2.54) == (2, 3, 4) and floor_widths(4.0) == (4,)
    assert sorted(MixedCQQuantizer("cq3.26", 3.26).inner) == [3, 4]
    assert sorted(MixedCQQuantizer("cq2.54", 2.54).inner) == [2, 3, 4]
    assert sorted(MixedCQQuantizer("x", 3.26, choices=(2, 3, 4)).inner) == [2, 3, 4]  # explicit widths win
    with pytest.raises(QuantizationError, match="bits must be one of"):
        MixedCQQuantizer("cq3.26", 3.26).quantize("x", np.zeros((8, 256), np.float32), bits=2)


def test_plugin_registers_every_scheme(register_plugin):
    from cactus_quant import plugin

    register_plugin(plugin, name="quant")
    found = plugins.quantizers()
    for name in ("cq4", "cq3", "cq2", "cq3.26", "cq2.54", "gptq4", "rtn4", "rtn8"):
        assert name in found and found[name].bits_per_weight > 0
    assert found["cq4"].bits_per_weight <= 4.25
