"""Safetensors loading by memory map, sharded checkpoints, and the bundle manifest.

We parse the safetensors header ourselves (8-byte little-endian length, JSON,
then raw little-endian data) so every tensor is an ``np.frombuffer`` view into
a read-only ``mmap``: nothing is copied at load, pages are read on first use,
and the OS can drop them again under memory pressure.  bfloat16 tensors stay
as raw words (:class:`formats.BFloat16`); float8 tensors (``F8_E4M3``,
``F8_E5M2``) are widened to float16 copies when read; quantized tensors of a bundle are
assembled from their named entries as ``cactus.json`` describes.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from typing import Any, Iterator, Optional

import numpy as np

from .errors import ModelLoadError
from .formats import QUANTIZED_FORMATS, BFloat16, f8_to_f16

BUNDLE_MANIFEST = "cactus.json"

_DTYPES = {
    "F64": np.float64,
    "F32": np.float32,
    "F16": np.float16,
    "BF16": np.uint16,  # wrapped in BFloat16 below
    "I64": np.int64,
    "I32": np.int32,
    "I16": np.int16,
    "I8": np.int8,
    "U8": np.uint8,
    "U16": np.uint16,
    "U32": np.uint32,
    "U64": np.uint64,
    "BOOL": np.bool_,
    # float8 weights are stored one byte per value and widened to float16 when read
    "F8_E4M3": np.uint8,
    "F8_E5M2": np.uint8,
}


class SafetensorsFile:
    """One ``.safetensors`` file, memory-mapped; tensors are zero-copy views."""

    def __init__(self, path: str):
        self.path = path
        name = os.path.basename(path)
        try:
            fh = open(path, "rb")
        except OSError as exc:
            raise ModelLoadError(f"cannot open weight file {path}: {exc.strerror}") from exc
        with fh:
            size = os.fstat(fh.fileno()).st_size
            if size < 8:
                raise ModelLoadError(f"{name} is truncated ({size} bytes); re-download or re-convert it")
            (n,) = struct.unpack("<Q", fh.read(8))
            if n > size - 8 or n > 100_000_000:
                raise ModelLoadError(f"{name} has a corrupt header; re-download or re-convert it")
            try:
                header = json.loads(fh.read(n))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise ModelLoadError(f"{name} has a corrupt header ({exc.__class__.__name__})") from exc
            self._mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size > 8 + n else None
        self.metadata = header.pop("__metadata__", None) or {}
        self._start = 8 + n
        self._entries: dict[str, tuple[Any, tuple[int, ...], int, int, str]] = {}
        data_len = size - self._start
        for key, info in header.items():
            try:
                dtype_name = info["dtype"]
                dtype = _DTYPES[dtype_name]
                shape = tuple(int(s) for s in info["shape"])
                begin, end = (int(o) for o in info["data_offsets"])
            except (KeyError, TypeError, ValueError) as exc:
                raise ModelLoadError(f"{name}: tensor '{key}' has an invalid header entry") from exc
            count = int(np.prod(shape, dtype=np.int64))
            if end > data_len or begin > end:
                raise ModelLoadError(
                    f"{name} is truncated: tensor '{key}' ends at byte {end} of {data_len}; "
                    "re-download or re-convert it"
                )
            if end - begin != count * np.dtype(dtype).itemsize:
                raise ModelLoadError(f"{name}: tensor '{key}' size does not match its shape {list(shape)}")
            self._entries[key] = (dtype, shape, begin, count, dtype_name)

    def keys(self) -> list[str]:
        return list(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def shape(self, key: str) -> tuple[int, ...]:
        return self._entries[key][1]

    def get(self, key: str) -> Any:
        dtype, shape, begin, count, dtype_name = self._entries[key]
        if count == 0 or self._mm is None:
            arr = np.zeros(shape, dtype=dtype)
        else:
            arr = np.frombuffer(self._mm, dtype=dtype, count=count, offset=self._start + begin)
            arr = arr.reshape(shape)
        if dtype_name.startswith("F8_"):
            return f8_to_f16(arr, dtype_name)
        return BFloat16(arr) if dtype_name == "BF16" else arr


def _weight_files(model_dir: str) -> list[str]:
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        try:
            with open(index, encoding="utf-8") as f:
                weight_map = json.load(f)["weight_map"]
        except (OSError, ValueError, KeyError) as exc:
            raise ModelLoadError(f"{index} is not a valid safetensors index: {exc}") from exc
        files = sorted(set(weight_map.values()))
        missing = [f for f in files if not os.path.exists(os.path.join(model_dir, f))]
        if missing:
            raise ModelLoadError(f"shard {missing[0]} listed in model.safetensors.index.json is missing")
        return [os.path.join(model_dir, f) for f in files]
    files = sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors"))
    if files:
        return [os.path.join(model_dir, f) for f in files]
    if any(f.endswith(".bin") or f.endswith(".pt") for f in os.listdir(model_dir)):
        raise ModelLoadError(
            f"{model_dir} holds PyTorch .bin weights; convert them first: cactus convert {model_dir} OUT"
        )
    raise ModelLoadError(f"no .safetensors weights found in {model_dir}")


class Weights:
    """All tensors of a checkpoint or bundle by name, memory-mapped.

    ``weights[name]`` returns a numpy view, a :class:`BFloat16`, or, for a
    tensor the manifest lists as quantized, a :class:`QuantizedTensor`.
    """

    def __init__(self, model_dir: str, manifest: Optional[dict] = None):
        self.model_dir = model_dir
        self.manifest = manifest or {}
        self.files = [SafetensorsFile(p) for p in _weight_files(model_dir)]
        self._where: dict[str, SafetensorsFile] = {}
        for f in self.files:
            for k in f.keys():
                self._where[k] = f
        quant = (self.manifest.get("quantization") or {}).get("tensors") or {}
        self.quantized: dict[str, dict] = dict(quant)

    def __contains__(self, name: str) -> bool:
        return name in self.quantized or name in self._where

    def __iter__(self) -> Iterator[str]:
        yield from self.quantized
        yield from (k for k in self._where if k.rsplit(".", 1)[0] not in self.quantized)

    def keys(self) -> list[str]:
        return list(iter(self))

    def raw(self, key: str) -> Any:
        """A stored entry by its exact safetensors key."""
        return self._where[key].get(key)

    def shape(self, name: str) -> tuple[int, ...]:
        if name in self.quantized:
            return tuple(self.quantized[name]["shape"])
        return self._where[name].shape(name)

    def __getitem__(self, name: str) -> Any:
        spec = self.quantized.get(name)
        if spec is None:
            if name not in self._where:
                raise ModelLoadError(f"checkpoint in {self.model_dir} is missing tensor '{name}'")
            return self._where[name].get(name)
        cls = QUANTIZED_FORMATS.get(spec.get("format", ""))
        if cls is None:
            known = ", ".join(sorted(QUANTIZED_FORMATS)) or "none"
            raise ModelLoadError(
                f"tensor '{name}' uses unknown quantized format '{spec.get('format')}' (known: {known})"
            )
        arrays = {}
        for field in cls.fields:
            key = f"{name}.{field}"
            if key not in self._where:
                raise ModelLoadError(f"bundle in {self.model_dir} is missing entry '{key}'")
            arrays[field] = self._where[key].get(key)
        return cls(tuple(spec["shape"]), spec.get("meta", {}), **arrays)

    def get(self, name: str, shape: Optional[tuple[int, ...]] = None) -> Any:
        """``self[name]``, checking its logical shape against what the config implies."""
        t = self[name]
        if shape is not None and tuple(t.shape) != tuple(shape):
            raise ModelLoadError(
                f"tensor '{name}' has shape {list(t.shape)} but config.json implies {list(shape)}; "
                "the weights do not match the config"
            )
        return t

    @property
    def nbytes(self) -> int:
        return sum(os.path.getsize(f.path) for f in self.files)


def read_json(path: str, what: str) -> dict:
    """Read a JSON file with a one-line error naming ``what`` on failure."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError as exc:
        raise ModelLoadError(f"{what} not found: {path}") from exc
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"{what} at {path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelLoadError(f"{what} at {path} must be a JSON object")
    return data


def load_weights(model_dir: str) -> Weights:
    """Open the weights of a checkpoint or bundle directory (manifest optional)."""
    manifest_path = os.path.join(model_dir, BUNDLE_MANIFEST)
    manifest = read_json(manifest_path, "bundle manifest") if os.path.exists(manifest_path) else None
    return Weights(model_dir, manifest)
