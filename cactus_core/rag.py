"""Retrieval-augmented generation over a folder of ``.txt`` and ``.md`` files.

``RagIndex.open(DIR, embedder)`` chunks every file (fixed-size character
windows with overlap, cut at paragraph, line, sentence or word boundaries),
embeds the chunks and keeps the index beside the corpus in
``DIR/.cactus_index/``: ``manifest.json`` (per file: mtime, size, sha256, chunk
ranges and texts, first matrix row) and ``vectors-<generation>.npy`` (float32,
one L2-normalised row per chunk).  Reopening re-embeds only files whose content
changed, drops removed files, and rebuilds an index it cannot trust.

Search is exact (brute-force cosine with one matrix-vector product): at 100,000
chunks of dimension 384 a query takes a few milliseconds (docs/rag.md has the
measurement), so no approximate index is needed at this scale.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
import uuid
from typing import Any, Optional, Sequence

import numpy as np

from .errors import BadRequestError, CactusError

log = logging.getLogger("cactus.rag")

INDEX_DIR = ".cactus_index"
MANIFEST = "manifest.json"
FORMAT_VERSION = 1
EXTENSIONS = (".txt", ".md")
EMBED_BATCH = 64
CONTEXT_HEADER = ("Use the following context to answer when it is relevant. "
                  "Each passage is marked with its source.")


def chunk_ranges(text: str, size: int = 800, overlap: int = 160) -> list[tuple[int, int]]:
    """``[start, end)`` character ranges of overlapping chunks of at most ``size`` characters.

    A chunk ends at the last paragraph break, else line break, else sentence end,
    else space in its second half, so passages stay readable; the next one starts
    ``overlap`` characters earlier, moved forward to a word start.
    """
    if size < 1 or not 0 <= overlap < size:
        raise BadRequestError(f"chunk size must be >= 1 and 0 <= overlap < size, got {size}, {overlap}")
    n, start, out = len(text), 0, []
    while start < n:
        end = min(start + size, n)
        if end < n:
            half = start + size // 2
            for sep in ("\n\n", "\n", ". ", " "):
                cut = text.rfind(sep, half, end)
                if cut >= 0:
                    end = cut + len(sep)
                    break
        if text[start:end].strip():
            out.append((start, end))
        if end >= n:
            break
        nxt = max(end - overlap, start + 1)
        while nxt < end and not text[nxt - 1].isspace():  # don't start mid-word
            nxt += 1
        start = nxt
    return out


def resolve_embedder(embedder: Any):
    """A model path/name -> a loaded Engine; anything with ``.embed(list[str])`` is used as is."""
    if isinstance(embedder, str):
        from . import load

        return load(embedder)
    if not callable(getattr(embedder, "embed", None)):
        raise BadRequestError("embedder must be a model path or an object with .embed(list[str])")
    return embedder


def _embedder_id(embedder: Any) -> str:
    """Identifies the embedding model, so an index built with another one is rebuilt."""
    name = getattr(embedder, "name", None) or type(embedder).__name__
    config = getattr(embedder, "config", None)
    if isinstance(config, dict):
        digest = hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:12]
        return f"{name}:{digest}"
    return str(name)


class RagIndex:
    """A persistent, incrementally updated vector index of a corpus directory."""

    def __init__(self, corpus_dir: str, embedder: Any, chunk_size: int = 800, overlap: int = 160, k: int = 4,
                 refresh_interval: Optional[float] = 2.0):
        self.corpus_dir = os.path.abspath(corpus_dir)
        self.index_dir = os.path.join(self.corpus_dir, INDEX_DIR)
        self.embedder = resolve_embedder(embedder)
        self.chunk_size, self.overlap, self.k = chunk_size, overlap, k
        self.files: dict[str, dict] = {}  # relative path -> manifest entry
        self.rows: list[tuple[str, int]] = []  # matrix row -> (relative path, chunk number)
        self.matrix = np.zeros((0, 0), dtype=np.float32)
        self.last_refresh: dict[str, int] = {}
        # augment() re-scans the corpus at most this often (seconds; None: never)
        self.refresh_interval = refresh_interval
        self._checked = time.monotonic()
        self._skipped: dict[str, tuple[int, int]] = {}  # unreadable files, as (mtime_ns, size)

    @classmethod
    def open(cls, corpus_dir: str, embedder: Any = None, **options: Any) -> "RagIndex":
        """Open (building or updating) the index of ``corpus_dir``."""
        if not isinstance(corpus_dir, (str, os.PathLike)) or not os.path.isdir(corpus_dir):
            raise BadRequestError(f"corpus directory {corpus_dir} does not exist or is not a directory")
        if embedder is None:
            raise BadRequestError("RAG needs an embedder: a model path or an object with .embed(list[str])")
        index = cls(os.fspath(corpus_dir), embedder, **options)
        index.refresh()
        return index

    # --- building --------------------------------------------------------------
    def refresh(self) -> dict[str, int]:
        """Bring the index up to date with the files on disk; returns what changed."""
        old_files, old_matrix = self._load()
        stats = dict(added=0, updated=0, removed=0, unchanged=0, skipped=0, chunks=0)
        dirty = not os.path.exists(os.path.join(self.index_dir, MANIFEST))
        files: dict[str, dict] = {}
        pending: list[tuple[str, list[str]]] = []  # files whose chunks need embedding
        self._skipped = {}
        for rel, path in self._corpus_files():
            try:
                st = os.stat(path)
                old = old_files.get(rel)
                if old and old["mtime_ns"] == st.st_mtime_ns and old["size"] == st.st_size:
                    files[rel] = old
                    stats["unchanged"] += 1
                    continue
                with open(path, "rb") as f:
                    data = f.read()
                text = data.decode("utf-8-sig")
            except (OSError, UnicodeDecodeError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
                log.warning("skipping unreadable corpus file %s: %s", path, reason)
                stats["skipped"] += 1
                try:  # remembered, so the next check does not take it for a new file
                    st = os.stat(path)
                    self._skipped[rel] = (st.st_mtime_ns, st.st_size)
                except OSError:
                    pass
                continue
            digest = hashlib.sha256(data).hexdigest()
            entry = {"mtime_ns": st.st_mtime_ns, "size": st.st_size, "sha256": digest}
            if old and old["sha256"] == digest:  # touched, not changed
                files[rel] = {**old, **entry}
                stats["unchanged"] += 1
                dirty = True
                continue
            ranges = chunk_ranges(text, self.chunk_size, self.overlap)
            entry.update(chunks=[list(r) for r in ranges], texts=[text[a:b] for a, b in ranges])
            files[rel] = entry
            pending.append((rel, entry["texts"]))
            stats["updated" if old else "added"] += 1
        stats["removed"] = len(set(old_files) - set(files))
        new_vectors = self._embed_all([t for _, texts in pending for t in texts])
        self._assemble(files, old_matrix, {rel for rel, _ in pending}, new_vectors)
        stats["chunks"] = len(self.rows)
        if dirty or pending or stats["removed"]:
            self._save()
        self.last_refresh = stats
        self._checked = time.monotonic()
        return stats

    def changed_on_disk(self) -> bool:
        """Whether a corpus file was added, removed, resized or touched since the last
        refresh: one stat per file, no reads."""
        listed = 0
        for rel, path in self._corpus_files():
            try:
                st = os.stat(path)
            except OSError:
                continue  # gone between the walk and the stat: the count below notices
            stamp = (st.st_mtime_ns, st.st_size)
            entry = self.files.get(rel)
            if entry is not None:
                if (entry["mtime_ns"], entry["size"]) != stamp:
                    return True
                listed += 1
            elif self._skipped.get(rel) != stamp:  # new, or an unreadable file that changed
                return True
        return listed != len(self.files)

    def _corpus_files(self) -> list[tuple[str, str]]:
        found = []
        for root, dirs, names in os.walk(self.corpus_dir):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))  # skips .cactus_index, .git
            for name in names:
                if name.lower().endswith(EXTENSIONS) and not name.startswith("."):
                    path = os.path.join(root, name)
                    found.append((os.path.relpath(path, self.corpus_dir).replace(os.sep, "/"), path))
        return sorted(found)

    def _embed_all(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.matrix.shape[1] if self.matrix.size else 0), dtype=np.float32)
        from tqdm import tqdm

        parts = []
        with tqdm(total=len(texts), desc="indexing corpus", unit="chunk",
                  disable=len(texts) < EMBED_BATCH or not sys.stderr.isatty()) as bar:
            for i in range(0, len(texts), EMBED_BATCH):
                parts.append(self._embed(texts[i:i + EMBED_BATCH]))
                bar.update(len(parts[-1]))
        return np.concatenate(parts)

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        v = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        if v.ndim != 2 or v.shape[0] != len(texts):
            raise CactusError(f"embedder returned shape {v.shape} for {len(texts)} texts; expected (n, dim)")
        return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)

    def _assemble(self, files: dict, old_matrix: np.ndarray, fresh: set, new_vectors: np.ndarray) -> None:
        """Matrix rows in file order: reused rows from the old matrix, new rows for fresh files."""
        blocks, rows, taken, row = [], [], 0, 0
        for rel in sorted(files):
            entry = files[rel]
            n = len(entry["chunks"])
            if rel in fresh:
                blocks.append(new_vectors[taken:taken + n])
                taken += n
            else:
                blocks.append(old_matrix[entry["row"]:entry["row"] + n])
            entry["row"] = row
            rows.extend((rel, i) for i in range(n))
            row += n
        dims = {b.shape[1] for b in blocks if b.size}
        if len(dims) > 1:
            raise CactusError(f"embedding sizes differ across the index ({sorted(dims)}); delete {self.index_dir}")
        dim = dims.pop() if dims else (old_matrix.shape[1] if old_matrix.ndim == 2 else 0)
        blocks = [b for b in blocks if b.size]
        self.matrix = np.ascontiguousarray(np.concatenate(blocks), dtype=np.float32) if blocks \
            else np.zeros((0, dim), dtype=np.float32)
        self.files, self.rows = dict(sorted(files.items())), rows

    # --- persistence ---------------------------------------------------------------
    def _load(self) -> tuple[dict, np.ndarray]:
        """The stored files and matrix, or empty ones if there is no index or it cannot be trusted."""
        path = os.path.join(self.index_dir, MANIFEST)
        if not os.path.exists(path):
            return {}, np.zeros((0, 0), dtype=np.float32)
        try:
            with open(path, encoding="utf-8") as f:
                manifest = json.load(f)
            if manifest.get("version") != FORMAT_VERSION:
                raise ValueError(f"format version {manifest.get('version')!r}, expected {FORMAT_VERSION}")
            settings = (manifest["embedder"], manifest["chunk_size"], manifest["overlap"])
            if settings != (_embedder_id(self.embedder), self.chunk_size, self.overlap):
                log.info("rebuilding the index of %s: embedder or chunking changed", self.corpus_dir)
                return {}, np.zeros((0, 0), dtype=np.float32)
            files = manifest["files"]
            matrix = np.load(os.path.join(self.index_dir, manifest["vectors"]), allow_pickle=False)
            total = sum(len(e["chunks"]) for e in files.values())
            if matrix.ndim != 2 or matrix.shape != (total, manifest["dim"]) or matrix.dtype != np.float32:
                raise ValueError(f"vectors have shape {matrix.shape}, manifest says ({total}, {manifest['dim']})")
            for e in files.values():
                if not (isinstance(e["mtime_ns"], int) and isinstance(e["size"], int) and isinstance(e["row"], int)
                        and len(e["texts"]) == len(e["chunks"]) and isinstance(e["sha256"], str)):
                    raise ValueError("a file entry is malformed")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("the index in %s is corrupt (%s); rebuilding it", self.index_dir,
                        str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__)
            return {}, np.zeros((0, 0), dtype=np.float32)
        return files, matrix

    def _save(self) -> None:
        """Write vectors under a fresh name, then the manifest atomically, then drop old vectors."""
        try:
            os.makedirs(self.index_dir, exist_ok=True)
            vectors = f"vectors-{uuid.uuid4().hex[:12]}.npy"
            np.save(os.path.join(self.index_dir, vectors), self.matrix, allow_pickle=False)
            manifest = {"version": FORMAT_VERSION, "embedder": _embedder_id(self.embedder),
                        "chunk_size": self.chunk_size, "overlap": self.overlap,
                        "dim": int(self.matrix.shape[1]), "vectors": vectors, "files": self.files}
            tmp = os.path.join(self.index_dir, MANIFEST + ".tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(manifest, f, ensure_ascii=False)
            os.replace(tmp, os.path.join(self.index_dir, MANIFEST))
            for name in os.listdir(self.index_dir):
                if name.startswith("vectors-") and name != vectors:
                    os.remove(os.path.join(self.index_dir, name))
        except OSError as exc:  # a read-only corpus still gets an in-memory index
            log.warning("cannot write the index to %s (%s); it will be rebuilt next time", self.index_dir,
                        exc.strerror or exc)

    # --- searching -----------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.rows)

    def query(self, text: str, k: Optional[int] = None) -> list[dict]:
        """The ``k`` chunks most similar to ``text``: ``{source, chunk, score, text, start, end}``, best first."""
        if not isinstance(text, str) or not text.strip():
            raise BadRequestError("the RAG query must be a non-empty string")
        k = self.k if k is None else k
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise BadRequestError(f"k must be a positive integer, got {k!r}")
        if not self.rows:
            return []
        scores = self.search(self._embed([text])[0], k)
        out = []
        for row, score in scores:
            rel, i = self.rows[row]
            entry = self.files[rel]
            start, end = entry["chunks"][i]
            out.append({"source": rel, "chunk": i, "score": round(float(score), 6),
                        "text": entry["texts"][i], "start": start, "end": end})
        return out

    def search(self, vector: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Exact top-``k`` rows by cosine similarity to a unit ``vector``: ``[(row, score)]``, best first."""
        scores = self.matrix @ np.asarray(vector, dtype=np.float32)
        k = min(k, scores.shape[0])
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [(int(r), float(scores[r])) for r in top]

    def augment(self, messages: list[dict]) -> tuple[list[dict], list[dict]]:
        """Add the top-k chunks for the last user message to the system prompt.

        Returns the new message list (the input is not modified) and the sources
        ``[{source, chunk, score}]``; the format is in docs/rag.md.
        """
        if self.refresh_interval is not None and time.monotonic() - self._checked >= self.refresh_interval:
            self._checked = time.monotonic()
            if self.changed_on_disk():  # files added, edited or removed while the engine ran
                self.refresh()
        question = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), None)
        if not isinstance(question, str) or not question.strip() or not self.rows:
            return list(messages), []
        hits = self.query(question, self.k)
        block = format_context(hits)
        messages = [dict(m) for m in messages]
        if messages and messages[0].get("role") == "system" and isinstance(messages[0].get("content"), str):
            messages[0]["content"] = f"{messages[0]['content']}\n\n{block}"
        else:
            messages.insert(0, {"role": "system", "content": block})
        return messages, [{"source": h["source"], "chunk": h["chunk"], "score": h["score"]} for h in hits]


def format_context(hits: Sequence[dict]) -> str:
    """The text added to the system prompt: a header, then one numbered passage per chunk."""
    parts = [CONTEXT_HEADER]
    for n, h in enumerate(hits, 1):
        parts.append(f"[{n}] source: {h['source']} (chunk {h['chunk']})\n{h['text'].strip()}")
    return "\n\n".join(parts)
