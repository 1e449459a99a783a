"""Single-call requests with one split's sentence templates and another split's entities.

    python -m training.crossed --out DIR [--n 400] [--seed 0]
    python -m training.evaluate --model models/spine --data DIR/train-test --split val --category single

Held-out requests differ from training ones in two ways at once: their phrasings
(templates, prefixes, suffixes, connectors, dealt per split) and their values (names,
places, titles, dealt per split too). Crossing them tells which of the two the model
fails to generalise over: ``DIR/T-E/val.jsonl`` holds ``--n`` single-call conversations
with split T's phrasings and split E's entities, for T and E in train, val and test, all
drawn as test is (no invented values, no drills, no boundary-stress values), so only the
crossing differs between them. Look at the misses of the val crossings, never the test
ones: what is learnt from them goes into training data.
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from .datagen import conversation, prepared_lists

SPLITS = ("train", "val", "test")


def crossed(out: Path, n: int = 400, seed: int = 0) -> dict:
    """Write ``out/T-E/val.jsonl`` for every pair of splits; returns the row counts."""
    lists = prepared_lists(synth=0.0, val_synth=0.0, stress=0.0)
    counts = {}
    for templates in SPLITS:
        for entities in SPLITS:
            rng = random.Random(f"crossed:{seed}:{templates}:{entities}")
            rows = [conversation(rng, lists[entities], templates, last="single") for _ in range(n)]
            path = out / f"{templates}-{entities}"
            path.mkdir(parents=True, exist_ok=True)
            with open(path / "val.jsonl", "w") as f:
                f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
            counts[f"{templates}-{entities}"] = len(rows)
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print(json.dumps(crossed(a.out, a.n, a.seed)))


if __name__ == "__main__":
    main()
