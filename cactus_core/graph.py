"""The op interface every kernel backend implements, and per-op dispatch.

Activations are C-contiguous ``float32`` numpy arrays.  Weights are whatever
:mod:`cactus_core.weights` hands out: numpy arrays memory-mapped from the
safetensors file (``float32`` or ``float16``), :class:`formats.BFloat16` views,
or :class:`formats.QuantizedTensor`.  Backends may keep prepared copies of
weights (repacked, converted, uploaded) in :meth:`Backend.prepare`, but must
return plain numpy ``float32`` activations so that any op can fall back to the
next backend by priority, ending at numpy_ref.

Shapes follow mlx-lm: ``x`` is ``(B, L, D)``; attention heads are
``(B, H, L, head_dim)``.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from .errors import BackendError

#: Every op of the interface, in the order docs/architecture.md lists them.
OPS: tuple[str, ...] = (
    "linear",
    "embedding",
    "rms_norm",
    "layer_norm",
    "rope",
    "attention",
    "activation",
    "gated_activation",
    "softmax",
    "hadamard",
    "conv1d",
)

#: Activation names understood by ``activation`` and ``gated_activation``.
ACTIVATIONS = ("silu", "gelu", "gelu_tanh", "relu")


def weight_format(w: Any) -> str:
    """The format name of a weight: a numpy dtype name or a quantized format name."""
    fmt = getattr(w, "format", None)
    if fmt is not None:
        return fmt
    return np.dtype(w.dtype).name


class Backend:
    """Base class of a kernel backend.

    Subclasses set ``name`` and implement any subset of :data:`OPS`; the
    default :meth:`supports` says yes for every op the class overrides and every
    weight format listed in ``formats`` (``None`` means all).  Missing ops fall
    back to the next backend by priority.
    """

    name: str = "base"
    #: Weight formats this backend's ``linear``/``embedding`` accept; None = all.
    formats: Optional[frozenset[str]] = None

    def supports(self, op: str, fmt: Optional[str] = None) -> bool:
        """Whether this backend implements ``op`` for weights of format ``fmt``."""
        impl = getattr(type(self), op, None)
        if impl is None or impl is getattr(Backend, op, None):
            return False
        return fmt is None or self.formats is None or fmt in self.formats

    def prepare(self, w: Any) -> Any:
        """Hook to convert or repack a weight once at load; default: use in place."""
        return w

    # --- the op interface -------------------------------------------------
    def linear(self, x: np.ndarray, w: Any, bias: Optional[np.ndarray] = None) -> np.ndarray:
        """``x @ w.T (+ bias)``: x ``(..., in)``, w ``(out, in)`` -> ``(..., out)``."""
        raise NotImplementedError

    def embedding(self, table: Any, ids: np.ndarray) -> np.ndarray:
        """Rows of ``table`` ``(vocab, D)`` for integer ``ids`` of any shape -> ``ids.shape + (D,)``."""
        raise NotImplementedError

    def rms_norm(
        self, x: np.ndarray, weight: np.ndarray, eps: float, unit_offset: bool = False
    ) -> np.ndarray:
        """RMSNorm over the last axis; ``unit_offset`` scales by ``1 + weight`` (Gemma)."""
        raise NotImplementedError

    def layer_norm(
        self, x: np.ndarray, weight: Optional[np.ndarray], bias: Optional[np.ndarray], eps: float
    ) -> np.ndarray:
        """LayerNorm over the last axis with optional affine weight and bias."""
        raise NotImplementedError

    def rope(self, x: np.ndarray, positions: np.ndarray, inv_freq: np.ndarray) -> np.ndarray:
        """Rotary embedding, rotate-half (GPT-NeoX/HF) layout.

        x ``(B, H, L, head_dim)``; positions ``(L,)`` absolute token positions;
        inv_freq ``(rotary_dim // 2,)`` already scaled (llama3 etc.).  Dimensions
        past ``rotary_dim`` pass through unchanged.
        """
        raise NotImplementedError

    def attention(
        self,
        q: np.ndarray,
        k: np.ndarray,
        v: np.ndarray,
        *,
        scale: float,
        q_offset: int = 0,
        causal: bool = True,
        sliding_window: Optional[int] = None,
        softcap: Optional[float] = None,
        mask: Optional[np.ndarray] = None,
    ) -> np.ndarray:
        """Scaled dot-product attention with grouped-query heads.

        q ``(B, Hq, L, d)``; k, v ``(B, Hkv, S, d)`` with ``Hq % Hkv == 0``.
        Query ``i`` sits at absolute position ``q_offset + i``, key ``j`` at
        ``j``.  ``causal`` hides keys after the query; ``sliding_window`` W also
        hides keys at or before ``pos - W``; ``softcap`` applies
        ``c * tanh(s / c)`` to the scores; ``mask`` is an additive float mask
        broadcastable to ``(B, Hq, L, S)``.  Returns ``(B, Hq, L, d)``.
        """
        raise NotImplementedError

    def activation(self, x: np.ndarray, kind: str) -> np.ndarray:
        """Elementwise activation, ``kind`` in :data:`ACTIVATIONS`."""
        raise NotImplementedError

    def gated_activation(self, gate: np.ndarray, up: np.ndarray, kind: str) -> np.ndarray:
        """``act(gate) * up`` (SwiGLU / GeGLU)."""
        raise NotImplementedError

    def softmax(self, x: np.ndarray, axis: int = -1) -> np.ndarray:
        """Numerically stable softmax."""
        raise NotImplementedError

    def hadamard(self, x: np.ndarray, block_size: int) -> np.ndarray:
        """Orthonormal fast Walsh-Hadamard transform of each ``block_size`` block of the last axis.

        ``block_size`` is a power of two dividing ``x.shape[-1]``; the transform
        is scaled by ``1/sqrt(block_size)`` so it is its own inverse.
        """
        raise NotImplementedError

    def conv1d(
        self,
        x: np.ndarray,
        weight: np.ndarray,
        bias: Optional[np.ndarray] = None,
        *,
        stride: int = 1,
        padding: int = 0,
        groups: int = 1,
    ) -> np.ndarray:
        """1-D convolution: x ``(B, C_in, T)``, weight ``(C_out, C_in/groups, K)`` -> ``(B, C_out, T')``."""
        raise NotImplementedError


class Ops:
    """Dispatches each op to the first backend, by priority, that supports it.

    ``Ops([neon, numpy_ref])`` runs ``linear`` on neon for the formats neon
    accepts and on numpy_ref for the rest.  Resolution is cached per
    ``(op, format)`` so the per-token cost is one dict lookup.
    """

    def __init__(self, backends: Sequence[Backend]):
        if not backends:
            raise BackendError("no kernel backend is available; install cactus or a backend plugin")
        self.backends = list(backends)
        self._cache: dict[tuple[str, Optional[str]], Any] = {}

    @property
    def name(self) -> str:
        """The primary (highest priority) backend's name."""
        return self.backends[0].name

    def resolve(self, op: str, fmt: Optional[str] = None):
        """The bound method that will run ``op`` on weights of ``fmt``."""
        key = (op, fmt)
        fn = self._cache.get(key)
        if fn is None:
            for b in self.backends:
                if b.supports(op, fmt):
                    fn = getattr(b, op)
                    break
            else:
                names = ", ".join(b.name for b in self.backends)
                raise BackendError(f"no backend among [{names}] implements {op} for format {fmt}")
            self._cache[key] = fn
        return fn

    def backend_for(self, op: str, fmt: Optional[str] = None) -> str:
        """Name of the backend that runs ``op`` for ``fmt`` (for reports and tests)."""
        return self.resolve(op, fmt).__self__.name

    def prepare(self, w: Any) -> Any:
        """Let the backend that will multiply by ``w`` prepare it once at load."""
        owner = self.resolve("linear", weight_format(w)).__self__
        return owner.prepare(w)

    def linear(self, x, w, bias=None):
        return self.resolve("linear", weight_format(w))(x, w, bias)

    def embedding(self, table, ids):
        return self.resolve("embedding", weight_format(table))(table, ids)

    def __getattr__(self, op: str):
        if op in OPS:
            fn = self.resolve(op)
            self.__dict__[op] = fn  # later calls skip __getattr__ entirely
            return fn
        raise AttributeError(op)
