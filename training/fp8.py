"""Store a checkpoint's matrices as float8 (E4M3), one byte a weight, in standard safetensors.

    python -m training.fp8 --init runs/soup/model --out models/spine

Every two-dimensional weight (the embedding, which is also the tied output head, and each
projection) is rounded to the nearest float8 E4M3 value and stored with the safetensors
dtype `F8_E4M3`; the norms stay in float16. No scales are stored: transformers (5.x) and
the engine both read such a file with no quantization config, widening each code to the
checkpoint's float type, so the folder stays a plain Hugging Face checkpoint.

Why it is enough: the trained matrices hold their values between about 1e-3 and 5, inside
E4M3's normal range above 2**-6 for all but the smallest, so rounding costs about 2.7% of
each matrix's norm (three mantissa bits) and nothing measurable in accuracy (stage 19: 543
of 625 validation conversations in float16 and in float8). It halves the bytes per
parameter, so the 25 MB limit holds about 24M parameters instead of 12.5M.
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

WEIGHTS = "model.safetensors"
E4M3_MAX = 448.0


class Fp8Error(ValueError):
    """A checkpoint that cannot be stored in float8."""


def to_fp8(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The state with every floating 2-D tensor rounded to float8 E4M3 (others unchanged)."""
    out = {}
    for name, t in state.items():
        if t.ndim == 2 and t.is_floating_point():
            peak = t.abs().max().item()
            if not peak <= E4M3_MAX:  # E4M3 saturates (and NaN fails this too)
                raise Fp8Error(f"{name}: largest magnitude {peak:g} does not fit float8 E4M3 (max 448)")
            out[name] = t.to(torch.float8_e4m3fn)
        else:
            out[name] = t
    return out


def convert(init: Path, out: Path) -> int:
    """Write `init` with float8 matrices to `out` (other files copied); return the weights' bytes."""
    if not (init / WEIGHTS).is_file():
        raise Fp8Error(f"{init}: no {WEIGHTS}")
    state = to_fp8(load_file(str(init / WEIGHTS)))
    out.mkdir(parents=True, exist_ok=True)
    if out.resolve() != init.resolve():  # converting in place keeps the other files as they are
        for f in init.iterdir():
            if f.is_file() and f.name != WEIGHTS:
                shutil.copy2(f, out / f.name)
    save_file(state, str(out / WEIGHTS), metadata={"format": "pt"})
    return (out / WEIGHTS).stat().st_size


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--init", type=Path, required=True, help="checkpoint to store in float8")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    try:
        size = convert(args.init, args.out)
    except (Fp8Error, OSError) as e:
        sys.exit(f"error: {e}")
    print(f"{args.out / WEIGHTS}: {size:,} bytes")


if __name__ == "__main__":
    main()
