"""``cactus convert``: a Hugging Face checkpoint directory -> a quantized Cactus bundle.

The bundle is still a Hugging Face checkpoint directory: every non-weight file
(config.json, tokenizer files, generation_config.json...) is copied, the
weights go to one ``model.safetensors`` and ``cactus.json`` says which tensors
are quantized and how (docs/formats.md).  Which tensors get quantized: every
2-D ``*.weight`` inside a transformer block (``layers.N``, ``layer.N``, ``h.N``,
``blocks.N``) whose input dim is a multiple of 32.  Embeddings and ``lm_head``
(the "head") follow ``head=``: ``keep`` leaves them in their source dtype,
``int8``/``int4`` store them as affine groups, ``cq4`` as CQ (8-bit codes of
2-vectors), ``cq6``/``cq5`` as CQ with a scalar codebook of 64/32 levels (``cq6``
is the default).  Each of these is a format every backend already multiplies by
(``linear``, the tied output head); embedding lookups dequantize only the rows they
read.  Only the token tables match: an encoder's position and token-type embeddings
stay in their source dtype.

Weights are read straight from the safetensors bytes (memory-mapped, bf16
included, which ``safetensors.numpy`` cannot represent) and the bundle is
written to a temporary directory that is renamed into place at the end, so an
interrupted conversion never leaves a half-written OUT.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from cactus_core.convert_cli import DEFAULT_HEAD
from cactus_core.errors import CactusError, QuantizationError
from cactus_core.formats import BFloat16, QuantizedTensor, to_float32

from .calibrate import DEFAULT_LENGTH, DEFAULT_SAMPLES, DEFAULT_TEMPERATURE, SELF_DAMP
from .torch_bin import bin_files, safetensors_copy

_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U64": np.uint64, "U32": np.uint32, "U16": np.uint16, "U8": np.uint8, "BOOL": np.bool_,
}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items() if k != "BF16"}
_BLOCK = re.compile(r"(^|\.)(layers|layer|h|blocks)\.\d+\.")
#: Token embeddings and output heads of the supported architectures.
_HEAD = re.compile(r"(^|\.)(embed_tokens|word_embeddings|wte|lm_head|embed_out)\.weight$")
HEAD_CHOICES = ("keep", "int8", "int4", "cq6", "cq5", "cq4")
#: --head cq6 / cq5: CQ with a scalar (vec_dim 1) codebook of 2**bits levels for the rotated,
#: group-normalised coordinates, groups of 128 and the scale search of CQ4.  cq6's 64 levels are
#: equally spaced (codebooks.uniform_grid): kernels then multiply the codes without a lookup,
#: which made the AVX2 head memory-bound, for 1.27x the head's weight error of Lloyd-Max levels
#: (docs/quantization.md, session 13).  cq5's 32 are Lloyd-Max levels of N(0, 1).
SCALAR_HEADS = {"cq6": (6, "uniform"), "cq5": (5, "gaussian")}


def read_safetensors(path: Path) -> dict[str, tuple[str, np.ndarray]]:
    """name -> (safetensors dtype, memory-mapped array) for every tensor of a file."""
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
    base = 8 + size
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise QuantizationError(f"{path.name}: tensor '{name}' has unsupported dtype {info['dtype']}")
        start, end = info["data_offsets"]
        count = (end - start) // np.dtype(dtype).itemsize
        arr = np.memmap(path, dtype=dtype, mode="r", offset=base + start, shape=(count,)) if count else np.zeros(0, dtype)
        out[name] = (info["dtype"], arr.reshape(info["shape"]))
    return out


def write_safetensors(path: Path, tensors: dict[str, tuple[str, np.ndarray]], metadata: Optional[dict] = None) -> None:
    """Write ``name -> (dtype string, array)`` as one safetensors file, streaming the data."""
    header: dict[str, Any] = {"__metadata__": metadata or {"format": "pt"}}
    offset = 0
    for name, (dt, arr) in tensors.items():
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)  # data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(len(blob).to_bytes(8, "little"))
        f.write(blob)
        for _, arr in tensors.values():
            f.write(np.ascontiguousarray(arr).tobytes())


def scheme_name(bits: float, method: str) -> str:
    """The registered quantizer for ``--bits``/``--method`` (``cq`` + 3.26 -> ``cq3.26``)."""
    b = f"{float(bits):g}"
    valid = {"cq": {"4", "3", "2", "3.26", "2.54"}, "rtn": {"4", "8"}, "gptq": {"4"}}
    if method not in valid:
        raise QuantizationError(f"unknown method '{method}'; use one of cq, gptq, rtn")
    if b not in valid[method]:
        raise QuantizationError(f"--method {method} supports --bits {', '.join(sorted(valid[method]))}, not {b}")
    return f"{method}{b}"


def _quantizable(name: str, dtype: str, arr: np.ndarray) -> bool:
    return (
        name.endswith(".weight")
        and arr.ndim == 2
        and dtype in ("F32", "F16", "BF16")
        and bool(_BLOCK.search(name))
        and arr.shape[1] % 32 == 0
    )


def _is_head(name: str, dtype: str, arr: np.ndarray) -> bool:
    return bool(_HEAD.search(name)) and arr.ndim == 2 and dtype in ("F32", "F16", "BF16") and arr.shape[1] % 32 == 0


def head_quantizer(head: str) -> Any:
    """The quantizer for embeddings/``lm_head`` under ``--head`` (None for ``keep``)."""
    if head not in HEAD_CHOICES:
        raise QuantizationError(f"unknown --head '{head}'; use one of {', '.join(HEAD_CHOICES)}")
    if head == "keep":
        return None
    from .cq import CQQuantizer
    from .rtn import RTNQuantizer

    if head in SCALAR_HEADS:  # CQ4's preset (groups, scale search) with a scalar codebook
        bits, levels = SCALAR_HEADS[head]
        return CQQuantizer(head, 4, index_bits=bits, vec_dim=1, levels=levels)
    return CQQuantizer("cq4", 4) if head == "cq4" else RTNQuantizer(f"rtn{head[3:]}", int(head[3:]))


def _as_float(dtype: str, arr: np.ndarray):
    return BFloat16(arr) if dtype == "BF16" else arr


def convert(
    src_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    bits: float = 4,
    method: str = "cq",
    force: bool = False,
    progress: bool = True,
    calibration: Optional[Callable[[str], np.ndarray]] = None,
    quantizer: Any = None,
    head: str = DEFAULT_HEAD,
    measure: Optional[Callable[[str, int], float]] = None,
    self_calibrate: Optional[bool] = None,
    calibration_samples: int = DEFAULT_SAMPLES,
    calibration_seed: int = 0,
    sequential: Optional[bool] = None,
    calibration_turns: Optional[int] = None,
    calibration_past_end: Optional[bool] = None,
    calibration_temperature: float = DEFAULT_TEMPERATURE,
    calibration_length: Optional[int] = None,
    calibration_source: str = "given",
    source_label: Optional[str] = None,
) -> dict:
    """Convert a Hugging Face checkpoint to a quantized bundle; returns a report dict.

    ``calibration(tensor_name) -> activations`` feeds GPTQ (required for
    ``gptq``) and CQ's error feedback (optional); the report's ``calibration``
    names it as ``calibration_source`` says.  Without it, a scheme whose
    quantizer says ``self_calibrate`` (cq4) calibrates on ``calibration_samples``
    texts the model writes itself (calibrate.py; data-free for encoders;
    ``calibration_seed`` picks the draw of those texts; ``sequential`` takes each
    tensor's Hessian through the tensors quantized before it, default
    ``calibrate.SEQUENTIAL``; ``calibration_turns`` and ``calibration_past_end``
    shape the self-written chats, defaults ``calibrate.CHAT_TURNS`` and
    ``calibrate.PAST_END``; ``calibration_temperature`` and ``calibration_length`` are the
    sampling temperature and the tokens per plain text, defaults
    ``calibrate.DEFAULT_TEMPERATURE`` and the quantizer's ``calibration_length`` (cq4: 512)
    or else ``calibrate.DEFAULT_LENGTH``);
    ``self_calibrate=False`` keeps it data-free, ``True`` asks for it whatever the
    scheme.  ``quantizer`` overrides the
    registered scheme object (tests, custom settings).  ``head`` says how
    embeddings and ``lm_head`` are stored (:data:`HEAD_CHOICES`; default
    ``cactus convert``'s, ``cactus_core.convert_cli.DEFAULT_HEAD``).  ``measure``
    is the mixed-precision sensitivity ``measure(name, bits)`` (e.g. measured KL,
    see :mod:`cactus_quant.sensitivity`); without it the weight-error proxy plans.
    A checkpoint of PyTorch ``.bin`` weights is converted from a temporary safetensors
    copy (:mod:`cactus_quant.torch_bin`); ``source_label`` is what the report and the
    bundle name as the source (default ``src_dir``).
    """
    if bin_files(src_dir):
        args = dict(locals())
        with safetensors_copy(src_dir) as copy:
            return convert(**{**args, "src_dir": copy, "source_label": source_label or str(src_dir)})
    t0 = time.time()
    src, out = Path(src_dir), Path(out_dir)
    if not (src / "config.json").is_file():
        raise QuantizationError(f"{src} is not a Hugging Face checkpoint (no config.json)")
    files = sorted(src.glob("*.safetensors"))
    if not files:
        raise QuantizationError(f"{src} has no .safetensors or PyTorch .bin weights")
    if out.exists() and not force:
        raise QuantizationError(f"{out} already exists; pass --force to overwrite it")
    if out.resolve() == src.resolve():
        raise QuantizationError("OUT must differ from SRC")
    scheme = scheme_name(bits, method)
    if quantizer is None:
        from .plugin import cactus_register_quantizers

        found: dict[str, Any] = {}
        cactus_register_quantizers(lambda name, q: found.__setitem__(name, q))
        quantizer = found[scheme]
    if method == "gptq" and calibration is None:
        raise QuantizationError("gptq needs calibration activations (calibration=...); use --method cq or rtn")

    tensors: dict[str, tuple[str, np.ndarray]] = {}
    for f in files:
        tensors.update(read_safetensors(f))
    config = json.loads((src / "config.json").read_text())
    if config.get("tie_word_embeddings") and "lm_head.weight" in tensors and any(
            n.endswith("embed_tokens.weight") for n in tensors):
        # Some exporters write the tied head twice; the loader ties it to the embedding,
        # so a second copy only costs disk and page cache (153 MiB on Qwen3-0.6B).
        del tensors["lm_head.weight"]
    targets = [n for n, (dt, a) in tensors.items() if _quantizable(n, dt, a)]
    if not targets:
        raise QuantizationError(f"{src}: found no transformer-block linear weights to quantize")
    head_q = head_quantizer(head)
    heads = {n for n, (dt, a) in tensors.items() if head_q is not None and _is_head(n, dt, a)}

    hessians, calibrated_by, texts = None, calibration_source if calibration is not None else "none", []
    made: dict[str, QuantizedTensor] = {}  # tensors sequential calibration already quantized
    wanted = self_calibrate if self_calibrate is not None else getattr(quantizer, "self_calibrate", False)
    if calibration_length is None:
        calibration_length = getattr(quantizer, "calibration_length", None) or DEFAULT_LENGTH
    if calibration is None and wanted and method != "rtn":
        from .calibrate import SEQUENTIAL, self_hessians, sequential_quantize

        try:
            if (SEQUENTIAL if sequential is None else sequential) and not hasattr(quantizer, "plan"):
                wanted_names = set(targets)
                made = sequential_quantize(str(src), lambda n, h: quantizer.quantize(
                    n, _as_float(*tensors[n]), hessian=h, damp=SELF_DAMP) if n in wanted_names else None,
                    samples=calibration_samples, seed=calibration_seed, turns=calibration_turns,
                    past_end=calibration_past_end, temperature=calibration_temperature,
                    length=calibration_length)
                hessians, made = ({}, made) if made is not None else (None, {})
            else:
                hessians = self_hessians(str(src), samples=calibration_samples, seed=calibration_seed,
                                         turns=calibration_turns, past_end=calibration_past_end,
                                         temperature=calibration_temperature, length=calibration_length,
                                         texts_out=texts, progress=progress)
            calibrated_by = "self-written text" if hessians is not None else "none (not a causal LM)"
        except CactusError as exc:  # e.g. no tokenizer: the engine cannot run it, so stay data-free
            if self_calibrate:
                raise QuantizationError(f"cannot calibrate on text {src} writes itself: {exc}") from exc
            calibrated_by = "none (the engine cannot run it)"

    allocation = None
    allocation_source = "measured" if measure is not None or hasattr(quantizer, "plan_widths") else "proxy"
    if hasattr(quantizer, "plan_widths") and hessians and texts:  # cq4: widen where the KL says
        allocation = plan_widths(quantizer, src, tensors, targets, hessians, texts[0], progress)
    elif hasattr(quantizer, "plan"):  # mixed precision: widths from measured sensitivity, else the proxy
        if measure is not None:
            allocation = quantizer.plan({n: tuple(tensors[n][1].shape) for n in targets}, measure=measure)
        else:
            allocation = quantizer.plan({n: to_float32(_as_float(*tensors[n])) for n in targets})

    written: dict[str, tuple[str, np.ndarray]] = {}
    manifest: dict[str, dict] = {}
    quant_bits, head_bits, head_params = 0.0, 0.0, 0
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(tensors), desc=f"convert {scheme}", unit="tensor")
    target_set = set(targets)
    for name, (dt, arr) in tensors.items():
        if name in target_set:
            options = {"calibration": calibration(name)} if calibration is not None else {}
            if hessians is not None and name in hessians:
                options = {"hessian": hessians[name], "damp": SELF_DAMP}
            qt: QuantizedTensor = (made.pop(name) if name in made
                                   else quantizer.quantize(name, _as_float(dt, arr), **options))
            for key, a in qt.named_arrays(name).items():
                written[key] = (_NAMES[a.dtype], a)
            manifest[name] = qt.manifest_entry()
            quant_bits += qt.bits_per_weight * arr.size
        elif name in heads:
            qt = head_q.quantize(name, _as_float(dt, arr))
            for key, a in qt.named_arrays(name).items():
                written[key] = (_NAMES[a.dtype], a)
            manifest[name] = qt.manifest_entry()
            head_bits += qt.bits_per_weight * arr.size
            head_params += arr.size
        else:
            written[name] = (dt, arr)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for f in src.iterdir():  # config, tokenizer, chat template, generation config...
            if f.is_file() and not f.name.endswith(".safetensors") and f.name != "model.safetensors.index.json":
                shutil.copy2(f, tmp / f.name)
        write_safetensors(tmp / "model.safetensors", written)
        n_quant = sum(tensors[n][1].size for n in targets)
        n_all = sum(a.size for _, a in tensors.values())
        report = {
            "scheme": scheme,
            "source": source_label or str(src),
            "output": str(out),
            "tensors_quantized": len(targets),
            "tensors_kept": len(tensors) - len(targets) - len(heads),
            "head": head,
            "calibration": calibrated_by,
            "head_tensors": sorted(heads),
            "head_bits_per_weight": head_bits / head_params if head_params else None,
            "quantized_params": int(n_quant),
            "total_params": int(n_all),
            "bits_per_weight": quant_bits / n_quant,
            "source_bytes": int(sum(f.stat().st_size for f in files)),
            "bundle_bytes": int((tmp / "model.safetensors").stat().st_size),
        }
        if allocation is not None:
            widening = hasattr(quantizer, "plan_widths")
            report["allocation"] = {b: sum(1 for v in allocation.bits.values() if v == b)
                                    for b in (sorted(quantizer.inner) if widening else (2, 3, 4))}
            report["allocation_source"] = allocation_source
            if widening:  # name -> width of every cq4 tensor not at 4 bits
                report["widened"] = {n: b for n, b in allocation.bits.items() if b != 4}
                report["coarse_groups"] = sorted(quantizer.coarse_plan)
        cactus = {
            "format_version": 1,
            "source": source_label or str(src),
            "quantization": {"scheme": scheme, "bits_per_weight": report["bits_per_weight"], "head": head,
                             "tensors": manifest},
        }
        probe = _source_probe(src)
        if probe is not None:
            shutil.copy2(src / probe["file"], tmp / probe["file"])
            cactus["probe"] = probe
            report["probe"] = probe["file"]
        (tmp / "cactus.json").write_text(json.dumps(cactus, indent=1))
        if out.exists():
            shutil.rmtree(out)
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    report["seconds"] = time.time() - t0
    return report


def plan_widths(quantizer, src: Path, tensors: dict, targets: list[str], hessians: dict, texts, progress: bool):
    """cq4's widening plan (widen.py): the KL each tensor adds at 4 bits, measured on part of
    the calibration text with that tensor alone swapped in; the 4-bit tensors made on the
    way are kept for the conversion.  Returns the allocation (None: nothing fits the budget)."""
    from .sensitivity import KLSensitivity
    from .widen import sensitivity_texts, sensitivity_tokens

    n_params = sum(a.size for _, a in tensors.values())
    budget = sensitivity_tokens(n_params, len(targets), quantizer.sensitivity_work)
    subset = sensitivity_texts(texts, texts.keep, budget, texts.plain)

    def make(name: str, bits: int):
        options = {"hessian": hessians[name], "damp": SELF_DAMP} if name in hessians else {}
        return quantizer.inner[bits].quantize(name, _as_float(*tensors[name]), **options)

    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(targets) * (1 + len(quantizer.measured)), desc="measure KL per tensor", unit="run")
    try:
        kl = KLSensitivity(str(src), make, tokens=subset, progress=bar.update if bar is not None else None)
        coarse = None
        if quantizer.coarse:
            from .widen import coarse_error_ratio

            coarse = {n: coarse_error_ratio(to_float32(_as_float(*tensors[n]))) for n in targets}
        allocation = quantizer.plan_widths({n: tuple(tensors[n][1].shape) for n in targets}, kl, coarse)
    finally:
        if bar is not None:
            bar.close()
    quantizer.made.update(kl.tensors)
    return allocation


def _source_probe(src: Path) -> Optional[dict]:
    """The source bundle's confidence probe entry, when its file is there. A 4-bit model's
    hidden states stay close enough that the float model's probe keeps working (the CQ4
    default model: AUROC 0.709 against 0.710, docs/benchmarks.md), so it travels along."""
    try:
        probe = json.loads((src / "cactus.json").read_text(encoding="utf-8")).get("probe")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(probe, dict) or not isinstance(probe.get("file"), str):
        return None
    name = Path(probe["file"]).name  # never a path out of the source folder
    return {**probe, "file": name} if (src / name).is_file() else None


def add_convert_command(sub) -> None:
    """Add ``cactus convert SRC OUT [--bits] [--method] [--force] [--json]`` to an argparse subparsers."""
    p = sub.add_parser("convert", help="quantize a Hugging Face checkpoint into a Cactus bundle")
    p.add_argument("src", metavar="SRC", help="Hugging Face checkpoint directory (safetensors)")
    p.add_argument("out", metavar="OUT", help="bundle directory to create")
    p.add_argument("--bits", default="4", choices=["4", "3", "2", "3.26", "2.54", "8"])
    p.add_argument("--method", default="cq", choices=["cq", "gptq", "rtn"])
    p.add_argument("--force", action="store_true", help="replace OUT if it exists")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=_cmd_convert)


def _cmd_convert(args) -> int:
    report = convert(args.src, args.out, bits=float(args.bits), method=args.method, force=args.force,
                     progress=not args.json)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{report['scheme']}: {report['tensors_quantized']} tensors quantized at "
              f"{report['bits_per_weight']:.3f} bits/weight, {report['tensors_kept']} kept; "
              f"{report['source_bytes'] / 2**20:.1f} MiB -> {report['bundle_bytes'] / 2**20:.1f} MiB "
              f"in {report['seconds']:.1f}s -> {report['output']}")
    return 0
