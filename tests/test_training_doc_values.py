"""training.doc_values: docstring phrases as free-text argument values, training split only."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # training/ is a folder of scripts, not an installed package

from training import datagen  # noqa: E402
from training.doc_values import build_pools, clauses, held_out_values  # noqa: E402
from training.lexicon import split_lists  # noqa: E402

TEXT = ["Return the number of items in the queue. The default value is used, see the spam module.",
        "Raises KeyError if missing; open_file(path) is called with paper towels and more paper."]


def test_clauses_keep_plain_lower_case_words_only():
    runs = clauses(TEXT)
    assert ["return", "the", "number", "of", "items", "in", "the", "queue"] in runs
    assert all(re.fullmatch(r"[a-z]+", w) for run in runs for w in run)
    assert not any("open_file" in " ".join(r) or "keyerror" in " ".join(r) for r in runs)


def test_pools_leave_out_every_held_out_value():
    pools = build_pools(TEXT * 50, held_out=["paper towels", "Queue"], per_pool=1000)
    for pool in pools.values():
        assert pool and not any(re.search(r"\b(paper towels|queue)\b", p) for p in pool)
    real = build_pools(TEXT * 50, held_out=held_out_values(split_lists()))
    assert set(real) == {"long", "title", "short"}


def _last_call_args(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [[m for m in r["messages"] if m.get("tool_calls")][-1]["tool_calls"][0]["function"]["arguments"]
            for r in rows if any(m.get("tool_calls") for m in r["messages"])]


def test_doc_values_change_training_only_and_zero_changes_nothing(tmp_path):
    datagen.generate(tmp_path / "a", seed=5, n_train=300, n_val=60)
    datagen.generate(tmp_path / "b", seed=5, n_train=300, n_val=60, doc_values=0.0)
    datagen.generate(tmp_path / "c", seed=5, n_train=300, n_val=60, doc_values=0.8)
    for split in ("train", "val", "test"):
        assert (tmp_path / "a" / f"{split}.jsonl").read_bytes() == (tmp_path / "b" / f"{split}.jsonl").read_bytes()
    for split in ("val", "test"):
        assert (tmp_path / "a" / f"{split}.jsonl").read_bytes() == (tmp_path / "c" / f"{split}.jsonl").read_bytes()
    from training.plaintext import stdlib_docs

    long_pool = set(build_pools(stdlib_docs()["train"], held_out_values(split_lists()))["long"])
    texts = [a.get("message") or a.get("content") or a.get("query") for a in _last_call_args(tmp_path / "c" / "train.jsonl")]
    assert sum(t in long_pool for t in texts if t) >= 10  # doc phrases reach the calls
