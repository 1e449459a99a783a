"""The inexact fast CQ paths against the exact kernels: decode with int8
activations (cn_cq_linear_i8) and prefill with bfloat16 products.

The int8 path is not exact: x is rounded to int8 per scale group and the
codebook to int8 per tensor.  Measured on this suite's shapes (random codes,
a float16 N(0,1) codebook, N(0,1) inputs), one linear differs from the exact
product by about 1e-2 of the output's largest magnitude (max 0.5-1.3e-2, RMS
2.1-5.8e-3 of it over CQ4, CQ3 and CQ2); the bounds below are 3e-2 (max) and
1e-2 (RMS).  Integer
arithmetic itself is checked tightly against a numpy emulation, so a layout
slip cannot hide inside that bound.  Whole models: decode logits of the
random-init test models stay within the per-family bounds measured in
docs/cpu_neon.md, and the trained default model (models/spine, converted to
CQ4) decodes the same greedy tokens on both paths but at near-ties.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from cactus_core.backends.numpy_ref import NumpyBackend
from cactus_core.formats import hadamard, unpack_bits
from cactus_core.generate import Generator, SamplingParams
from cactus_core.graph import Ops
from cactus_core.models import model_module
from cactus_core.weights import load_weights

HERE = Path(__file__).resolve().parent

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (N, K, group, block): whole 64-code chunks, partial chunks (80 -> 40 codes,
# 96 -> 48, 120 -> 60), a group of two chunks, odd row counts.
SHAPES = [(67, 512, 128, 128), (50, 320, 80, 64), (33, 960, 120, 64), (29, 576, 96, 64),
          (16, 512, 256, 128), (37, 256, 64, 128)]


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def _cq(rng, N, K, bits, d=2, group=128, block=128):
    """A random CQ tensor (test_kernels' helper, with this file's defaults)."""
    from test_kernels import _cq as random_cq

    return random_cq(rng, N, K, bits, d, group, block)


def _int8_emulation(x, w, bias):
    """The int8 arithmetic in numpy: rotated x rounded per scale group, codebook per table."""
    from cactus_cpu_neon.backend import quantize_codebook

    N, K = w.shape
    m = w.meta
    bits, d, group = m["index_bits"], m["vec_dim"], m["group_size"]
    signs = 1.0 - 2.0 * np.unpackbits(w.arrays["signs"], bitorder="little").astype(np.float32)
    xr = hadamard((x.reshape(-1) * signs).astype(np.float32), m["block_size"]).reshape(-1, group)
    amax = np.abs(xr).max(axis=1, keepdims=True)
    xq = np.rint(xr * (np.float32(127) / amax).astype(np.float32)).astype(np.int64)
    planes, cb_scale = quantize_codebook(w.arrays["codebook"], 63 if (bits, d) == (4, 1) else 127)
    codes = unpack_bits(w.arrays["codes"], bits, K // d).astype(np.int64)
    wq = np.stack([planes[e][codes] for e in range(d)], axis=-1).reshape(N, -1, group).astype(np.int64)
    dots = np.einsum("ngk,gk->ng", wq, xq).astype(np.float64)
    scales = w.arrays["scales"].astype(np.float64)
    return (scales * dots * (amax[:, 0] / 127 * cb_scale)).sum(axis=1) + bias


# CQ4 (8-bit codes of 2-vectors), CQ3 (6-bit), CQ2 (8-bit codes of 4-vectors: groups of 128 are
# half a 64-code chunk, and 80 inputs are 20 codes), the cq6 / cq5 heads (6- and 5-bit codes of
# scalars: a group of 128 is two chunks, 80 a chunk and a quarter), CQ4 since session 12 (4-bit
# codes of scalars, x laid out as for 2-vectors: 80 inputs are 40 code bytes, a step and a quarter)
LAYOUTS = [(8, 2), (6, 2), (8, 4), (6, 4), (6, 1), (5, 1), (4, 1)]


def _needs_kernel(backend, bits, d):
    if not backend._int8_for(bits, d):
        pytest.skip(f"this build has no native int8 kernel for {bits}-bit codes of {d}-vectors")


@pytest.mark.parametrize("bits,d", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES)
def test_int8_path_computes_the_int8_arithmetic(neon_i8, rng, bits, d, shape):
    N, K, group, block = shape
    if group % (4 * d):
        pytest.skip("not a CQ layout: groups are whole runs of four vectors")
    _needs_kernel(neon_i8, bits, d)
    w, bias = _cq(rng, N, K, bits, d=d, group=group, block=block), rng.standard_normal(N).astype(np.float32)
    x = rng.standard_normal((1, 1, K)).astype(np.float32)
    got, want = neon_i8.linear(x, w, bias)[0, 0], _int8_emulation(x, w, bias)
    # Only float rounding (rotation, scales) separates them: 1e-4 relative would not hide a
    # wrong table, chunk or scale, each of which moves the result by O(1).
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("bits,d", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES)
def test_int8_path_is_within_its_bound_of_the_exact_kernel(neon, neon_i8, rng, bits, d, shape):
    N, K, group, block = shape
    if group % (4 * d):
        pytest.skip("not a CQ layout: groups are whole runs of four vectors")
    _needs_kernel(neon_i8, bits, d)
    w, bias = _cq(rng, N, K, bits, d=d, group=group, block=block), rng.standard_normal(N).astype(np.float32)
    x = rng.standard_normal((1, 1, K)).astype(np.float32)
    exact, got = neon.linear(x, w, bias), neon_i8.linear(x, w, bias)
    big = np.abs(exact).max()
    assert np.abs(got - exact).max() < 3e-2 * big
    assert np.sqrt(np.mean((got - exact) ** 2)) < 1e-2 * big
    assert not np.array_equal(got, exact)  # it really took the int8 kernel


def _uniform(w):
    """w with the equally spaced 64 levels cactus convert gives the cq6 head (codebooks.uniform_grid)."""
    w.arrays["codebook"] = ((2 * np.arange(64) - 63)[:, None] * (13 / 256)).astype(np.float16)
    return w


@pytest.mark.parametrize("shape", SHAPES)
def test_uniform_cq6_head_computes_the_int8_arithmetic(neon, neon_i8, rng, shape):
    """The cq6 head on equally spaced levels: its codes multiplied directly (AVX2), no lookup."""
    from cactus_cpu_neon.backend import quantize_codebook

    N, K, group, block = shape
    _needs_kernel(neon_i8, 6, 1)
    w, bias = _uniform(_cq(rng, N, K, 6, d=1, group=group, block=block)), rng.standard_normal(N).astype(np.float32)
    planes, step = quantize_codebook(w.arrays["codebook"])
    np.testing.assert_array_equal(planes[0], 2 * np.arange(64) - 63)  # exact, not rounded to +-127
    assert step == 13 / 256
    x = rng.standard_normal((1, 1, K)).astype(np.float32)
    got, want = neon_i8.linear(x, w, bias)[0, 0], _int8_emulation(x, w, bias)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())
    exact = neon.linear(x, w, bias)[0, 0]
    big = np.abs(exact).max()
    assert np.abs(got - exact).max() < 3e-2 * big and np.sqrt(np.mean((got - exact) ** 2)) < 1e-2 * big


def test_only_an_exact_grid_counts_as_uniform(rng):
    from cactus_cpu_neon.backend import quantize_codebook

    grid = ((2 * np.arange(64) - 63)[:, None] * (13 / 256)).astype(np.float16)
    off = grid.copy()
    off[5, 0] = np.float16(off[5, 0] * 1.01)  # one level moved: a table again, rounded to +-127
    planes, scale = quantize_codebook(off)
    assert np.abs(planes).max() == 127 and scale == pytest.approx(63 * 13 / 256 / 127, rel=1e-3)
    zero = np.zeros((64, 1), np.float16)  # no levels at all: zeros, not the odd integers
    assert not quantize_codebook(zero)[0].any()


@pytest.mark.parametrize("bits,d", [(8, 2), (4, 1)])
@pytest.mark.parametrize("N,K", [(45, 2304), (9, 128), (21, 4224), (64, 1024)])
def test_cq4_groups_of_128_compute_the_int8_arithmetic(neon_i8, rng, bits, d, N, K):
    """CQ4 in groups of 128 inputs (every CQ4 model) has its own AVX-512 loops (cq_vbmi.c:
    i8_row_g128, for 8-bit codes of 2-vectors and for today's 4-bit scalar codes):
    rows of more than 16 groups (their blocks of 16 factors, the last one partial), a lone
    group, and every code value (all 256 in both halves of the table; all 16)."""
    _needs_kernel(neon_i8, bits, d)
    w, bias = _cq(rng, N, K, bits, d=d, group=128, block=128), rng.standard_normal(N).astype(np.float32)
    assert N * K < 2**14 or len(np.unique(w.arrays["codes"])) == 256
    x = rng.standard_normal((1, 1, K)).astype(np.float32)
    got, want = neon_i8.linear(x, w, bias)[0, 0], _int8_emulation(x, w, bias)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())


@pytest.mark.parametrize("bits,d", [(8, 2), (6, 2), (8, 4), (6, 1), (5, 1)])
@pytest.mark.parametrize("shape", [(67, 512, 128, 128), (50, 320, 80, 64), (37, 256, 64, 128)])
@pytest.mark.parametrize("M", [6, 37, 53])  # 53: AMX's 32-row and 16-row blocks and a tail of 5 rows
def test_bf16_prefill_is_within_its_bound_of_the_exact_kernel(neon, neon_bf16, rng, bits, d, shape, M):
    N, K, group, block = shape
    w, bias = _cq(rng, N, K, bits, d=d, group=group, block=block), rng.standard_normal(N).astype(np.float32)
    x = rng.standard_normal((1, M, K)).astype(np.float32)
    exact, got = neon.linear(x, w, bias), neon_bf16.linear(x, w, bias)
    big = np.abs(exact).max()
    # bfloat16 keeps 8 mantissa bits of x and of each weight: measured max 1.6-3.2e-3, RMS 5.0-8.0e-4
    assert np.abs(got - exact).max() < 1e-2 * big
    assert np.sqrt(np.mean((got - exact) ** 2)) < 3e-3 * big
    assert not np.array_equal(got, exact)
    x1 = x[:, :1]
    assert np.array_equal(neon_bf16.linear(x1, w, bias), neon.linear(x1, w, bias))  # decode: exact


_AMX_PROBE = """
import sys, numpy as np
sys.path.insert(0, sys.argv[1])
from test_int8_activations import _cq
from cactus_cpu_neon import _kernels
from cactus_cpu_neon.backend import NeonBackend
rng = np.random.default_rng(5)
outs = []
for bits, d, N, K, group, block in [(8, 2, 67, 512, 128, 128), (6, 1, 50, 320, 80, 64), (4, 1, 96, 1024, 128, 128)]:
    w = _cq(rng, N, K, bits, d=d, group=group, block=block)
    x = rng.standard_normal((1, 53, K)).astype(np.float32)
    outs.append(NeonBackend(int8_activations=False, bf16_prefill=True).linear(x, w))
np.savez(sys.argv[2], amx=_kernels.lib.cn_gemm_amx_available(), *outs)
"""


def test_amx_tiles_give_the_avx512_bf16_tiles_products(neon_bf16, tmp_path):
    """Where the CPU has AMX (gemm_amx.c), prefill's bfloat16 products run on tiles; with
    CACTUS_AMX=0 on the AVX-512 tile. Same rounding of x and weights, only the order of
    the float32 sums differs: agreement to float32 noise, not to the bfloat16 bound."""
    import subprocess
    import sys

    runs = {}
    for amx in ("1", "0"):
        out = tmp_path / f"amx{amx}.npz"
        env = {**os.environ, "CACTUS_AMX": amx}
        subprocess.run([sys.executable, "-c", _AMX_PROBE, str(HERE), str(out)], env=env, check=True)
        runs[amx] = np.load(out)
    if not runs["1"]["amx"]:
        pytest.skip("no AMX here (the build, the CPU or the kernel)")
    assert not runs["0"]["amx"]
    keys = [k for k in runs["1"].files if k != "amx"]
    for key in keys:
        a, b = runs["1"][key], runs["0"][key]
        assert a.shape == b.shape and np.isfinite(a).all()
        np.testing.assert_allclose(a, b, rtol=0, atol=2e-5 * np.abs(b).max())
    assert any(not np.array_equal(runs["1"][k], runs["0"][k]) for k in keys)  # the tiles did run


def test_prefill_and_other_layouts_stay_exact(neon, neon_i8, rng):
    """Several tokens (prefill) and 256-entry scalar / 5-bit 2-vector layouts have no int8
    kernel: bit-identical."""
    for bits, d in [(8, 2), (4, 1)]:
        w = _cq(rng, 40, 256, bits, d=d)
        x = rng.standard_normal((1, 6, 256)).astype(np.float32)
        assert np.array_equal(neon_i8.linear(x, w), neon.linear(x, w))
    for bits, d in [(8, 1), (5, 2)]:
        w = _cq(rng, 40, 256, bits, d=d, group=64)
        x = rng.standard_normal((1, 1, 256)).astype(np.float32)
        assert np.array_equal(neon_i8.linear(x, w), neon.linear(x, w))


@pytest.mark.parametrize("bits,d", [(8, 2), (4, 1)])
def test_non_finite_codebook_takes_the_exact_path(neon, neon_i8, rng, bits, d):
    """A broken bundle (NaN in its codebook) gives the exact kernel's NaNs, not int8 garbage."""
    w = _cq(rng, 16, 256, bits, d=d)
    w.arrays["codebook"][3, 0] = np.nan
    x = rng.standard_normal((1, 1, 256)).astype(np.float32)
    np.testing.assert_array_equal(neon_i8.linear(x, w), neon.linear(x, w))


def test_setting_from_argument_and_environment(neon_backend_class, monkeypatch):
    from cactus_cpu_neon.backend import KernelArgumentError, load_kernels

    # 2: measured faster (AVX-512 VBMI + VNNI), 1: native but unmeasured (arm64), 0: SIMDe only
    level = load_kernels().lib.cn_cq_i8_kernel(8, 2)
    assert load_kernels().lib.cn_cq_i8_kernel(8, 1) == 0  # 256-entry scalar codebooks have none
    # CQ4 (4-bit scalars): AVX2 has a measured kernel even where 2-vectors have none
    cq4 = load_kernels().lib.cn_cq_i8_kernel(4, 1)
    assert cq4 >= level
    assert load_kernels().lib.cn_cq_i8_kernel(8, 4) == level  # CQ2 has
    assert load_kernels().lib.cn_cq_i8_kernel(5, 1) >= level  # cq4's widened 5 bits: AVX2 has it too
    assert load_kernels().lib.cn_cq_i8_kernel(6, 1) >= level  # cq6: AVX2 has it too
    monkeypatch.delenv("CACTUS_INT8_ACT", raising=False)
    assert neon_backend_class().int8_activations is None  # auto
    assert ("int8 CQ decode" in neon_backend_class().describe()) == (level == 2)
    cq3 = load_kernels().lib.cn_cq_i8_kernel(6, 2)  # CQ3: AVX2 has it (64 entries: four pshufb)
    assert cq3 >= level
    assert ("int8 CQ4/CQ3 decode" in neon_backend_class().describe()) == (level < 2 and cq3 == 2)
    assert ("int8 CQ4 decode" in neon_backend_class().describe()) == (level < 2 and cq4 == 2 and cq3 < 2)
    monkeypatch.setenv("CACTUS_INT8_ACT", "0")
    assert "int8" not in neon_backend_class().describe()
    assert neon_backend_class(int8_activations=True).int8_activations is True  # the argument wins
    monkeypatch.setenv("CACTUS_INT8_ACT", "1")
    assert ("int8 CQ decode" in neon_backend_class().describe()) == (level >= 1)
    monkeypatch.setenv("CACTUS_INT8_ACT", "sometimes")
    with pytest.raises(KernelArgumentError, match="CACTUS_INT8_ACT must be 0, 1 or auto") as err:
        neon_backend_class()
    assert "\n" not in str(err.value)
    monkeypatch.delenv("CACTUS_INT8_ACT")
    bf16 = bool(load_kernels().lib.cn_gemm_bf16_available())
    monkeypatch.setenv("CACTUS_BF16_PREFILL", "auto")
    assert neon_backend_class().bf16_prefill == bf16
    assert ("bf16 CQ prefill" in neon_backend_class().describe()) == bf16
    monkeypatch.setenv("CACTUS_BF16_PREFILL", "0")
    assert neon_backend_class().bf16_prefill is False and "bf16" not in neon_backend_class().describe()
    assert neon_backend_class(bf16_prefill=True).bf16_prefill == bf16
    monkeypatch.setenv("CACTUS_BF16_PREFILL", "maybe")
    with pytest.raises(KernelArgumentError, match="CACTUS_BF16_PREFILL must be 0, 1 or auto"):
        neon_backend_class()


# --- whole models -----------------------------------------------------------------
def _model(path, backend):
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    return model_module(config).Model(config, load_weights(path), Ops([backend, NumpyBackend()]))


def _convert(src, out, bits, **options):
    convert = pytest.importorskip("cactus_quant.convert", reason="needs cactus-quant").convert
    # The kernels run whatever codes the bundle holds; data-free coding makes the same
    # formats in seconds, where CQ4's default self-calibration writes ~16K tokens first.
    convert(src, out, bits=bits, force=True, progress=False, self_calibrate=False, **options)
    return str(out)


# Largest decode-logit difference (relative to the largest logit) measured over 4 prompts x
# 31 teacher-forced steps, CQ4 and CQ3: llama/qwen3 1.3-2.8e-2, gemma3 6.1-8.4e-2 (random
# weights and sqrt(hidden)-scaled embeddings amplify the rounding through the layers).
@pytest.mark.parametrize("name,bits,bound", [("qwen3-gqa", 4, 5e-2), ("llama-gqa-untied", 3, 5e-2),
                                             ("gemma3-softcap", 4, 1.5e-1)])
def test_test_models_decode_logits_stay_close(neon, neon_i8, name, bits, bound, tmp_path):
    test_models = pytest.importorskip("test_models", reason="needs tests/test_models.py helpers")
    _needs_kernel(neon_i8, *{4: (4, 1), 3: (6, 2)}[bits])
    _, src = test_models.build_reference(name, tmp_path)
    # an int8 head (one exact kernel): prefill's last-token head is a one-row product, which a
    # cq6 head would take through the int8 kernel too (test_cq_head.py covers that head)
    path = _convert(src, tmp_path / f"cq{bits}", bits, head="int8")
    exact, int8 = _model(path, neon), _model(path, neon_i8)
    prompt = [5, 17, 42, 99, 3, 7]
    tokens = Generator(exact).generate(prompt, SamplingParams(max_tokens=16), decode=lambda t: "").tokens
    ga, gb = Generator(exact), Generator(int8)
    la, lb = ga.prefill(prompt)[0], gb.prefill(prompt)[0]
    assert np.array_equal(la, lb)  # prefill is exact on both
    worst = 0.0
    for t in tokens[:-1]:
        la, lb = ga.step(t), gb.step(t)
        worst = max(worst, float(np.abs(la - lb).max() / np.abs(la).max()))
    assert 0 < worst < bound, f"decode logits differ by {worst:.2e} of the largest"


@pytest.fixture(scope="module")
def spine_cq4(tmp_path_factory):
    src = os.path.join(ROOT, "models", "spine")
    if not os.path.isfile(os.path.join(src, "config.json")):
        pytest.skip("models/spine is not in this checkout")
    return _convert(src, tmp_path_factory.mktemp("spine") / "cq4", 4)


def test_default_model_decodes_the_same_greedy_tokens(neon_i8, spine_cq4):
    """The trained default model, CQ4 (groups of 80: partial chunks), both fast paths on.

    A flip of the argmax is allowed only at a near-tie of the exact logits: on
    the 16 prompts of cactus_cpu_neon.agreement, CQ4 bundles of this model gave
    16/16 and 14/16 identical outputs (the quantizer changed between them), the
    two flips where the exact top two logits were 1-2e-3 of their range apart;
    the float16 model and its exact CQ4 agreed on 13/16.
    """
    from cactus_cpu_neon.agreement import agreement

    with open(os.path.join(ROOT, "examples", "phone_tools.json")) as f:
        tools = json.load(f)
    prompts = ["Set an alarm for 7:30 tomorrow morning", "Text Maria that I'm running ten minutes late",
               "Turn off the kitchen lights and set a timer for 20 minutes"]
    r = agreement(spine_cq4, tools, tokens=32, prompts=prompts)
    assert r["steps"] > 60
    assert r["forced_flips"] <= 1, r["rows"]
    assert all(m < 1e-2 for row in r["rows"] for m in row["flip_margins"]), r["rows"]
    assert r["identical"] >= len(prompts) - r["forced_flips"]
    assert 0 < r["max_rel_logit_diff"] < 3e-2  # measured 5e-3 to 1.1e-2 over 16 prompts
