"""Single-call requests in held-out structures, for ranking checkpoints.

    python -m training.heldout --out DIR [--n 1200] [--seed 0]
    python -m training.evaluate --model models/spine --data DIR --split val --category single

Validation and test have 8 request structures per tool each, so one checkpoint can beat
another on them by luck of a few structures. ``DIR/val.jsonl`` holds ``--n`` single-call
conversations whose final request comes from heldout_patterns.py (20 structures per tool
that no split uses, split "heldout" of intents.templates_for), and everything else from
validation: its entities, openers, endings, connectors and chat phrasings, drawn as test
is (no invented values, no drills, no boundary-stress values, as training.crossed draws).
So its requests differ from validation's only in their core structure. Use it to choose
between checkpoints, never as training data: nothing trains on these structures, and
what is learnt from its misses must not be written back into them.
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from .datagen import conversation, prepared_lists


def heldout(out: Path, n: int = 1200, seed: int = 0) -> int:
    """Write ``out/val.jsonl`` (n single-call conversations); returns the row count."""
    lists = prepared_lists(synth=0.0, val_synth=0.0, stress=0.0)
    rng = random.Random(f"heldout:{seed}")
    rows = [conversation(rng, lists["val"], "heldout", last="single") for _ in range(n)]
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "val.jsonl", "w") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return len(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--n", type=int, default=1200)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print(json.dumps({"val": heldout(a.out, a.n, a.seed)}))


if __name__ == "__main__":
    main()
