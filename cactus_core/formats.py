"""Tensor formats: the contract between weight files, quantizers and kernels.

Plain float tensors are numpy arrays (``float32``/``float16``).  numpy has no
bfloat16, so bf16 tensors are :class:`BFloat16` views over the raw 16-bit
words, still memory-mapped.  Quantized tensors are :class:`QuantizedTensor`
subclasses, one per format, whose fields are the named safetensors entries of
a bundle (docs/formats.md describes every byte so kernels can be written from
it alone).

Formats defined here:

- ``int4`` / ``int8``: affine integer codes per group of the input dimension,
  ``w = scale * q + bias`` (RTN and GPTQ write these);
- ``cq``: the Cactus Quants format: rows rotated by a randomized Hadamard
  transform, coded with a (scalar or vector) codebook and one scale per group.
  Its :meth:`~CQTensor.dequantize` is the *rotated* matrix; activations get the
  same rotation online through :meth:`~CQTensor.matmul_input_transform`.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from .errors import ModelLoadError


class BFloat16:
    """A bfloat16 tensor kept as its raw ``uint16`` words (zero-copy over the mmap)."""

    format = "bfloat16"

    def __init__(self, raw: np.ndarray):
        if raw.dtype != np.uint16:
            raise TypeError("BFloat16 wraps uint16 words")
        self.raw = raw

    @property
    def shape(self) -> tuple[int, ...]:
        return self.raw.shape

    @property
    def nbytes(self) -> int:
        return self.raw.nbytes

    def __getitem__(self, idx) -> np.ndarray:
        return bf16_to_f32(self.raw[idx])

    def to_float32(self) -> np.ndarray:
        return bf16_to_f32(self.raw)


def bf16_to_f32(raw: np.ndarray) -> np.ndarray:
    """Widen bfloat16 words to float32 exactly (bf16 is the top half of an f32)."""
    return (np.asarray(raw, dtype=np.uint32) << 16).view(np.float32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 words, round-to-nearest-even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounding = ((u >> 16) & 1) + 0x7FFF
    return ((u + rounding) >> 16).astype(np.uint16)


def _e4m3_table() -> np.ndarray:
    """float16 value of each of the 256 float8 E4M3 ("fn": no infinities) codes.

    Sign, four exponent bits (bias 7), three mantissa bits; exponent 0 is
    subnormal, and S.1111.111 is the only NaN. Every code is exact in float16.
    """
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    exp, man = (codes >> 3) & 0xF, codes & 0x7
    mag = np.where(exp == 0, man / 8.0 * 2.0**-6, (1 + man / 8.0) * 2.0 ** (exp - 7.0))
    mag = np.where((codes & 0x7F) == 0x7F, np.nan, mag)
    return (sign * mag).astype(np.float16)


_E4M3 = _e4m3_table()


def f8_to_f16(raw: np.ndarray, kind: str) -> np.ndarray:
    """Widen float8 codes (``uint8``; safetensors ``F8_E4M3`` or ``F8_E5M2``) to float16, exactly.

    E5M2 is the top byte of a float16, so it widens by a shift; E4M3 goes through a
    256-entry table. The result is a new array (numpy has no 8-bit float to view).
    """
    raw = np.asarray(raw, dtype=np.uint8)
    if kind == "F8_E5M2":
        return (raw.astype(np.uint16) << 8).view(np.float16)
    if kind == "F8_E4M3":
        return _E4M3[raw]
    raise ValueError(f"unknown float8 kind {kind}")


class FormatError(ModelLoadError, ValueError):
    """A quantized tensor's fields or meta do not match its format."""


# --- shared building blocks (each is specified in docs/formats.md) -----------


def pack_bits(codes: np.ndarray, bits: int) -> np.ndarray:
    """Pack unsigned ``codes`` (rows, n) into a little-endian bit stream per row.

    Code ``j`` of a row occupies stream bits ``[j*bits, (j+1)*bits)``, least
    significant bit first; stream bit ``k`` is bit ``k % 8`` of byte ``k // 8``.
    Rows are padded to whole bytes.
    """
    codes = np.asarray(codes)
    rows, n = codes.shape
    shifts = np.arange(bits, dtype=np.uint16)
    stream = ((codes[..., None].astype(np.uint16) >> shifts) & 1).astype(np.uint8)
    return np.packbits(stream.reshape(rows, n * bits), axis=1, bitorder="little")


def unpack_bits(packed: np.ndarray, bits: int, n: int) -> np.ndarray:
    """Inverse of :func:`pack_bits`: ``(rows, bytes)`` -> ``(rows, n)`` int32 codes."""
    packed = np.asarray(packed)
    if bits == 8:
        return packed[:, :n].astype(np.int32)
    if bits == 4:  # the common case, without the bit-stream detour
        out = np.empty((packed.shape[0], 2 * packed.shape[1]), dtype=np.int32)
        out[:, 0::2] = packed & 0x0F
        out[:, 1::2] = packed >> 4
        return out[:, :n]
    stream = np.unpackbits(packed, axis=1, bitorder="little")[:, : n * bits]
    weights = (1 << np.arange(bits, dtype=np.int32))
    return (stream.reshape(packed.shape[0], n, bits).astype(np.int32) * weights).sum(-1)


def hadamard(x: np.ndarray, block_size: int) -> np.ndarray:
    """Orthonormal Walsh-Hadamard transform of each ``block_size`` block of the last axis.

    Sylvester (natural) order, scaled by ``1/sqrt(block_size)``, so it is
    symmetric and its own inverse; identical to ``NumpyBackend.hadamard``.
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    n = x.shape[-1]
    if block_size < 1 or block_size & (block_size - 1) or n % block_size:
        raise FormatError(f"hadamard block {block_size} must be a power of two dividing {n}")
    y = x.reshape(-1, block_size).copy()
    h = 1
    while h < block_size:
        # butterfly: element i pairs with i + h inside each run of 2h
        y = y.reshape(y.shape[0], -1, 2, h)
        a = y[:, :, 0, :].copy()
        y[:, :, 0, :] += y[:, :, 1, :]
        y[:, :, 1, :] = a - y[:, :, 1, :]
        y = y.reshape(-1, block_size)
        h *= 2
    return (y / np.float32(math.sqrt(block_size))).reshape(x.shape)


_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def splitmix64(seed: int, count: int) -> np.ndarray:
    """The first ``count`` outputs of SplitMix64 started at ``seed`` (uint64)."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed & 0xFFFFFFFFFFFFFFFF) + _GOLDEN * np.arange(1, count + 1, dtype=np.uint64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def random_signs(seed: int, n: int) -> np.ndarray:
    """The rotation's sign bits for ``n`` columns: 1 = negate (top bit of SplitMix64)."""
    return (splitmix64(seed, n) >> np.uint64(63)).astype(np.uint8)


# --- the base class -----------------------------------------------------------


class QuantizedTensor:
    """Base class of every quantized format.

    A subclass sets ``format`` (the name kernels dispatch on), lists its
    safetensors entries in ``fields`` (stored as ``<tensor name>.<field>``), and
    implements :meth:`dequantize`, the reference every kernel is tested
    against.  ``shape`` is the logical ``(out, in)`` shape.  Bundles rebuild a
    tensor with ``QUANTIZED_FORMATS[fmt](shape, meta, **arrays)``; the arrays
    may be read-only memory maps and are never written to.
    """

    format: ClassVar[str] = "quantized"
    fields: ClassVar[tuple[str, ...]] = ()

    def __init__(self, shape: tuple[int, ...], meta: dict[str, Any], **arrays: np.ndarray):
        self.shape = tuple(int(s) for s in shape)
        self.meta = dict(meta)
        for name in self.fields:
            if name not in arrays:
                raise FormatError(f"{self.format} tensor is missing its '{name}' entry")
        self.arrays = arrays
        self._validate()

    def _validate(self) -> None:
        """Check field dtypes and shapes against ``shape`` and ``meta``."""

    def _expect(self, field: str, dtype, shape: tuple[int, ...]) -> np.ndarray:
        a = self.arrays[field]
        if a.dtype != np.dtype(dtype) or tuple(a.shape) != tuple(shape):
            raise FormatError(
                f"{self.format} field '{field}' is {a.dtype}{list(a.shape)}, "
                f"expected {np.dtype(dtype)}{list(shape)} for shape {list(self.shape)}"
            )
        return a

    def _meta_int(self, key: str) -> int:
        try:
            return int(self.meta[key])
        except (KeyError, TypeError, ValueError):
            raise FormatError(f"{self.format} tensor meta needs an integer '{key}'") from None

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays.values())

    @property
    def bits_per_weight(self) -> float:
        """True storage cost: every code, scale and table byte over the weight count."""
        return 8.0 * self.nbytes / float(np.prod(self.shape))

    def dequantize(self) -> np.ndarray:
        """The float32 ``(out, in)`` matrix that multiplies ``matmul_input_transform(x)``."""
        raise NotImplementedError

    def matmul_input_transform(self, x: np.ndarray) -> np.ndarray:
        """Transform applied to activations before multiplying (identity unless rotated)."""
        return x

    def dequantize_rows(self, ids: np.ndarray) -> np.ndarray:
        """Rows ``ids`` of the original (unrotated) matrix, for embedding lookups."""
        return self.dequantize()[np.asarray(ids, dtype=np.int64)]

    def dequantize_unrotated(self) -> np.ndarray:
        """The whole original-space ``(out, in)`` matrix (``dequantize`` undoing any rotation)."""
        return self.dequantize_rows(np.arange(self.shape[0]))

    def manifest_entry(self) -> dict[str, Any]:
        """This tensor's entry in cactus.json ``quantization.tensors``."""
        return {"format": self.format, "shape": list(self.shape), "meta": dict(self.meta)}

    def named_arrays(self, name: str) -> dict[str, np.ndarray]:
        """The safetensors entries for tensor ``name``: ``{"<name>.<field>": array}``."""
        return {f"{name}.{field}": np.ascontiguousarray(self.arrays[field]) for field in self.fields}


#: format name -> QuantizedTensor subclass; quantizer packages add theirs.
QUANTIZED_FORMATS: dict[str, type[QuantizedTensor]] = {}


def register_format(cls: type[QuantizedTensor]) -> type[QuantizedTensor]:
    """Class decorator that makes a quantized format loadable from bundles."""
    QUANTIZED_FORMATS[cls.format] = cls
    return cls


def from_manifest(entry: dict[str, Any], arrays: dict[str, np.ndarray]) -> QuantizedTensor:
    """Rebuild a tensor from its cactus.json entry and its fields (``{field: array}``)."""
    fmt = entry.get("format")
    cls = QUANTIZED_FORMATS.get(fmt)
    if cls is None:
        known = ", ".join(sorted(QUANTIZED_FORMATS))
        raise FormatError(f"unknown quantized format '{fmt}' (known: {known})")
    return cls(entry["shape"], entry.get("meta", {}), **arrays)


# --- int4 / int8: affine integer groups -----------------------------------------


class _AffineIntTensor(QuantizedTensor):
    """``w[o, i] = scales[o, g] * q[o, i] + biases[o, g]`` with ``g = i // group_size``.

    ``codes`` holds unsigned ``q`` in ``[0, 2**bits)``, packed per row by
    :func:`pack_bits` (int4: two per byte, low nibble first; int8: one byte).
    ``scales`` and ``biases`` are float16 ``(out, in // group_size)``.
    """

    bits: ClassVar[int] = 0
    fields = ("codes", "scales", "biases")

    def _validate(self) -> None:
        if len(self.shape) != 2:
            raise FormatError(f"{self.format} tensors are 2-D, got shape {list(self.shape)}")
        out, n = self.shape
        g = self._meta_int("group_size")
        if g <= 0 or n % g:
            raise FormatError(f"{self.format} group_size {g} must divide the input dim {n}")
        self._expect("codes", np.uint8, (out, n * self.bits // 8))
        self._expect("scales", np.float16, (out, n // g))
        self._expect("biases", np.float16, (out, n // g))

    def _rows(self, ids: np.ndarray) -> np.ndarray:
        n, g = self.shape[1], int(self.meta["group_size"])
        q = unpack_bits(self.arrays["codes"][ids], self.bits, n).astype(np.float32)
        q = q.reshape(len(ids), n // g, g)
        s = self.arrays["scales"][ids].astype(np.float32)[..., None]
        b = self.arrays["biases"][ids].astype(np.float32)[..., None]
        return (q * s + b).reshape(len(ids), n)

    def dequantize(self) -> np.ndarray:
        return self._rows(np.arange(self.shape[0]))

    def dequantize_rows(self, ids: np.ndarray) -> np.ndarray:
        return self._rows(np.asarray(ids, dtype=np.int64).reshape(-1))


@register_format
class Int4Tensor(_AffineIntTensor):
    """4-bit affine groups (RTN int4, GPTQ-4)."""

    format = "int4"
    bits = 4


@register_format
class Int8Tensor(_AffineIntTensor):
    """8-bit affine groups (RTN int8)."""

    format = "int8"
    bits = 8


# --- cq: randomized Hadamard rotation + codebook + group scales ---------------


@register_format
class CQTensor(QuantizedTensor):
    """The Cactus Quants format.

    Offline each row ``w`` (length ``n``) became ``w' = H_b(w * s)``: ``s`` the
    ±1 signs from the ``signs`` bits, ``H_b`` the orthonormal Hadamard transform
    of each ``block_size`` block.  ``w'`` was split into groups of
    ``group_size`` and each group into vectors of ``vec_dim``; vector ``v`` of
    group ``g`` in row ``o`` is ``codebook[idx] * scales[o, g]``.  ``idx`` has
    ``index_bits`` bits, packed per row by :func:`pack_bits`.

    Fields: ``codes`` uint8 ``(out, ceil(n / vec_dim * index_bits / 8))``,
    ``scales`` float16 ``(out, n // group_size)``, ``codebook`` float16
    ``(2**index_bits, vec_dim)``, ``signs`` uint8 ``(n // 8,)`` (bit ``j % 8``
    of byte ``j // 8`` set = column ``j`` negated).  Meta: ``index_bits``,
    ``vec_dim``, ``group_size``, ``block_size``, ``seed`` (informational: how
    ``signs`` were drawn, see :func:`random_signs`).
    """

    format = "cq"
    fields = ("codes", "scales", "codebook", "signs")

    def _validate(self) -> None:
        if len(self.shape) != 2:
            raise FormatError(f"cq tensors are 2-D, got shape {list(self.shape)}")
        out, n = self.shape
        bits, d = self._meta_int("index_bits"), self._meta_int("vec_dim")
        g, b = self._meta_int("group_size"), self._meta_int("block_size")
        if not 1 <= bits <= 16 or d < 1 or g <= 0 or n % g or g % d or n % 8:
            raise FormatError(
                f"cq meta index_bits={bits} vec_dim={d} group_size={g} does not fit input dim {n}"
            )
        if b < 1 or b & (b - 1) or n % b:
            raise FormatError(f"cq block_size {b} must be a power of two dividing {n}")
        self._expect("codes", np.uint8, (out, -(-(n // d) * bits // 8)))
        self._expect("scales", np.float16, (out, n // g))
        self._expect("codebook", np.float16, (1 << bits, d))
        self._expect("signs", np.uint8, (n // 8,))

    @property
    def _sign_vector(self) -> np.ndarray:
        bits = np.unpackbits(np.asarray(self.arrays["signs"]), bitorder="little")
        return (1.0 - 2.0 * bits).astype(np.float32)

    def _rotated_rows(self, ids: np.ndarray) -> np.ndarray:
        n = self.shape[1]
        bits, d, g = (int(self.meta[k]) for k in ("index_bits", "vec_dim", "group_size"))
        idx = unpack_bits(self.arrays["codes"][ids], bits, n // d)
        vals = self.arrays["codebook"].astype(np.float32)[idx].reshape(len(ids), n // g, g)
        scales = self.arrays["scales"][ids].astype(np.float32)[..., None]
        return (vals * scales).reshape(len(ids), n)

    def dequantize(self) -> np.ndarray:
        """The rotated-domain matrix ``W'``; pair it with :meth:`matmul_input_transform`."""
        return self._rotated_rows(np.arange(self.shape[0]))

    def matmul_input_transform(self, x: np.ndarray) -> np.ndarray:
        """``x' = H_b(x * s)``, so that ``x' @ W'.T == x @ W.T`` (the rotation is orthogonal)."""
        x = np.asarray(x, dtype=np.float32)
        return hadamard(x * self._sign_vector, int(self.meta["block_size"]))

    def dequantize_rows(self, ids: np.ndarray) -> np.ndarray:
        """Original-space rows: ``w = s * H_b(w')`` (H_b is its own inverse)."""
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        rows = self._rotated_rows(ids)
        return hadamard(rows, int(self.meta["block_size"])) * self._sign_vector


def to_float32(w: Any) -> np.ndarray:
    """Any weight (ndarray, BFloat16, QuantizedTensor) as a float32 ndarray.

    For a rotated format (``cq``) this is the rotated matrix that multiplies
    ``w.matmul_input_transform(x)``; use ``w.dequantize_unrotated()`` for the
    original-space weights.
    """
    if isinstance(w, np.ndarray):
        return w if w.dtype == np.float32 else w.astype(np.float32)
    if isinstance(w, BFloat16):
        return w.to_float32()
    if isinstance(w, QuantizedTensor):
        return w.dequantize()
    raise TypeError(f"unsupported weight type {type(w).__name__}")
