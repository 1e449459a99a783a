"""Quantization quality on the embedded default model (real trained weights).

    python benchmarks/quant_quality_spine.py [--model models/spine] [--conversations 200]

Every scheme quantizes the same transformer-block linear weights (embeddings and
the tied head stay float16), and each bundle is compared with the float model on
the final assistant turns of test-split conversations (templates and entities the
model never saw; prompts are not scored, since it was never trained on them).  Columns: true bits per weight of the
quantized tensors, mean KL(float || quant) per token, and perplexity change.
MLX's affine 4-bit group-64 (``mlx.core.quantize``) is the outside baseline.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCHEMES = [("CQ4", 4, "cq"), ("CQ3", 3, "cq"), ("CQ2", 2, "cq"), ("CQ3.26", 3.26, "cq"), ("CQ2.54", 2.54, "cq"),
           ("GPTQ-4 g128", 4, "gptq"), ("RTN int4 g128", 4, "rtn")]


def heldout_segments(engine, n: int = 200, seed: int = 0) -> list[tuple[list[int], int]]:
    """Test-split conversations as (ids, start): only the final assistant turn is scored,
    since the model was trained on assistant turns, never on prompts."""
    from training.datagen import generate

    work = Path(tempfile.mkdtemp())
    generate(work, seed=seed, n_train=0, n_val=1)
    rows = [json.loads(line) for line in (work / "test.jsonl").read_text().splitlines()[:n]]
    shutil.rmtree(work)
    segments = []
    for r in rows:
        msgs = r["messages"]
        last = max(i for i, m in enumerate(msgs) if m["role"] == "assistant")
        prefix = engine.tokenizer.encode_chat(msgs[:last], tools=r.get("tools"), add_generation_prompt=True)
        full = engine.tokenizer.encode_chat(msgs[: last + 1], tools=r.get("tools"), add_generation_prompt=False)
        if full[: len(prefix)] == prefix and len(full) > len(prefix):
            segments.append((full, len(prefix)))
    return segments


def mlx_affine_copy(src: str, out: str, group: int = 64, bits: int = 4) -> float:
    """A float16 copy whose block linears went through mlx's quantize/dequantize; returns bpw."""
    import mlx.core as mx
    from safetensors.numpy import load_file, save_file

    shutil.copytree(src, out)
    tensors = load_file(str(Path(src) / "model.safetensors"))
    n, cost = 0, 0.0
    for name, w in tensors.items():
        if ".layers." in name and name.endswith("proj.weight") and w.ndim == 2 and w.shape[1] % group == 0:
            q, scales, biases = mx.quantize(mx.array(w.astype(np.float32)), group_size=group, bits=bits)
            tensors[name] = np.array(mx.dequantize(q, scales, biases, group_size=group, bits=bits)).astype(w.dtype)
            n += w.size
            cost += w.size * bits + (w.size // group) * 32  # fp16 scale and bias per group
    save_file(tensors, str(Path(out) / "model.safetensors"))
    return cost / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "models" / "spine"))
    ap.add_argument("--conversations", type=int, default=200)
    ap.add_argument("--json", help="write the table here")
    args = ap.parse_args()

    import cactus_core as cactus
    from cactus_core.quality import compare, self_calibration
    from cactus_quant.convert import convert

    work = Path(tempfile.mkdtemp(prefix="cactus-qq-"))
    ref = cactus.load(args.model)
    segments = heldout_segments(ref, args.conversations)
    calib = self_calibration(args.model, samples=8) if any(m == "gptq" for _, _, m in SCHEMES) else {}
    rows = []
    for label, bits, method in SCHEMES:
        out = work / label.replace(" ", "_")
        rep = convert(args.model, out, bits=bits, method=method, progress=False,
                      calibration=calib.get if method == "gptq" else None)
        q = compare(ref, cactus.load(str(out)), segments=segments)
        rows.append({"scheme": label, "bpw": rep["bits_per_weight"], **q})
        print(f"{label:<15} {rep['bits_per_weight']:.3f} bpw  KL {q['kl_mean']:.4f}  "
              f"ppl {q['perplexity_quant']:.3f} ({q['perplexity_delta_pct']:+.2f}%)", flush=True)
    try:
        bpw = mlx_affine_copy(args.model, str(work / "mlx"))
        q = compare(ref, cactus.load(str(work / "mlx")), segments=segments)
        rows.append({"scheme": "MLX affine 4-bit g64", "bpw": bpw, **q})
    except ImportError:
        print("mlx is not installed: no MLX baseline row (pip install 'mlx[cpu]')")
    print(f"\nfloat perplexity {rows[0]['perplexity_float']:.3f} on {rows[0]['tokens']} held-out tokens")
    print(f"{'scheme':<22}{'bits/w':>8}{'KL mean':>10}{'KL p99':>9}{'ppl':>9}{'Δppl':>9}")
    for r in rows:
        print(f"{r['scheme']:<22}{r['bpw']:>8.3f}{r['kl_mean']:>10.4f}{r['kl_p99']:>9.3f}"
              f"{r['perplexity_quant']:>9.3f}{r['perplexity_delta_pct']:>8.2f}%")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
