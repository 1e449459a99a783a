"""PyTorch ``.bin`` checkpoints: a safetensors copy to convert from.

Older Hugging Face checkpoints keep their weights as pickled torch state dicts
(``pytorch_model.bin``, or shards listed in ``pytorch_model.bin.index.json``).  The
converter and the engine read safetensors only (memory-mapped, and loading runs no
code), so ``cactus convert`` first writes a safetensors copy of such a checkpoint into a
temporary folder, one shard at a time, and converts from that.  Shards are read with
``torch.load(weights_only=True)``, which refuses pickled objects other than tensors, and
memory-mapped where the file's format allows, so one shard at a time is in memory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

from cactus_core.errors import QuantizationError

#: .bin files of a repository that are not weights (pickled training state)
NOT_WEIGHTS = frozenset({"training_args.bin", "optimizer.bin", "scheduler.bin", "rng_state.bin"})


def bin_files(src: str | os.PathLike) -> list[Path]:
    """The PyTorch weight files of a checkpoint that has no safetensors ([] if it has them,
    or is no checkpoint at all: the usual errors say what is missing)."""
    src = Path(src)
    if not (src / "config.json").is_file() or any(src.glob("*.safetensors")):
        return []
    index = src / "pytorch_model.bin.index.json"
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (OSError, ValueError, KeyError, AttributeError) as exc:
            raise QuantizationError(f"{index} is not a valid weight index: {exc}") from None
        missing = [n for n in names if not (src / n).is_file()]
        if missing:
            raise QuantizationError(f"shard {missing[0]} listed in {index.name} is missing")
        return [src / n for n in names]
    return sorted(p for p in src.glob("*.bin") if p.name not in NOT_WEIGHTS)


def _load(path: Path, torch) -> dict:
    """One shard's state dict (tensors only), memory-mapped when the file is a zip archive."""
    try:
        try:
            state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as exc:  # the legacy (pre-1.6) format cannot be memory-mapped
            if "mmap" not in str(exc):
                raise
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many kinds (UnpicklingError, RuntimeError, EOFError, ...)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise QuantizationError(f"cannot read {path.name} as PyTorch weights: {first}") from None
    if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
        state = state["state_dict"]  # a training checkpoint's wrapper
    if not isinstance(state, dict) or not state or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise QuantizationError(f"{path.name} is not a state dict of tensors")
    return state


@contextlib.contextmanager
def safetensors_copy(src: str | os.PathLike) -> Iterator[Path]:
    """A temporary safetensors copy of a ``.bin`` checkpoint (configs and tokenizer linked
    in), removed on exit; a checkpoint that has safetensors is given back as it is."""
    files = bin_files(src)
    if not files:
        yield Path(src)
        return
    try:
        import torch
        from safetensors.torch import save_file
    except ImportError:
        raise QuantizationError(f"{src} holds PyTorch .bin weights; reading them needs torch: "
                                "pip install torch") from None
    src = Path(src)
    tmp = Path(tempfile.mkdtemp(prefix="cactus-bin-"))
    try:
        for f in src.iterdir():
            if f.is_file() and f.suffix != ".bin" and not f.name.endswith(".bin.index.json"):
                os.symlink(f.resolve(), tmp / f.name)
        for i, f in enumerate(files):
            state, seen = _load(f, torch), set()
            out = {}
            for name, t in state.items():
                t = t.contiguous()
                # tied weights share storage, which safetensors refuses: the second one is copied
                key = (t.data_ptr(), t.numel(), t.dtype)
                out[name] = t.clone() if key in seen and t.numel() else t
                seen.add(key)
            save_file(out, str(tmp / f"model-{i + 1:05d}-of-{len(files):05d}.safetensors"), metadata={"format": "pt"})
            del state, out
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
