"""The ``cpu_neon`` backend: thin Python wrappers over the C kernels in csrc/.

Each op checks shapes, makes sure its arrays are contiguous float32 (a no-op
for the activations the engine passes), and hands raw pointers to C with
``ffi.from_buffer``.  Weights are never copied: float16/bfloat16 matrices and
quantized codes are read in place from the memory map and decoded inside the
kernels.  What is not here (conv1d, other quantized formats) falls back to
the next backend through :class:`cactus_core.graph.Ops`.
"""

from __future__ import annotations

import functools
import math
import os
import weakref
from typing import Any, Optional

import numpy as np

from cactus_core import formats as _formats
from cactus_core.device import default_threads
from cactus_core.errors import BackendError
from cactus_core.formats import BFloat16, QuantizedTensor, to_float32
from cactus_core.graph import Backend

from .block import BlockOps

_ACTIVATIONS = {"silu": 0, "gelu": 1, "gelu_tanh": 2, "relu": 3}
_WTYPES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1}
_BF16 = 2
_KV_TYPES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1}
_FLOAT_FORMATS = frozenset({"float32", "float16", "bfloat16"})
#: Quantized formats with native kernels (linear and embedding), when the core defines them.
_QUANT_FORMATS = frozenset(
    name for name, cls in (("cq", "CQTensor"), ("int4", "Int4Tensor"), ("int8", "Int8Tensor"))
    if hasattr(_formats, cls)
)

#: Fused ops over several weights (cactus_core.graph.FUSED_OPS), one C call each.
_FUSED_LINEAR = ("multi_linear", "gated_linear", "decoder_block", "decoder_stack")

_INSTALL_HINT = "reinstall the plugin with: pip install --force-reinstall ./plugins/cpu_neon"


class KernelArgumentError(BackendError, ValueError):
    """Arguments a kernel cannot take (shapes, kinds); also a ValueError like numpy_ref's."""


#: Newest C entry points this Python side calls: a module built from older sources
#: lacks them, and would otherwise fail on the first fused op of a decode.
_REQUIRED = ("cn_cq_linear_multi", "cn_linear_multi", "cn_rope_qk", "cn_cached_attention", "cn_decoder_block",
             "cn_decoder_stack")


def load_kernels():
    """The compiled cffi module; raises ImportError when the plugin was not built, or was
    built from older sources than this Python code."""
    from . import _kernels

    missing = [name for name in _REQUIRED if not hasattr(_kernels.lib, name)]
    if missing:
        raise ImportError(f"the compiled kernels predate this plugin's Python code (no {missing[0]})")
    return _kernels


def unavailable_reason() -> Optional[str]:
    """None when the compiled kernels import, else one line saying why not and how to fix it."""
    try:
        load_kernels()
    except ImportError as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"native kernels not built or not loadable ({first}); {_INSTALL_HINT}"
    return None


#: x as contiguous float32 (a no-op for the engine's activations).  A partial of
#: a C function: no Python frame per call, and ops make several per call.
_f32 = functools.partial(np.ascontiguousarray, dtype=np.float32)


def _vector(w: Any, n: int, what: str) -> np.ndarray:
    """A small per-channel parameter (norm weight, bias) as contiguous float32 of length n."""
    v = _f32(to_float32(w) if isinstance(w, BFloat16) else w).reshape(-1)
    if v.shape[0] != n:
        raise KernelArgumentError(f"{what} has {v.shape[0]} values but the input has {n} channels")
    return v


def _matrix(w: Any, what: str) -> tuple[np.ndarray, int]:
    """(contiguous 2-D raw array, wtype code) for a float32/float16/bfloat16 weight."""
    if isinstance(w, BFloat16):
        raw, wtype = w.raw, _BF16
    else:
        wtype = _WTYPES.get(getattr(w, "dtype", None))
        if wtype is None:
            raise KernelArgumentError(
                f"cpu_neon {what} takes float32, float16 or bfloat16 weights, not {type(w).__name__} "
                f"{getattr(w, 'dtype', '')}"
            )
        raw = w
    if raw.ndim != 2:
        raise KernelArgumentError(f"{what} weight must be 2-D, got shape {tuple(raw.shape)}")
    if not raw.flags.c_contiguous:
        raw = np.ascontiguousarray(raw)  # only views made by callers; mmapped weights are contiguous
    return raw, wtype


def _setting(value: Optional[bool], env_name: str) -> Optional[bool]:
    """True / False as given; None reads ``env_name`` (0, 1 or auto), auto being None."""
    if value is not None:
        return bool(value)
    env = os.environ.get(env_name, "").strip().lower()
    if env in ("", "auto"):
        return None
    if env in ("0", "false", "no", "off"):
        return False
    if env in ("1", "true", "yes", "on"):
        return True
    raise KernelArgumentError(f"{env_name} must be 0, 1 or auto, not {env!r}")


def int8_activations_setting(value: Optional[bool] = None) -> Optional[bool]:
    """The int8-activation decode setting: as given, else ``CACTUS_INT8_ACT`` (None = auto)."""
    return _setting(value, "CACTUS_INT8_ACT")


def quantize_codebook(codebook: np.ndarray, limit: int = 127) -> Optional[tuple[np.ndarray, float]]:
    """A CQ codebook (entries, vec_dim) as int8 planes (vec_dim, entries) and their scale.

    One scale for the whole table, from its largest magnitude, so nothing is
    clipped; entry (c, e) is about ``planes[e, c] * scale`` with ``|planes| <= limit``
    (``cn_cq_i8_cb_limit``: 63 where the kernel adds an offset).  An equally spaced
    scalar table (codebooks.uniform_grid) goes in exactly, as the odd integers
    ``2k - (K - 1)``: the AVX2 kernel recognises them and multiplies codes directly.
    None for a codebook with non-finite entries (the exact kernel then runs, and shows them).
    """
    cb = np.asarray(codebook, dtype=np.float32)
    if not np.isfinite(cb).all():
        return None
    odd = 2 * np.arange(len(cb)) - (len(cb) - 1)
    if cb.shape[1:] == (1,) and len(cb) <= limit + 1 and cb[-1, 0] > 0:
        step = cb[-1, 0] / np.float32(len(cb) - 1)
        if np.array_equal(cb[:, 0], odd.astype(np.float32) * step):
            return odd.astype(np.int8)[None, :], float(step)
    amax = float(np.abs(cb).max()) if cb.size else 0.0
    scale = amax / limit if amax > 0 else 1.0
    q = np.clip(np.rint(cb / scale), -limit, limit).astype(np.int8)
    return np.ascontiguousarray(q.T), scale


def _check_features(x: np.ndarray, K: int) -> int:
    """Rows of x for a weight with K inputs (M of the M x K product)."""
    if x.ndim == 0 or x.shape[-1] != K:
        raise KernelArgumentError(f"linear: input has {x.shape[-1] if x.ndim else 0} features, weight expects {K}")
    return math.prod(x.shape[:-1])


def _kv_views(k: Any, v: Any) -> tuple[np.ndarray, np.ndarray, int, tuple[int, int]]:
    """k and v as float32 or float16 arrays whose rows of d values are contiguous,
    their type code, and their shared (batch, head) element strides.

    The engine passes ``cache[:, :, :S]`` views of a preallocated KV cache:
    rows are contiguous but heads sit ``max_len * d`` apart.  Such views, in
    float32 or float16 (a half-size cache), are used in place; anything else
    is made contiguous float32 (a copy).
    """

    def usable(a):
        if not isinstance(a, np.ndarray) or a.dtype not in _KV_TYPES:
            return False
        es = a.itemsize
        return a.strides[3] == es and a.strides[2] == es * a.shape[3] and not (a.strides[0] % es or a.strides[1] % es)

    if not (usable(k) and usable(v) and k.dtype == v.dtype and k.strides == v.strides):
        k, v = _f32(k), _f32(v)
    B, H, S, d = k.shape
    # Axes of length 1 may carry any stride; give them the contiguous one.
    s0 = k.strides[0] // k.itemsize if B > 1 else H * S * d
    s1 = k.strides[1] // k.itemsize if H > 1 else S * d
    return k, v, _KV_TYPES[k.dtype], (s0, s1)


class NeonBackend(BlockOps, Backend):
    """C kernels written with NEON intrinsics (native on arm64, through SIMDe elsewhere)."""

    name = "cpu_neon"
    _arg_error = KernelArgumentError
    formats = _FLOAT_FORMATS | _QUANT_FORMATS
    #: attention reads float16 K/V views in place, so the generator keeps a half-size cache
    kv_dtype = "float16"

    def __init__(self, threads: Optional[int] = None, int8_activations: Optional[bool] = None,
                 bf16_prefill: Optional[bool] = None):
        """``int8_activations``: CQ4/CQ3/CQ2 decode (one token) with int8 activations and
        integer dot products, not exact (docs/cpu_neon.md).  None reads
        ``CACTUS_INT8_ACT`` (0, 1, auto); auto, the default, uses it where this
        build's kernel was measured faster than the exact decode (x86 with
        AVX-512 VBMI and VNNI); on (1, True) also uses arm64's NEON kernel,
        whose speed is not measured yet.  Builds that emulate NEON through
        SIMDe without those x86 instructions never use it (it would be far
        slower).

        ``bf16_prefill``: CQ prefill (several tokens) with bfloat16 products,
        not exact either; None reads ``CACTUS_BF16_PREFILL`` (0, 1, auto).  Auto
        and 1 both mean on where the CPU has AVX512_BF16 (twice the float32
        GEMM there), the only place with a kernel for it.  Other weight formats
        and attention stay exact."""
        self.int8_activations = int8_activations_setting(int8_activations)
        bf16 = _setting(bf16_prefill, "CACTUS_BF16_PREFILL")
        mod = load_kernels()
        self._ffi, self._lib = mod.ffi, mod.lib
        self.threads = int(threads or default_threads())
        self._lib.cn_set_threads(self.threads)
        self.native_neon = bool(self._lib.cn_native_neon())
        self.threading = ("none", "OpenMP", "thread pool")[self._lib.cn_threading()]
        #: whether CQ prefill runs in bfloat16 (the kernel ignores it without AVX512_BF16)
        self.bf16_prefill = bf16 is not False and bool(self._lib.cn_gemm_bf16_available())
        # Per quantized tensor: its sign vector, float32 and int8 codebooks and
        # C pointers, built on first use and dropped with the tensor.  Keyed by
        # id with a weak reference: a WeakKeyDictionary lookup makes a new
        # weakref on every call, ~1 us of the ~200 CQ calls per token.
        self._cq_tables: dict[int, tuple[Any, tuple]] = {}
        # float* of a contiguous float32 array; a C-level partial like _f32.
        self._fp = functools.partial(self._ffi.from_buffer, "float[]")
        # Small parameters (norm weights): id -> (weakref, float32 vector), see _param.
        self._widened: dict[int, tuple[Any, np.ndarray]] = {}
        # Fused linears: weight ids -> (weakrefs, C weight array, N per weight), see _group.
        self._groups: dict[tuple[int, ...], tuple] = {}
        # CQ sign vectors by their packed bytes and block: tensors quantized with one
        # seed share one array, so a fused call rotates x once for all of them.
        self._signs: dict[tuple[bytes, int], np.ndarray] = {}
        # decoder_block: C arguments per block object and per cache layer (block.py);
        # decoder_stack: arrays of those per model and cache.
        self._blocks: dict[int, tuple] = {}
        self._caches: dict[tuple[int, int], tuple] = {}
        self._stacks: dict[tuple[int, int], tuple] = {}

    def supports(self, op: str, fmt: Optional[str] = None) -> bool:
        """Quantized formats for linear and embedding lookups only, and CQ (not int4/int8)
        for the fused linears and decoder_block."""
        if fmt in _QUANT_FORMATS and op not in ("linear", "embedding"):
            if not (fmt == "cq" and op in _FUSED_LINEAR):
                return False
        return super().supports(op, fmt)

    def _param(self, w: Any, n: int, what: str) -> np.ndarray:
        """:func:`_vector`, cached per weight: a 16-bit norm weight is widened once, not per
        token, and a contiguous float32 one (used through a view, so in-place changes
        still show) skips the checks (~1 us, 113 calls a token on Qwen3-0.6B)."""
        hit = self._widened.get(id(w))
        if hit is not None and hit[0]() is w and hit[1].shape[0] == n:
            return hit[1]
        v = _vector(w, n, what)
        if isinstance(w, np.ndarray) and w.size <= 1 << 16 and (w.dtype != np.float32 or np.may_share_memory(v, w)):
            self._widened[id(w)] = (weakref.ref(w), v)
        return v

    def _ptr(self, a: np.ndarray):
        """void* to a strided view (from_buffer takes contiguous buffers only).

        The caller keeps ``a`` alive for the duration of the C call.
        """
        return self._ffi.cast("void *", a.__array_interface__["data"][0])

    def describe(self) -> str:
        """One line for reports: instruction path and threads."""
        path = "native NEON" if self.native_neon else "NEON via SIMDe"
        threads = f"{self.threads} threads, {self.threading}" if self.threading != "none" else "1 thread"
        # every CQ layout, or (AVX2 without VBMI) scalar codes (CQ4's 4 bits and its widened 5 and 6)
        # and CQ3's 6-bit 2-vectors: not the 8-bit codes of CQ2
        i8 = ("int8 CQ decode" if self._int8_for(8, 2) else "int8 CQ4/CQ3 decode" if self._int8_for(6, 2)
              else "int8 CQ4 decode" if self._int8_for(4, 1) else "")
        bf16 = "bf16 CQ prefill on AMX" if self._lib.cn_gemm_amx_available() else "bf16 CQ prefill"
        fast = [name for name, on in ((i8, bool(i8)), (bf16, self.bf16_prefill)) if on]
        return f"cpu_neon ({path}, {', '.join([threads] + fast)})"

    # --- matrix products -------------------------------------------------
    def linear(self, x, w, bias=None):
        x = _f32(x)
        if isinstance(w, QuantizedTensor):
            if w.format in ("int4", "int8"):
                return self._affine_linear(x, w, bias)
            return self._cq_linear(x, w, bias)
        raw, wtype = _matrix(w, "linear")
        N, K = raw.shape
        M = _check_features(x, K)
        y = np.empty(x.shape[:-1] + (N,), dtype=np.float32)
        b = self._ffi.NULL if bias is None else self._fp(_vector(bias, N, "linear bias"))
        self._lib.cn_linear(self._fp(x), M, K, self._ffi.from_buffer(raw), wtype, N, b, self._fp(y))
        return y

    def _cq_prepared(self, w) -> tuple:
        """cn_cq_linear's C arguments for a CQ tensor (see :meth:`_cq_prep`)."""
        return self._cq_prep(w)[1]

    def _cached(self, w, make) -> tuple:
        """make(w), once per tensor: kept while w lives, dropped with it."""
        hit = self._cq_tables.get(id(w))
        if hit is not None and hit[0]() is w:
            return hit[1]
        prep, key, table = make(w), id(w), self._cq_tables
        table[key] = (weakref.ref(w, lambda _, k=key: table.pop(k, None)), prep)
        return prep

    def _cq_prep(self, w) -> tuple:
        """(arrays kept alive, exact kernel's C arguments, int8 kernel's or None) of a CQ
        tensor, made once per tensor and dropped with it.

        Decode calls linear a few hundred times per token: building cffi
        buffers and float32 tables on every call was a measurable share of
        the Python time per token (docs/cpu_neon.md).
        """
        return self._cached(w, self._make_cq_prep)

    def _make_cq_prep(self, w) -> tuple:
        if w.format not in _QUANT_FORMATS:
            raise KernelArgumentError(f"cpu_neon has no kernel for {w.format} weights")
        meta, buf = w.meta, self._ffi.from_buffer
        packed = np.asarray(w.arrays["signs"])
        key = (packed.tobytes(), int(meta["block_size"]))
        signs = self._signs.get(key)
        if signs is None:
            signs = (1.0 - 2.0 * np.unpackbits(packed, bitorder="little")).astype(np.float32)
            self._signs[key] = signs
        codebook = _f32(w.arrays["codebook"])
        codes = np.ascontiguousarray(w.arrays["codes"])
        scales = np.ascontiguousarray(w.arrays["scales"])
        bits, d, group = int(meta["index_bits"]), int(meta["vec_dim"]), int(meta["group_size"])
        layout = (buf("uint8_t[]", codes), codes.shape[1], bits, d, buf("uint16_t[]", scales), group)
        args = layout + (self._fp(codebook), self._fp(signs), int(meta["block_size"]))
        i8 = planes = None
        quantized = (quantize_codebook(codebook, self._lib.cn_cq_i8_cb_limit(bits, d))
                     if self._int8_for(bits, d) and group % 8 == 0 else None)
        if quantized is not None:
            planes, cb_scale = quantized
            i8 = layout + (buf("int8_t[]", planes), cb_scale, self._fp(signs), int(meta["block_size"]))
        keep = (signs, codebook, codes, scales, planes)  # the arrays the pointers above point into
        return keep, args, i8

    def _int8_for(self, bits: int, d: int) -> bool:
        """Whether decode of this CQ layout takes the int8-activation kernel: on request
        where the build has a native kernel, by default where it was measured faster."""
        if self.int8_activations is False:
            return False
        return self._lib.cn_cq_i8_kernel(bits, d) >= (1 if self.int8_activations else 2)

    def _cq_linear(self, x, w, bias):
        _, args, i8 = self._cq_prep(w)
        N, K = w.shape
        M = _check_features(x, K)
        y = np.empty(x.shape[:-1] + (N,), dtype=np.float32)
        b = self._ffi.NULL if bias is None else self._fp(_vector(bias, N, "linear bias"))
        # The kernels rotate x (x' = H(x * s)) themselves, once per call.
        if M == 1 and i8 is not None:
            rc = self._lib.cn_cq_linear_i8(self._fp(x), M, K, *i8, N, b, self._fp(y))
        else:
            rc = self._lib.cn_cq_linear(self._fp(x), M, K, *args, N, b, self._fp(y), self.bf16_prefill)
        if rc != 0:
            raise KernelArgumentError(f"cpu_neon cannot run cq layout {w.meta}" if rc == -1 else
                                      "cpu_neon cq linear: out of memory")
        return y

    def _affine_prepared(self, w) -> tuple:
        """(codes, bits, scales, biases, group) C arguments of an int4/int8 tensor, made once."""
        return self._cached(w, self._make_affine_prep)[1]

    def _make_affine_prep(self, w) -> tuple:
        codes = np.ascontiguousarray(w.arrays["codes"])
        scales = np.ascontiguousarray(w.arrays["scales"])
        biases = np.ascontiguousarray(w.arrays["biases"])
        buf = self._ffi.from_buffer
        args = (buf("uint8_t[]", codes), 4 if w.format == "int4" else 8, buf("uint16_t[]", scales),
                buf("uint16_t[]", biases), int(w.meta["group_size"]))
        return (codes, scales, biases), args

    def _affine_linear(self, x, w, bias):
        N, K = w.shape
        M = _check_features(x, K)
        y = np.empty(x.shape[:-1] + (N,), dtype=np.float32)
        b = self._ffi.NULL if bias is None else self._fp(_vector(bias, N, "linear bias"))
        rc = self._lib.cn_affine_linear(self._fp(x), M, K, *self._affine_prepared(w), N, b, self._fp(y))
        if rc != 0:
            raise KernelArgumentError(f"cpu_neon cannot run {w.format} layout {w.meta}")
        return y

    # --- fused linears (several weights reading one x) ------------------------
    def multi_linear(self, x, ws, biases=None, norm=None):
        x = _f32(x)
        kind, arr, Ns, K, keep = self._group(ws, biases)  # keep: bias vectors alive for the call
        M = _check_features(x, K)
        y = np.empty(M * sum(Ns), dtype=np.float32)
        self._run_group(kind, x, M, K, arr, y, -1, norm)
        outs, lead, at = [], x.shape[:-1], 0
        for N in Ns:  # weight i's rows sit one after another in y: contiguous views
            outs.append(y[at : at + M * N].reshape(lead + (N,)))
            at += M * N
        return outs

    def gated_linear(self, x, gate, up, kind, gate_bias=None, up_bias=None, norm=None):
        code = _ACTIVATIONS.get(kind)
        if code is None:
            raise KernelArgumentError(f"unknown activation '{kind}'; expected one of {', '.join(_ACTIVATIONS)}")
        x = _f32(x)
        biases = None if gate_bias is None and up_bias is None else (gate_bias, up_bias)
        wkind, arr, Ns, K, keep = self._group((gate, up), biases)
        if Ns[0] != Ns[1]:
            raise KernelArgumentError(f"gated_linear: gate has {Ns[0]} outputs but up has {Ns[1]}")
        M = _check_features(x, K)
        y = np.empty(x.shape[:-1] + (Ns[0],), dtype=np.float32)
        self._run_group(wkind, x, M, K, arr, y, code, norm)
        return y

    def _run_group(self, kind, x, M, K, arr, y, gated, norm):
        """One C call for the group; ``norm`` (weight, eps, unit_offset) RMS-normalises x in it."""
        nw, eps, unit = self._ffi.NULL, 0.0, 0
        if norm is not None:
            weight, eps, *unit_offset = norm  # as rms_norm's arguments: unit_offset may be left out
            nw = self._fp(self._param(weight, K, "norm weight"))
            eps, unit = float(eps), int(bool(unit_offset and unit_offset[0]))
        if kind == "cq":
            rc = self._lib.cn_cq_linear_multi(self._fp(x), M, K, len(arr), arr, self._fp(y), nw, eps, unit,
                                              self.bf16_prefill, 1, gated)
        else:
            rc = self._lib.cn_linear_multi(self._fp(x), M, K, len(arr), arr, self._fp(y), nw, eps, unit, gated)
        if rc != 0:
            raise KernelArgumentError("cpu_neon fused linear: out of memory" if rc == -2 else
                                      "cpu_neon cannot run these weights' layouts in one fused call")

    def _group(self, ws, biases):
        """("cq" or "float", C array of the weights, outputs per weight, inputs, arrays to keep
        alive) of a group of weights: built once per group, used while the very same weight
        objects come back (checked by identity), dropped when one of them dies."""
        key = tuple(map(id, ws))
        hit = self._groups.get(key)
        if hit is None or any(r() is not w for r, w in zip(hit[0], ws)):
            hit = self._make_group(key, ws)
        _, kind, arr, Ns, K, keep = hit
        if biases is not None:
            if len(biases) != len(Ns):
                raise KernelArgumentError(f"fused linear: {len(biases)} biases for {len(Ns)} weights")
            if any(b is not None for b in biases):
                arr, vecs = self._with_biases(kind, arr, Ns, biases)
                keep = (keep, vecs)
        return kind, arr, Ns, K, keep

    def _make_group(self, key, ws) -> tuple:
        if not 1 <= len(ws) <= 8:
            raise KernelArgumentError(f"fused linear takes 1 to 8 weights, not {len(ws)}")
        Ks = {int(w.shape[1]) if len(w.shape) == 2 else -1 for w in ws}
        if len(Ks) != 1 or -1 in Ks:
            raise KernelArgumentError(f"fused linear weights must be 2-D with one input size, got "
                                      f"{[tuple(w.shape) for w in ws]}")
        K, Ns = Ks.pop(), [int(w.shape[0]) for w in ws]
        if all(isinstance(w, QuantizedTensor) and w.format == "cq" for w in ws):
            kind, arr = "cq", self._ffi.new("cn_cq_weight[]", len(ws))
            keep = [self._cq_prep(w) for w in ws]  # codes, scales, tables: not the tensors themselves
            for c, (_, args, i8), N in zip(arr, keep, Ns):
                (c.codes, c.stride, c.index_bits, c.vec_dim, c.scales, c.group, c.codebook, c.signs,
                 c.block) = args
                c.N = N
                if i8 is not None:
                    c.cb_q8, c.cb_scale = i8[6], i8[7]
        else:
            kind, arr, keep = "float", self._ffi.new("cn_float_weight[]", len(ws)), []
            for c, w, N in zip(arr, ws, Ns):
                raw, c.wtype = _matrix(w, "fused linear")
                c.w, c.N = self._ffi.from_buffer(raw), N  # the struct holds the address, not the array
                if raw is not getattr(w, "raw", w):
                    keep.append(raw)  # a contiguous copy only the group holds
        table = self._groups
        refs = [weakref.ref(w, lambda _, k=key: table.pop(k, None)) for w in ws]
        hit = table[key] = (refs, kind, arr, Ns, K, keep)
        return hit

    def _with_biases(self, kind, arr, Ns, biases):
        """A copy of a group's C array with this call's biases (models with q/k/v biases)."""
        out = self._ffi.new("cn_cq_weight[]" if kind == "cq" else "cn_float_weight[]", len(Ns))
        self._ffi.memmove(out, arr, self._ffi.sizeof(arr))
        vecs = [None if b is None else _vector(b, N, "linear bias") for b, N in zip(biases, Ns)]
        for c, v in zip(out, vecs):
            if v is not None:
                c.bias = self._fp(v)
        return out, vecs

    def embedding(self, table, ids):
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        vocab, D = table.shape
        if ids.size and (ids.min() < 0 or ids.max() >= vocab):
            raise KernelArgumentError(f"token id out of range: ids must lie in [0, {vocab})")
        out = np.empty(ids.shape + (D,), dtype=np.float32)
        idp = self._ffi.from_buffer("int64_t[]", ids)
        if isinstance(table, QuantizedTensor):
            # Rows are decoded straight from the quantized table (mmapped, in place).
            if table.format in ("int4", "int8"):
                rc = self._lib.cn_affine_embedding(*self._affine_prepared(table), vocab, D, idp, ids.size,
                                                   self._fp(out))
            else:
                rc = self._lib.cn_cq_embedding(*self._cq_prepared(table), vocab, D, idp, ids.size, self._fp(out))
            if rc != 0:
                raise KernelArgumentError(f"cpu_neon cannot look up {table.format} layout {table.meta}")
            return out
        raw, wtype = _matrix(table, "embedding")
        self._lib.cn_embedding(self._ffi.from_buffer(raw), wtype, D, idp, ids.size, self._fp(out))
        return out

    # --- normalisation and position ----------------------------------------
    def rms_norm(self, x, weight, eps, unit_offset=False):
        x = _f32(x)
        D = x.shape[-1]
        w = self._param(weight, D, "rms_norm weight")
        out = np.empty_like(x)
        self._lib.cn_rms_norm(self._fp(x), self._fp(w), self._fp(out), x.size // max(D, 1), D,
                              float(eps), int(bool(unit_offset)))
        return out

    def layer_norm(self, x, weight, bias, eps):
        x = _f32(x)
        D = x.shape[-1]
        w = self._ffi.NULL if weight is None else self._fp(self._param(weight, D, "layer_norm weight"))
        b = self._ffi.NULL if bias is None else self._fp(self._param(bias, D, "layer_norm bias"))
        out = np.empty_like(x)
        self._lib.cn_layer_norm(self._fp(x), w, b, self._fp(out), x.size // max(D, 1), D, float(eps))
        return out

    @staticmethod
    def _rope_args(op: str, x, positions, inv_freq):
        """(L, head_dim, positions as float64, inv_freq as float32, rotary half) after the checks."""
        L, hd = x.shape[-2], x.shape[-1]
        pos = np.ascontiguousarray(positions, dtype=np.float64).reshape(-1)
        inv = _f32(inv_freq).reshape(-1)
        half = inv.shape[0]
        if pos.shape[0] != L:
            raise KernelArgumentError(f"{op}: {pos.shape[0]} positions for a sequence of length {L}")
        if 2 * half > hd:
            raise KernelArgumentError(f"{op}: rotary dim {2 * half} exceeds head_dim {hd}")
        return L, hd, pos, inv, half

    def rope(self, x, positions, inv_freq):
        x = _f32(x)
        L, hd, pos, inv, half = self._rope_args("rope", x, positions, inv_freq)
        out = np.empty_like(x)
        if self._lib.cn_rope(self._fp(x), self._fp(out), x.size // max(L * hd, 1), L, hd,
                             self._ffi.from_buffer("double[]", pos), self._fp(inv), half):
            raise KernelArgumentError("cpu_neon rope: out of memory")
        return out

    def rope_qk(self, q, k, positions, inv_freq, q_norm=None, k_norm=None, eps=1e-6, unit_offset=False):
        q, k = _f32(q), _f32(k)
        if q.ndim < 2 or k.shape[-2:] != q.shape[-2:]:
            raise KernelArgumentError(f"rope_qk: queries {q.shape} and keys {k.shape} need the same (L, head_dim)")
        L, hd, pos, inv, half = self._rope_args("rope_qk", q, positions, inv_freq)
        null, fp = self._ffi.NULL, self._fp
        qn = null if q_norm is None else fp(self._param(q_norm, hd, "q_norm weight"))
        kn = null if k_norm is None else fp(self._param(k_norm, hd, "k_norm weight"))
        qo, ko = np.empty_like(q), np.empty_like(k)
        rows = max(L * hd, 1)
        if self._lib.cn_rope_qk(fp(q), fp(k), fp(qo), fp(ko), q.size // rows, k.size // rows, L, hd,
                                self._ffi.from_buffer("double[]", pos), fp(inv), half, qn, kn, float(eps),
                                int(bool(unit_offset))):
            raise KernelArgumentError("cpu_neon rope_qk: out of memory")
        return qo, ko

    # --- attention -----------------------------------------------------------
    def attention(self, q, k, v, *, scale, q_offset=0, causal=True, sliding_window=None,
                  softcap=None, mask=None):
        q = _f32(q)
        kshape, vshape = getattr(k, "shape", None), getattr(v, "shape", None)
        if q.ndim != 4 or kshape is None or len(kshape) != 4 or kshape != vshape:
            raise KernelArgumentError(
                f"attention wants q (B,Hq,L,d) and k, v (B,Hkv,S,d); got {q.shape}, {kshape}, {vshape}"
            )
        B, Hq, L, d = q.shape
        Hkv, S = k.shape[1], k.shape[2]
        if k.shape[0] != B or k.shape[3] != d or Hkv == 0 or Hq % Hkv:
            raise KernelArgumentError(f"attention: k/v shape {k.shape} does not fit q shape {q.shape}")
        k, v, kvtype, kv_strides = _kv_views(k, v)
        out = np.empty_like(q)
        m, strides = self._ffi.NULL, (0, 0, 0, 0)
        if mask is not None:
            mask = _f32(mask)
            try:
                view = np.broadcast_to(mask, (B, Hq, L, S))
            except ValueError:
                raise KernelArgumentError(
                    f"attention mask of shape {mask.shape} does not broadcast to {(B, Hq, L, S)}"
                ) from None
            m, strides = self._fp(mask), tuple(s // 4 for s in view.strides)
        window = -1 if sliding_window is None else int(sliding_window)
        cap = 0.0 if not softcap else float(softcap)
        self._lib.cn_attention(self._fp(q), self._ptr(k), self._ptr(v), kvtype, self._fp(out), B, Hq,
                               Hkv, L, S, d, float(scale), int(q_offset), int(bool(causal)), window,
                               cap, m, *strides, *kv_strides)
        return out

    def cached_attention(self, q, k, v, cache_k, cache_v, offset, *, scale, sliding_window=None, softcap=None):
        q, k, v = _f32(q), _f32(k), _f32(v)
        if q.ndim != 4 or k.ndim != 4 or k.shape != v.shape:
            raise KernelArgumentError(
                f"cached_attention wants q (B,Hq,L,d) and k, v (B,Hkv,L,d); got {q.shape}, {k.shape}, {v.shape}"
            )
        B, Hq, L, d = q.shape
        Hkv = k.shape[1]
        if k.shape[0] != B or k.shape[2:] != (L, d) or Hkv == 0 or Hq % Hkv:
            raise KernelArgumentError(f"cached_attention: k/v shape {k.shape} does not fit q shape {q.shape}")
        kvtype = _KV_TYPES.get(getattr(cache_k, "dtype", None))
        shape = getattr(cache_k, "shape", ())
        if (kvtype is None or getattr(cache_v, "dtype", None) != cache_k.dtype or getattr(cache_v, "shape", ()) != shape
                or len(shape) != 4 or not (cache_k.flags.c_contiguous and cache_v.flags.c_contiguous)
                or not (cache_k.flags.writeable and cache_v.flags.writeable)):
            # not a layer of a preallocated float32/float16 cache: numpy stores, the kernel attends
            return Backend.cached_attention(self, q, k, v, cache_k, cache_v, offset, scale=scale,
                                            sliding_window=sliding_window, softcap=softcap)
        if shape[:2] != (B, Hkv) or shape[3] != d or not 0 <= offset <= shape[2] - L:
            raise KernelArgumentError(f"cached_attention: {L} new positions at {offset} do not fit a cache "
                                      f"of shape {shape} for keys {k.shape}")
        out = np.empty_like(q)
        window = -1 if sliding_window is None else int(sliding_window)
        buf, fp = self._ffi.from_buffer, self._fp
        own = int(offset == 0 and kvtype != 0)  # a first chunk attends over its own float32 K/V
        self._lib.cn_cached_attention(fp(q), fp(k), fp(v), buf(cache_k), buf(cache_v), kvtype, fp(out), B, Hq, Hkv,
                                      L, d, shape[2], int(offset), float(scale), window,
                                      0.0 if not softcap else float(softcap), own)
        return out

    # --- elementwise ---------------------------------------------------------
    def activation(self, x, kind):
        code = _ACTIVATIONS.get(kind)
        if code is None:
            raise KernelArgumentError(f"unknown activation '{kind}'; expected one of {', '.join(_ACTIVATIONS)}")
        x = _f32(x)
        out = np.empty_like(x)
        self._lib.cn_activation(self._fp(x), self._fp(out), x.size, code)
        return out

    def gated_activation(self, gate, up, kind):
        code = _ACTIVATIONS.get(kind)
        if code is None:
            raise KernelArgumentError(f"unknown activation '{kind}'; expected one of {', '.join(_ACTIVATIONS)}")
        gate, up = _f32(gate), _f32(up)
        if gate.shape != up.shape:
            raise KernelArgumentError(f"gated_activation: gate {gate.shape} and up {up.shape} differ in shape")
        out = np.empty_like(gate)
        self._lib.cn_gated_activation(self._fp(gate), self._fp(up), self._fp(out), gate.size, code)
        return out

    def softmax(self, x, axis=-1):
        x = _f32(x)
        if x.ndim == 0:
            return np.ones_like(x)
        axis = axis % x.ndim
        if axis != x.ndim - 1:  # rare: move the axis last, run, move it back
            return np.ascontiguousarray(np.moveaxis(self.softmax(np.moveaxis(x, axis, -1)), -1, axis))
        out = np.empty_like(x)
        n = x.shape[-1]
        self._lib.cn_softmax(self._fp(x), self._fp(out), x.size // max(n, 1), n)
        return out

    def hadamard(self, x, block_size):
        x = _f32(x)
        n = x.shape[-1]
        bs = int(block_size)
        if bs <= 0 or bs & (bs - 1) or n % bs:
            raise KernelArgumentError(f"hadamard block {block_size} must be a power of two dividing {n}")
        out = np.empty_like(x)
        self._lib.cn_hadamard(self._fp(x), self._fp(out), x.size // max(n, 1), n, bs)
        return out


def create(threads: Optional[int] = None, int8_activations: Optional[bool] = None,
           bf16_prefill: Optional[bool] = None) -> NeonBackend:
    """Factory registered by the plugin; threads default to ``CACTUS_THREADS`` or physical cores,
    int8 decode and bfloat16 prefill to ``CACTUS_INT8_ACT`` / ``CACTUS_BF16_PREFILL``
    (auto: on where measured faster)."""
    return NeonBackend(threads, int8_activations, bf16_prefill)


__all__ = ["NeonBackend", "KernelArgumentError", "create", "unavailable_reason", "load_kernels",
           "int8_activations_setting", "quantize_codebook"]
