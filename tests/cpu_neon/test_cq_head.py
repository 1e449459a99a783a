"""The cq6 / cq5 output heads (``cactus convert --head cq6|cq5``) on the trained default model.

CQ with a scalar (vec_dim 1) codebook of 64 or 32 levels: convert writes it, numpy_ref
and cpu_neon's exact kernels give the same logits, the int8-activation decode stays
within the bound the other CQ layouts keep, and the weight error sits between the
int8 head and CQ4's, ordered by bits.  Conversions here are data-free (seconds);
the default self-calibration only changes the block weights, never the head.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import cactus_core as cactus
from cactus_core.backends.numpy_ref import NumpyBackend
from cactus_core.errors import QuantizationError
from cactus_core.graph import Ops
from cactus_core.weights import load_weights

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPINE = os.path.join(ROOT, "models", "spine")
HEAD = "model.embed_tokens.weight"

quant_convert = pytest.importorskip("cactus_quant.convert", reason="needs cactus-quant (pip install ./quant)")


@pytest.fixture(scope="module")
def spine_cq6(tmp_path_factory):
    if not os.path.isfile(os.path.join(SPINE, "config.json")):
        pytest.skip("models/spine is not in this checkout")
    out = tmp_path_factory.mktemp("spine") / "cq4-head-cq6"
    rep = quant_convert.convert(SPINE, out, bits=4, progress=False, self_calibrate=False, head="cq6")
    return str(out), rep


def test_convert_writes_a_scalar_codebook_head(spine_cq6):
    out, rep = spine_cq6
    entry = json.loads(open(os.path.join(out, "cactus.json")).read())["quantization"]["tensors"][HEAD]
    assert rep["head"] == "cq6" and rep["head_tensors"] == [HEAD]
    assert entry["format"] == "cq" and entry["meta"]["index_bits"] == 6 and entry["meta"]["vec_dim"] == 1
    assert entry["meta"]["group_size"] == 80  # hidden 320: the largest divisor up to 128 in runs of 4
    assert 6.0 < rep["head_bits_per_weight"] < 6.25  # codes, a float16 scale per 80, table and signs
    table = load_weights(out)[HEAD]
    cb = table.arrays["codebook"].astype(np.float32)[:, 0]
    assert cb.shape == (64,) and np.all(np.diff(cb) > 0)  # Lloyd-Max levels, ascending
    np.testing.assert_allclose(cb, -cb[::-1], atol=2e-3)  # of a symmetric (Gaussian) source


def test_head_choices_and_their_quantizers():
    for head, bits in (("cq6", 6), ("cq5", 5)):
        q = quant_convert.head_quantizer(head)
        assert q.params["index_bits"] == bits and q.params["vec_dim"] == 1 and q.params["group_size"] == 128
    assert {"cq6", "cq5"} <= set(quant_convert.HEAD_CHOICES)
    with pytest.raises(QuantizationError, match="cq6, cq5"):
        quant_convert.head_quantizer("cq7")


def test_head_weight_error_orders_with_bits():
    """On the trained embedding table: int8 < cq6 < cq5 < cq4 in error, the reverse in bits."""
    if not os.path.isfile(os.path.join(SPINE, "config.json")):
        pytest.skip("models/spine is not in this checkout")
    from cactus_core.formats import to_float32

    w = to_float32(load_weights(SPINE)[HEAD])[:2048]  # a third of the vocabulary keeps this fast
    err, bpw = {}, {}
    for head in ("int8", "cq6", "cq5", "cq4"):
        qt = quant_convert.head_quantizer(head).quantize(HEAD, w)
        err[head] = float(np.sum((qt.dequantize_rows(np.arange(len(w))) - w) ** 2) / np.sum(w * w))
        bpw[head] = qt.bits_per_weight
    assert err["int8"] < err["cq6"] < err["cq5"] < err["cq4"], err
    assert bpw["int8"] > bpw["cq6"] > bpw["cq5"] > bpw["cq4"], bpw
    # cq6's equally spaced levels cost 1.27x the error of 64 Lloyd-Max levels (measured), and
    # between Lloyd-Max tables each bit divides the error by about 4 (measured 3.8-4.1x)
    from cactus_quant.cq import CQQuantizer

    lloyd6 = CQQuantizer("cq6", 4, index_bits=6, vec_dim=1).quantize(HEAD, w)
    err["cq6 lloyd"] = float(np.sum((lloyd6.dequantize_rows(np.arange(len(w))) - w) ** 2) / np.sum(w * w))
    assert 1.1 < err["cq6"] / err["cq6 lloyd"] < 1.45, err
    assert 3 < err["cq5"] / err["cq6 lloyd"] < 5, err


def _model(path, backend):
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    from cactus_core.models import model_module

    return model_module(config).Model(config, load_weights(path), Ops([backend, NumpyBackend()]))


IDS = [1, 45, 310, 977, 12, 5, 2048, 77, 6000, 3]


def test_cpu_neon_exact_kernels_match_numpy_ref(neon, spine_cq6):
    """Embedding rows and the tied head's linear, decode and prefill, to float rounding."""
    out, _ = spine_cq6
    ops = Ops([neon, NumpyBackend()])
    assert ops.backend_for("linear", "cq") == "cpu_neon" and ops.backend_for("embedding", "cq") == "cpu_neon"
    want = cactus.load(out, backend="numpy_ref").logits(IDS)
    got = cactus.load(out, ops=ops).logits(IDS)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-4 * np.abs(want).max())
    table = load_weights(out)[HEAD]
    rows = neon.embedding(table, np.array(IDS))
    np.testing.assert_allclose(rows, table.dequantize_rows(np.array(IDS)), rtol=0, atol=1e-6)


def test_int8_activation_decode_of_the_head_stays_close(neon, neon_i8, spine_cq6):
    """The head alone on the model's own hidden states, and whole teacher-forced decode steps."""
    from cactus_core.generate import Generator, KVCache

    if not neon_i8._int8_for(6, 1):
        pytest.skip("this build has no native int8 kernel for the cq6 head")
    out, _ = spine_cq6
    model = _model(out, neon)
    h = model.forward(np.asarray([IDS]), KVCache.for_model(model, 32))[0]
    table = load_weights(out)[HEAD]
    for t in range(len(IDS)):
        a, b = neon.linear(h[None, t : t + 1], table), neon_i8.linear(h[None, t : t + 1], table)
        # measured 0.8-1.2e-2 of the largest logit (cq5 and cq4 heads alike)
        assert 0 < np.abs(a - b).max() < 3e-2 * np.abs(a).max()  # 0: the int8 kernel did not run
    exact, fast = Generator(model), Generator(_model(out, neon_i8))
    la, lb = exact.prefill(IDS[:4])[0], fast.prefill(IDS[:4])[0]
    worst, flips = 0.0, 0
    for t in IDS[4:]:
        la, lb = exact.step(t), fast.step(t)
        worst = max(worst, float(np.abs(la - lb).max() / np.abs(la).max()))
        flips += int(np.argmax(la) != np.argmax(lb))
    # Every CQ4 block linear runs int8 too: on these steps 1.6-3.2e-2 of the largest logit, and
    # 1.3-3.0e-2 with an int8 head (whose kernel is exact), so the head adds little.
    assert worst < 5e-2, worst
    assert flips <= 1


def test_head_bench_builds_and_times_every_head_format(neon_backend_class):
    """`bench --head` on a small table: every --head format, the cq6 one on equally spaced levels."""
    from cactus_cpu_neon import bench

    rows = bench.head_decode(threads=1, repeats=1, shapes={"tiny": (4096, 512)})
    cases = {r["case"] for r in rows}
    assert {"tiny head cq6 int8", "tiny head cq6 table int8", "tiny head cq4 exact", "tiny head int8 affine"} <= cases
    assert all(r["ms"] > 0 and r["MB"] > 0 for r in rows)
    cb = bench._codebook(np.random.default_rng(0), 6, 1, uniform=True).astype(np.float32)[:, 0]
    np.testing.assert_array_equal(cb, (2 * np.arange(64) - 63) * (13 / 256))
