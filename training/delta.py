"""A checkpoint stored as its difference from another, in int8: half the bytes of a float16 copy.

    python -m training.delta pack --base models/spine --out D.safetensors RUN_A/model [RUN_B/model ...]
    python -m training.delta apply --base models/spine --delta D.safetensors [--alpha 1.0] --out RUN/model

`pack` stores mean(members) - base; `apply` writes base + alpha * delta as a checkpoint (the
base's other files copied), so alpha 1 rebuilds the mean and alpha 0.5 is half base, half mean.
Soups of short continuations differ from their base by a small fraction of each weight, so a
row-scaled int8 code (one float32 scale per matrix row) keeps them to within about 0.4% of the
row's largest change, far below what moves a greedy answer. Vectors (norms) are kept in float32.

Why it exists: the device machines take at most 64 MiB of working tree, of which the tracked
files use most, and their results go when the session ends. A candidate worth keeping between
sessions, or worth sending to the device, travels as a delta (11.5 MB for the default model)
instead of a 23 MB checkpoint.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from .soup import WEIGHTS, SoupError, check_members, load_matching, write_checkpoint


def pack(base: Path, members: list[Path]) -> dict[str, np.ndarray]:
    """int8 codes and row scales (`NAME.q`, `NAME.s`) or float32 vectors (`NAME.d`) of mean(members) - base."""
    check_members([base, *members])
    b, *states = load_matching([base, *members])
    out: dict[str, np.ndarray] = {}
    for k, v in b.items():
        d = np.mean([sd[k].astype(np.float32) for sd in states], axis=0) - v.astype(np.float32)
        if d.ndim == 2:
            s = np.abs(d).max(axis=1, keepdims=True) / 127.0
            s[s == 0] = 1.0  # an unchanged row codes to zeros whatever its scale
            out[k + ".q"] = np.round(d / s).astype(np.int8)
            out[k + ".s"] = s.astype(np.float32)
        else:
            out[k + ".d"] = d.astype(np.float32)
    return out


def unpack(delta: dict[str, np.ndarray], name: str) -> np.ndarray:
    """The float32 change of tensor `name`."""
    if name + ".q" in delta and name + ".s" in delta:
        return delta[name + ".q"].astype(np.float32) * delta[name + ".s"]
    if name + ".d" in delta:
        return delta[name + ".d"]
    raise SoupError(f"the delta has no entry for {name}")


def apply(base: Path, delta: dict[str, np.ndarray], alpha: float, out: Path) -> Path:
    """Write base + alpha * delta to `out` as a checkpoint in the base's dtypes."""
    b = load_file(str(base / WEIGHTS))
    names = {k.rsplit(".", 1)[0] for k in delta}
    if names != set(b):
        raise SoupError(f"the delta's tensors do not match {base}'s ({len(names)} against {len(b)})")
    w = {k: (v.astype(np.float32) + alpha * unpack(delta, k)).astype(v.dtype) for k, v in b.items()}
    return write_checkpoint(w, base, out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack", help="store mean(MEMBERS) - BASE")
    p.add_argument("--base", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True, help="the delta's .safetensors file")
    p.add_argument("members", type=Path, nargs="+")
    a = sub.add_parser("apply", help="write BASE + ALPHA * DELTA as a checkpoint")
    a.add_argument("--base", type=Path, required=True)
    a.add_argument("--delta", type=Path, required=True)
    a.add_argument("--alpha", type=float, default=1.0)
    a.add_argument("--out", type=Path, required=True, help="checkpoint folder")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "pack":
            save_file(pack(args.base, args.members), str(args.out))
            print(f"wrote {args.out} (mean of {len(args.members)} checkpoints, less {args.base})")
        else:
            apply(args.base, load_file(str(args.delta)), args.alpha, args.out)
            print(f"wrote {args.out} ({args.base} + {args.alpha:g} x {args.delta})")
    except (SoupError, OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
