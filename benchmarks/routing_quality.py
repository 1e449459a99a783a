"""Routing quality on the embedded default model: probe against entropy.

    python benchmarks/routing_quality.py [--model models/spine] [--val 400] [--test 600]
                                         [--write-probe] [--png docs/img/routing_quality.png]

1. Generates the validation and test splits with the training scripts (different
   templates and entities from training and from each other).
2. Trains the confidence probe with ``cactus probe train`` on the validation
   split; ``--write-probe`` ships it in the model's bundle.
3. On the test split, runs the model once per example, grades its answer
   (exact tool calls; no call where none is right), and scores it with the probe
   and with next-token entropy.
4. Reports both AUROCs, and accuracy against handoff rate when the least
   confident requests go to a cloud model assumed to answer correctly, plotted to
   a PNG.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def to_examples(path: Path, limit: int, seed: int) -> list[dict]:
    """Each conversation's last request, with the reference the model should produce."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    random.Random(seed).shuffle(rows)
    out = []
    for conv in rows[:limit]:
        msgs = conv["messages"]
        last_user = max(i for i, m in enumerate(msgs) if m["role"] == "user")
        answer = msgs[last_user + 1]
        calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                 for c in answer.get("tool_calls") or []]
        out.append({"messages": msgs[: last_user + 1], "tools": conv.get("tools"),
                    "reference": {"function_calls": calls}, "category": conv.get("category")})
    return out


def handoff_curve(conf: np.ndarray, correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Accuracy when the lowest-confidence fraction f is answered (correctly) by the cloud."""
    order = np.argsort(conf, kind="mergesort")
    n = len(conf)
    fractions = np.arange(n + 1) / n
    kept_correct = np.concatenate([[correct.sum()], correct.sum() - np.cumsum(correct[order])])
    handed = np.arange(n + 1)
    return fractions, (kept_correct + handed) / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "models" / "spine"))
    ap.add_argument("--val", type=int, default=400)
    ap.add_argument("--test", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--write-probe", action="store_true", help="ship the probe in the model's bundle")
    ap.add_argument("--use-shipped-probe", action="store_true", help="measure the bundle's probe; train nothing")
    ap.add_argument("--png", default=str(ROOT / "docs" / "img" / "routing_quality.png"))
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--val-synth", type=float, default=0.6,
                    help="share of invented names and word salad in validation (0.6: the published split; "
                         "0: drawn like test, which has none)")
    args = ap.parse_args()

    import cactus_core as cactus
    from cactus_core.probe import Probe, auroc
    from cactus_core.probe_train import collect, train
    from training.datagen import generate

    work = Path(tempfile.mkdtemp(prefix="cactus-routing-"))
    generate(work / "data", seed=args.seed, n_train=0, n_val=max(args.val, 1), val_synth=args.val_synth)
    val = to_examples(work / "data" / "val.jsonl", args.val, args.seed)
    test = to_examples(work / "data" / "test.jsonl", args.test, args.seed)
    val_path = work / "val.jsonl"
    val_path.write_text("\n".join(json.dumps(e) for e in val))

    engine = cactus.load(args.model, backend="auto")
    if args.use_shipped_probe:
        out = args.model
        report = {"threshold": engine.manifest["probe"]["threshold"]}
    else:
        out = args.model if args.write_probe else str(work / "bundle")
        report = train(engine, str(val_path), out, max_tokens=args.max_tokens, seed=args.seed, force=True)
        print(f"probe trained on {report['examples']} validation examples: layer {report['layer']}, "
              f"{report['probe_params']} parameters, validation AUROC {report['probe_auroc']:.3f} "
              f"(entropy {report['entropy_auroc']:.3f})", flush=True)

    probe = Probe.load(os.path.join(out, "probe.safetensors"))
    x, y, ent = collect(engine, test, args.max_tokens)
    conf = probe.confidence(x[:, probe.layer])
    results = {
        "model": os.path.basename(os.path.normpath(args.model)), "val_examples": len(val),
        "val_accuracy": report.get("accuracy"),  # the model's own exact rate on validation (for choosing models)
        "val_per_category_accuracy": report.get("accuracy_by_category"),
        "test_examples": len(test), "test_accuracy": float(y.mean()),
        "probe_auroc": auroc(conf, y), "entropy_auroc": auroc(ent, y), "layer": probe.layer,
        "threshold": report["threshold"], "handoff_rate_at_threshold": float((conf < report["threshold"]).mean()),
        "per_category_accuracy": {},
    }
    cats = np.array([e["category"] for e in test])
    for c in sorted(set(cats)):
        results["per_category_accuracy"][c] = float(y[cats == c].mean())
    curves = {"probe": handoff_curve(conf, y), "entropy": handoff_curve(ent, y)}
    for name, (f, acc) in curves.items():
        results[f"{name}_accuracy_at_handoff"] = {f"{p:.0%}": float(np.interp(p, f, acc)) for p in (0.1, 0.2, 0.3, 0.5)}
    print(json.dumps(results, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no PNG (pip install matplotlib)")
        return 0
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, (f, acc) in curves.items():
        ax.plot(f * 100, acc * 100, label=f"{name} (AUROC {results[name + '_auroc']:.3f})")
    ax.plot([0, 100], [y.mean() * 100, 100], "--", color="grey", label="random handoff")
    ax.set_xlabel("requests handed to the cloud (%)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"{results['model']}: accuracy vs handoff rate ({len(test)} test requests)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(args.png, dpi=120)
    print(f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
