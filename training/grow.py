"""Deepen or widen a trained checkpoint without changing what it computes.

    python -m training.grow --init models/spine --out runs/g16 --layers 16
    python -m training.grow --init models/spine --out runs/w --intermediate 2560

Every decoder block of the checkpoint is followed by copies of itself until the model has
--layers blocks (16 from 8: each block twice). A copy's two output projections
(`self_attn.o_proj`, `mlp.down_proj`) are zero, so it adds nothing to the residual stream
and the grown model gives the same logits as the original; its other weights start as the
block it copies, so training moves it from a useful place (the "block expansion" of
LLaMA Pro, Wu et al., 2024). The gradient reaches the zero projections through their
inputs, which are not zero, so the copies do learn.

--intermediate widens every MLP instead: the new hidden units get random `gate_proj` and
`up_proj` rows (drawn at the spread of the block's own rows) and zero `down_proj` columns, so
again nothing changes until training writes through them. Attention, the embeddings and the
norms are untouched, so the model stays a standard checkpoint of the same architecture.

This is how the default model is given more capacity without training a lineage from
scratch: fine-tunes of the grown checkpoint are compared with fine-tunes of the original
on the same data (docs/training.md, session 26).
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

WEIGHTS = "model.safetensors"
ZEROED = ("self_attn.o_proj.weight", "mlp.down_proj.weight")
_LAYER = re.compile(r"^model\.layers\.(\d+)\.(.+)$")


class GrowError(ValueError):
    """A checkpoint that cannot be grown as asked."""


def source_layers(old: int, new: int) -> list[tuple[int, bool]]:
    """For each new block: (the old block it starts from, whether it is the original)."""
    if new < old:
        raise GrowError(f"--layers {new} is fewer than the checkpoint's {old} blocks")
    out, seen = [], set()
    for j in range(new):
        i = j * old // new
        out.append((i, i not in seen))
        seen.add(i)
    return out


def grow_state(state: dict[str, np.ndarray], old: int, new: int) -> dict[str, np.ndarray]:
    """The grown model's tensors: non-block tensors as they are, blocks per source_layers."""
    blocks: dict[int, dict[str, np.ndarray]] = {}
    out = {}
    for name, t in state.items():
        m = _LAYER.match(name)
        if m:
            blocks.setdefault(int(m.group(1)), {})[m.group(2)] = t
        else:
            out[name] = t
    if sorted(blocks) != list(range(old)):
        raise GrowError(f"the checkpoint's tensors hold blocks {sorted(blocks)}, not 0..{old - 1}")
    for j, (i, original) in enumerate(source_layers(old, new)):
        for part, t in blocks[i].items():
            copy = t.copy()
            if not original and part in ZEROED:
                copy[...] = 0
            out[f"model.layers.{j}.{part}"] = copy
    return out


def widen_state(state: dict[str, np.ndarray], width: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Every MLP with `width` hidden units: new gate/up rows random, new down columns zero."""
    rng = np.random.default_rng(seed)
    out = dict(state)
    for name, t in state.items():
        if not name.endswith(("mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")):
            continue
        down = name.endswith("down_proj.weight")
        old = t.shape[1] if down else t.shape[0]
        if width < old:
            raise GrowError(f"--intermediate {width} is narrower than the checkpoint's {old}")
        if down:  # D, I -> D, width
            out[name] = np.concatenate([t, np.zeros((t.shape[0], width - old), t.dtype)], axis=1)
        else:  # I, D -> width, D
            std = float(t.astype(np.float32).std())
            new = rng.normal(0.0, std, (width - old, t.shape[1])).astype(t.dtype)
            out[name] = np.concatenate([t, new], axis=0)
    return out


def grow_config(cfg: dict, new: int) -> dict:
    """The config with `new` blocks (per-layer lists follow their blocks)."""
    old = cfg["num_hidden_layers"]
    cfg = dict(cfg, num_hidden_layers=new)
    if isinstance(cfg.get("layer_types"), list):
        cfg["layer_types"] = [cfg["layer_types"][i] for i, _ in source_layers(old, new)]
    return cfg


def grow(init: Path, out: Path, layers: int | None = None, intermediate: int | None = None,
         seed: int = 0) -> None:
    """Write the grown checkpoint (weights, config and every other file of `init`) to `out`."""
    cfg_path = init / "config.json"
    if not (init / WEIGHTS).is_file() or not cfg_path.is_file():
        raise GrowError(f"{init}: not a checkpoint (needs {WEIGHTS} and config.json)")
    cfg = json.loads(cfg_path.read_text())
    old = int(cfg["num_hidden_layers"])
    layers = layers or old
    state = grow_state(load_file(str(init / WEIGHTS)), old, layers)
    cfg = grow_config(cfg, layers)
    if intermediate:
        state = widen_state(state, intermediate, seed)
        cfg["intermediate_size"] = intermediate
    out.mkdir(parents=True, exist_ok=True)
    for f in init.iterdir():
        if f.is_file() and f.name not in (WEIGHTS, "config.json"):
            shutil.copy2(f, out / f.name)
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    save_file(state, str(out / WEIGHTS), metadata={"format": "pt"})


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--init", type=Path, required=True, help="checkpoint to grow")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--layers", type=int, help="decoder blocks of the grown model (default: as many as now)")
    ap.add_argument("--intermediate", type=int, help="hidden units of every grown MLP (default: as many as now)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the new MLP rows")
    args = ap.parse_args(argv)
    if not (args.layers or args.intermediate):
        ap.error("give --layers, --intermediate or both")
    try:
        grow(args.init, args.out, args.layers, args.intermediate, args.seed)
    except (GrowError, OSError, KeyError, ValueError) as e:
        sys.exit(f"error: {e}")
    print(f"{args.init} -> {args.out}: grown")


if __name__ == "__main__":
    main()
