"""``cactus convert``: a Hugging Face checkpoint to a quantized bundle, with a quality report.

The quantizers live in the ``cactus-quant`` plugin; this command adds what needs
the engine: checking the architecture first, self-generated calibration for
GPTQ and CQ's error feedback (every CQ width calibrates on text the model writes
itself unless ``--no-calibrate``), loading the result to prove it runs, and
``--report``: per-tensor error, bits per weight, file size, and KL divergence and
perplexity against the float model on held-out text.  PyTorch ``.bin`` checkpoints
are read through torch into a temporary safetensors copy first
(:mod:`cactus_quant.torch_bin`).
"""

from __future__ import annotations

import json
import os
from typing import Optional

import numpy as np

from .errors import CactusError, QuantizationError

BITS = ("4", "3", "2", "3.26", "2.54", "8")
HEADS = ("keep", "int8", "int4", "cq6", "cq5", "cq4")
#: How embeddings / lm_head are stored unless --head says otherwise.  cq6 (6.1 bits per
#: weight): on the default model's CQ4 body it keeps KL at 0.34x MLX 4-bit's (int8: 0.37x)
#: at 4.63 instead of 5.02 bits per weight, and the head read per decoded token is what
#: takes decode from 0.94-1.19x to 1.29-1.56x llama.cpp Q4_K_M (docs/quantization.md).
DEFAULT_HEAD = "cq6"


def add_convert_command(sub) -> None:
    p = sub.add_parser("convert", help="quantize a Hugging Face checkpoint into a Cactus bundle")
    p.add_argument("src", metavar="SRC", help="Hugging Face checkpoint directory (safetensors)")
    p.add_argument("out", metavar="OUT", help="bundle directory to create")
    p.add_argument("--bits", default="4", choices=BITS)
    p.add_argument("--method", default="cq", choices=["cq", "gptq", "rtn"])
    cal = p.add_mutually_exclusive_group()
    cal.add_argument("--calibrate", action="store_true",
                     help="CQ error feedback from text the model generates itself (the default for every CQ "
                          "width of a causal LM; always on for gptq)")
    cal.add_argument("--no-calibrate", action="store_true",
                     help="data-free CQ codes, several times faster to convert (the mixed plans still "
                          "measure their widths on self-written text)")
    p.add_argument("--calibration-text", metavar="FILE",
                   help="calibrate (and measure mixed-precision sensitivity) on this text instead")
    p.add_argument("--calibration-samples", type=int, default=None,
                   help="self-generated texts and chats to calibrate on "
                        "(default 32 for --bits 4/3/2: 16 texts and 16 six-round chats; else 16)")
    p.add_argument("--calibration-seed", type=int, default=0,
                   help="which draw of self-written texts CQ4/CQ3/CQ2 calibrate on (default 0)")
    p.add_argument("--head", default=DEFAULT_HEAD, choices=HEADS,
                   help=f"embeddings and lm_head: keep their dtype, or int8/int4/cq6/cq5/cq4 (default {DEFAULT_HEAD})")
    p.add_argument("--sensitivity", default="kl", choices=["kl", "proxy"],
                   help="mixed precision (--bits 3.26/2.54): measured KL per tensor (default) or weight error")
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


def run_convert(src: str, out: str, bits: str = "4", method: str = "cq", calibrate: bool = False,
                calibration_text: Optional[str] = None, samples: Optional[int] = None, head: str = DEFAULT_HEAD,
                sensitivity: str = "kl", force: bool = False, progress: bool = True,
                no_calibrate: bool = False, seed: int = 0, source_label: Optional[str] = None) -> dict:
    """``cactus convert`` without the argument parsing: calibration tokens and activations,
    measured mixed-precision sensitivity, then the conversion; returns its report.

    CQ4, CQ3 and CQ2 calibrate on texts the model writes itself (``samples``, default 32;
    data-free for encoders) unless ``no_calibrate`` (cactus_quant.calibrate: measured better
    than the 16 texts and stronger damping of the ``calibrate`` path the mixed plans and
    GPTQ take, whose ``samples`` default is 16)."""
    from cactus_quant.torch_bin import bin_files, safetensors_copy

    if bin_files(src):  # PyTorch .bin weights: convert from a safetensors copy
        with safetensors_copy(src) as copy:
            return run_convert(str(copy), out, bits=bits, method=method, calibrate=calibrate,
                               calibration_text=calibration_text, samples=samples, head=head,
                               sensitivity=sensitivity, force=force, progress=progress,
                               no_calibrate=no_calibrate, seed=seed, source_label=source_label or src)
    from cactus_quant import sensitivity as sens
    from cactus_quant.convert import convert, scheme_name

    from .engine import Engine
    from .weights import load_weights

    scheme = scheme_name(float(bits), method)
    mixed, self_calibrating = scheme in ("cq3.26", "cq2.54"), scheme in ("cq4", "cq3", "cq2")
    measured = mixed and sensitivity == "kl"
    # cq4/cq3/cq2 self-calibrate inside convert(); given text still goes through the feedback
    # path, and the mixed plans code with feedback on their measuring text unless told not to
    # (on the default model: CQ3.26 2.54x -> 1.96x MLX's KL, CQ2.54 7.0x -> 5.3x; docs/quantization.md)
    asked = calibrate or method == "gptq" or bool(calibration_text)
    calibrate = (asked and not self_calibrating) or bool(calibration_text) or (mixed and not no_calibrate)
    extra = {} if samples is None or not self_calibrating else {"calibration_samples": samples}
    if seed and self_calibrating:
        extra["calibration_seed"] = seed
    samples = 16 if samples is None else samples
    calibration, measure, quantizer, tokens, bar = None, None, None, None, None
    if calibrate or measured:
        text = None
        if calibration_text:
            try:
                with open(calibration_text, encoding="utf-8") as f:
                    text = f.read()
            except OSError as exc:
                raise QuantizationError(f"cannot read --calibration-text {calibration_text}: {exc.strerror}") from None
        engine = Engine.load(src, context_length=256)
        if engine.generator is None:  # an encoder: it can neither write its own text nor give next-token KL
            if asked and text is None:
                raise QuantizationError(f"{src} is not a causal LM, so it cannot calibrate on its own text; "
                                        "pass --calibration-text FILE")
            measured = False
            calibrate = calibrate and text is not None
        # GPTQ fits every weight to the activations it sees, so it gets CQ4's longer
        # six-round self-written text: on stage 19 the one-round sampler's ~2K tokens left
        # GPTQ-4 at 2.8x MLX g64's KL, worse than RTN; this text, 0.55x (docs/quantization.md)
        tokens = sens.calibration_tokens(engine, samples=samples, length=128, text=text,
                                         self_written=True if method == "gptq" else None)
        del engine
    if calibrate:
        calibration = sens.record_inputs(src, tokens).get
    if measured:
        from cactus_quant.plugin import cactus_register_quantizers

        found: dict = {}
        cactus_register_quantizers(lambda name, q: found.__setitem__(name, q))
        quantizer, weights = found[scheme], load_weights(src)

        def make(name: str, width: int):
            extra = {"calibration": calibration(name)} if calibration is not None else {}
            return quantizer.inner[width].quantize(name, weights[name], **extra)

        if progress:
            from tqdm import tqdm

            bar = tqdm(desc="measure KL per tensor", unit="run")
        measure = sens.KLSensitivity(src, make, tokens=tokens, progress=bar.update if bar else None)
        quantizer.made = measure.tensors  # the conversion reuses what was measured
    try:
        return convert(src, out, bits=float(bits), method=method, force=force, progress=progress,
                       calibration=calibration, head=head, measure=measure, quantizer=quantizer,
                       calibration_source="calibration text" if calibration_text else "self-written text",
                       source_label=source_label,
                       self_calibrate=False if no_calibrate else None, **extra)
    finally:
        if bar is not None:
            bar.close()


def _cmd_convert(args) -> int:
    try:
        import cactus_quant  # noqa: F401
    except ImportError:
        raise CactusError("cactus convert needs the quantizer plugin: pip install ./quant") from None
    from cactus_quant.torch_bin import safetensors_copy

    from .models import model_module
    from .weights import read_json

    model_module(read_json(os.path.join(args.src, "config.json"), "config.json"))  # supported at all?
    if os.path.exists(args.out) and not args.force:
        raise QuantizationError(f"{args.out} already exists; pass --force to overwrite it")
    with safetensors_copy(args.src) as src:  # PyTorch .bin weights are read through torch once
        return _convert_and_report(args, str(src))


def _convert_and_report(args, src: str) -> int:
    from .engine import Engine
    from .quality import compare

    source = Engine.load(src, context_length=64)  # missing tensors or shapes that do not fit fail here
    del source
    report = run_convert(src, args.out, args.bits, args.method, args.calibrate, args.calibration_text,
                         args.calibration_samples, args.head, args.sensitivity, args.force, not args.json,
                         no_calibrate=args.no_calibrate, seed=args.calibration_seed, source_label=args.src)
    try:
        quant = Engine.load(args.out)  # the bundle must load and run before we call it done
    except CactusError as exc:
        raise QuantizationError(f"the converted bundle does not load: {exc}") from exc
    if args.report:
        text = None
        if args.eval_text:
            with open(args.eval_text, encoding="utf-8") as f:
                text = f.read()
        report["tensor_rel_error"] = tensor_errors(src, args.out)
        report["quality"] = compare(Engine.load(src), quant, text)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{report['scheme']}: {report['tensors_quantized']} tensors at {report['bits_per_weight']:.3f} bits/weight, "
          f"{report['tensors_kept']} kept in their dtype; {report['source_bytes'] / 2**20:.1f} MiB -> "
          f"{report['bundle_bytes'] / 2**20:.1f} MiB -> {report['output']}")
    if report.get("head_tensors"):
        print(f"head ({', '.join(report['head_tensors'])}): {report['head']} at "
              f"{report['head_bits_per_weight']:.3f} bits/weight")
    if "widened" in report:  # cq4 spent its 4.25 bpw budget on the tensors with the most KL
        coarse = len(report.get("coarse_groups", ()))
        print(f"widths by measured KL (4.25 bits/weight at most): tensors per width {report['allocation']}"
              + (f", {coarse} with coarse scale groups" if coarse else ""))
    elif "allocation" in report:
        print(f"mixed precision from {report['allocation_source']} sensitivity: tensors per width "
              f"{report['allocation']}")
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
