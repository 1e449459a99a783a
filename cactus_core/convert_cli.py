"""``cactus convert``: a Hugging Face checkpoint to a quantized bundle, with a quality report.

The quantizers live in the ``cactus-quant`` plugin; this command adds what needs
the engine: checking the architecture first, self-generated calibration for
GPTQ (and, with ``--calibrate``, CQ's error feedback), loading the result to
prove it runs, and ``--report``: per-tensor error, bits per weight, file size,
and KL divergence and perplexity against the float model on held-out text.
"""

from __future__ import annotations

import json
import os

import numpy as np

from .errors import CactusError, QuantizationError

BITS = ("4", "3", "2", "3.26", "2.54", "8")


def add_convert_command(sub) -> None:
    p = sub.add_parser("convert", help="quantize a Hugging Face checkpoint into a Cactus bundle")
    p.add_argument("src", metavar="SRC", help="Hugging Face checkpoint directory (safetensors)")
    p.add_argument("out", metavar="OUT", help="bundle directory to create")
    p.add_argument("--bits", default="4", choices=BITS)
    p.add_argument("--method", default="cq", choices=["cq", "gptq", "rtn"])
    p.add_argument("--calibrate", action="store_true",
                   help="CQ error feedback from text the model generates itself (always on for gptq)")
    p.add_argument("--calibration-samples", type=int, default=8)
    p.add_argument("--report", action="store_true", help="per-tensor error, KL divergence and perplexity")
    p.add_argument("--eval-text", help="held-out text file for --report (default: stdlib docstrings)")
    p.add_argument("--force", action="store_true", help="replace OUT if it exists")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_cmd_convert)


def tensor_errors(src: str, out: str) -> dict[str, float]:
    """Relative squared error of every quantized tensor against the source weights."""
    from .formats import to_float32
    from .weights import load_weights

    source, bundle = load_weights(src), load_weights(out)
    errors = {}
    for name in bundle.quantized:
        w = to_float32(source[name]).astype(np.float64)
        qt = bundle[name]
        deq = qt.dequantize_unrotated() if hasattr(qt, "dequantize_unrotated") else qt.dequantize()
        errors[name] = float(np.sum((w - deq) ** 2) / max(np.sum(w**2), 1e-30))
    return errors


def _cmd_convert(args) -> int:
    try:
        from cactus_quant.convert import convert
    except ImportError:
        raise CactusError("cactus convert needs the quantizer plugin: pip install ./quant") from None
    from .engine import Engine
    from .models import model_module
    from .quality import compare, self_calibration
    from .weights import read_json

    model_module(read_json(os.path.join(args.src, "config.json"), "config.json"))  # supported at all?
    if os.path.exists(args.out) and not args.force:
        raise QuantizationError(f"{args.out} already exists; pass --force to overwrite it")
    source = Engine.load(args.src, context_length=64)  # missing tensors or shapes that do not fit fail here
    del source
    calibration = None
    if args.method == "gptq" or args.calibrate:
        acts = self_calibration(args.src, samples=args.calibration_samples)
        calibration = acts.get
    report = convert(args.src, args.out, bits=float(args.bits), method=args.method, force=args.force,
                     progress=not args.json, calibration=calibration)
    try:
        quant = Engine.load(args.out)  # the bundle must load and run before we call it done
    except CactusError as exc:
        raise QuantizationError(f"the converted bundle does not load: {exc}") from exc
    if args.report:
        text = None
        if args.eval_text:
            with open(args.eval_text, encoding="utf-8") as f:
                text = f.read()
        report["tensor_rel_error"] = tensor_errors(args.src, args.out)
        report["quality"] = compare(Engine.load(args.src), quant, text)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{report['scheme']}: {report['tensors_quantized']} tensors at {report['bits_per_weight']:.3f} bits/weight, "
          f"{report['tensors_kept']} kept in their dtype; {report['source_bytes'] / 2**20:.1f} MiB -> "
          f"{report['bundle_bytes'] / 2**20:.1f} MiB -> {report['output']}")
    if args.report:
        errs = report["tensor_rel_error"]
        worst = sorted(errs.items(), key=lambda kv: -kv[1])[:5]
        print(f"per-tensor relative error: mean {np.mean(list(errs.values())):.4g}; worst:")
        for name, e in worst:
            print(f"  {e:.4g}  {name}")
        q = report["quality"]
        print(f"KL(float || quant) over {q['tokens']} tokens: mean {q['kl_mean']:.5f}, p99 {q['kl_p99']:.5f}")
        print(f"perplexity: float {q['perplexity_float']:.3f}, quantized {q['perplexity_quant']:.3f} "
              f"({q['perplexity_delta_pct']:+.2f}%)")
    return 0
