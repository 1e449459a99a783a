"""Average several fine-tunes of one checkpoint into one (a uniform "model soup").

    python -m training.soup --out runs/soup RUN_A/model RUN_B/model [...]   # writes runs/soup/model

Runs that start from the same checkpoint and train briefly on different draws of the
data land in one basin, so their mean weights are a model too, and on structures no
run trained on it generalises better than most of its members (Wortsman et al., 2022).
Longer single runs did the opposite here: more steps fit the training structures and
lost held-out ones. Every member must share the config and tokenizer; the output copies
the first member's files and replaces its weights with the mean, computed in float32 and
stored in the members' dtype.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

WEIGHTS = "model.safetensors"
# files that must be identical across members: the soup is only a model if they agree
SHARED = ("config.json", "tokenizer.json")


class SoupError(ValueError):
    """Members that cannot be averaged (different shapes, tokenizers or tensor names)."""


def _config(path: Path) -> dict:
    cfg = json.loads((path / "config.json").read_text())
    cfg.pop("transformers_version", None)  # written by whichever version saved it
    cfg.pop("dtype", None)
    return cfg


def check_members(members: list[Path]) -> None:
    """Raise SoupError unless every member is a checkpoint with the first one's config and tokenizer."""
    if len(members) < 2:
        raise SoupError("a soup needs at least two checkpoints")
    for m in members:
        for name in (WEIGHTS, *SHARED):
            if not (m / name).is_file():
                raise SoupError(f"{m}: no {name}")
    first = members[0]
    for m in members[1:]:
        if _config(m) != _config(first):
            raise SoupError(f"{m}: config.json differs from {first}'s")
        if (m / "tokenizer.json").read_bytes() != (first / "tokenizer.json").read_bytes():
            raise SoupError(f"{m}: tokenizer.json differs from {first}'s")


def load_matching(members: list[Path]) -> list[dict[str, np.ndarray]]:
    """Each member's tensors; SoupError unless all have the first one's names and shapes."""
    states = [load_file(str(m / WEIGHTS)) for m in members]
    names = set(states[0])
    for m, sd in zip(members[1:], states[1:]):
        if set(sd) != names:
            raise SoupError(f"{m}: tensor names differ from {members[0]}'s")
        for k in names:
            if sd[k].shape != states[0][k].shape:
                raise SoupError(f"{m}: {k} is {sd[k].shape}, not {states[0][k].shape}")
    return states


def average(members: list[Path]) -> dict[str, np.ndarray]:
    """The uniform mean of the members' tensors, in the first member's dtypes."""
    check_members(members)
    states = load_matching(members)
    out = {}
    for k in sorted(states[0]):
        acc = np.zeros(states[0][k].shape, np.float32)
        for sd in states:
            acc += sd[k].astype(np.float32)
        out[k] = (acc / len(states)).astype(states[0][k].dtype)
    return out


def write_checkpoint(weights: dict[str, np.ndarray], like: Path, out: Path) -> Path:
    """Write `weights` to `out` as a checkpoint whose other files (config, tokenizer, ...) are `like`'s."""
    out.mkdir(parents=True, exist_ok=True)
    for f in like.iterdir():
        if f.is_file() and f.name != WEIGHTS:
            shutil.copy(f, out / f.name)
    save_file(weights, str(out / WEIGHTS), metadata={"format": "pt"})
    return out


def soup(members: list[Path], out: Path) -> Path:
    """Write the mean of `members` to `out` as a checkpoint (the first member's other files copied)."""
    return write_checkpoint(average(members), members[0], out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="run folder; the checkpoint goes to OUT/model, as training.train's")
    ap.add_argument("members", type=Path, nargs="+")
    args = ap.parse_args(argv)
    try:
        soup(args.members, args.out / "model")
    except (SoupError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {args.out / 'model'} (mean of {len(args.members)} checkpoints)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
