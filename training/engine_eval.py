"""Score a checkpoint through the engine on the seed-0 validation (or test) split, keeping every answer.

    python -m training.engine_eval --model models/spine --split val --n 800 --out FILE.json [--start 0 --stop N]
                                   [--no-constrain]

The examples are exactly those of ``benchmarks/routing_quality.py`` (``--val 800`` / ``--test 1200``,
seed 0: the same draw, the same shuffle, the last request of each conversation), run with
``engine.complete`` greedily at ``--max-tokens 160``, so the exact counts agree with that script's
``val_per_category_accuracy``. Unlike it, this writes each answer with its reference and a miss kind
(``training.miss_kinds.classify``), for error analysis. ``--start/--stop`` score a slice (to spread the
work over several calls); ``--merge`` joins slice files.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def examples(split: str, n: int, seed: int = 0) -> list[dict]:
    sys.path.insert(0, str(ROOT))
    from benchmarks.routing_quality import to_examples
    from training.datagen import generate

    work = Path(tempfile.mkdtemp(prefix="cactus-engine-eval-"))
    n_val = n if split == "val" else 1
    generate(work / "data", seed=seed, n_train=0, n_val=max(n_val, 1), val_synth=0.6)
    return to_examples(work / "data" / f"{split}.jsonl", n, seed)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "models" / "spine"))
    ap.add_argument("--split", default="val", choices=["val", "test"])
    ap.add_argument("--n", type=int, default=800)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--stop", type=int, default=None)
    ap.add_argument("--max-tokens", type=int, default=160)
    ap.add_argument("--no-constrain", action="store_true",
                    help="decode the calls the model opens without the schema constraint (constrain_calls=False)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--merge", nargs="*", help="join these slice files into --out instead of scoring")
    a = ap.parse_args()
    from training.miss_kinds import classify, summarize

    if a.merge:
        rows = [r for f in a.merge for r in json.loads(Path(f).read_text())["examples"]]
    else:
        import cactus_core as cactus
        from cactus_core.probe import grade

        exs = examples(a.split, a.n)[a.start:a.stop]
        engine = cactus.load(a.model, backend="auto", constrain_calls=not a.no_constrain)
        rows, t0 = [], time.time()
        for i, ex in enumerate(exs):
            r = engine.complete(ex["messages"], tools=ex.get("tools"), max_tokens=a.max_tokens, cloud=False)
            got = [{"name": c["name"], "arguments": c.get("arguments", {})} for c in r.get("function_calls") or []]
            want = ex["reference"]["function_calls"]
            row = {"i": a.start + i, "category": ex["category"], "user": ex["messages"][-1]["content"],
                   "want": want, "got": got, "text": r.get("response", ""), "ok": grade(r, ex)}
            row["kind"] = classify(row)
            rows.append(row)
            if (i + 1) % 50 == 0:
                print(f"{i + 1}/{len(exs)} {time.time() - t0:.0f}s", flush=True)
    res = {"model": a.model, "split": a.split, "n": len(rows), "constrain_calls": not a.no_constrain,
           "summary": summarize(rows), "examples": rows}
    Path(a.out).write_text(json.dumps(res, indent=1))
    print(json.dumps(res["summary"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
