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

from dataclasses import dataclass
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

#: Fused ops, each doing the work of several ops above in one call (decode makes
#: a few hundred op calls per token, and each costs microseconds of Python), and
#: the op whose backend runs it.  A backend implements a fused op only where it
#: pays; otherwise :class:`Ops` runs the base class's composition of its parts,
#: each part dispatched as usual, so every backend works unchanged.
FUSED_OPS: dict[str, str] = {
    "multi_linear": "linear", "gated_linear": "linear", "rope_qk": "rope", "cached_attention": "attention",
    "decoder_block": "linear", "decoder_stack": "linear",
}

#: Activation names understood by ``activation`` and ``gated_activation``.
ACTIVATIONS = ("silu", "gelu", "gelu_tanh", "relu")


#: dtype -> name: ``np.dtype.name`` is a Python property costing ~3 us, and every
#: linear of a float model asks for it once per call.
_DTYPE_NAMES: dict[Any, str] = {}


def weight_format(w: Any) -> str:
    """The format name of a weight: a numpy dtype name or a quantized format name."""
    fmt = getattr(w, "format", None)
    if fmt is not None:
        return fmt
    dt = w.dtype
    name = _DTYPE_NAMES.get(dt)
    if name is None:
        name = _DTYPE_NAMES[dt] = np.dtype(dt).name
    return name


@dataclass(eq=False)
class DecoderBlock:
    """The parameters of one pre-norm decoder block with grouped-query attention and a
    gated MLP (Llama, Mistral, Qwen3), for the fused :meth:`Backend.decoder_block`.

    Made once per layer at load; backends may key prepared state on the object
    (it compares by identity).  ``qkv`` / ``qkv_bias`` as :meth:`Backend.multi_linear`
    takes them; ``q_norm`` / ``k_norm`` are QK-norm weights or None.
    """

    attn_norm: np.ndarray
    mlp_norm: np.ndarray
    eps: float
    qkv: tuple
    qkv_bias: Optional[tuple]
    q_norm: Optional[np.ndarray]
    k_norm: Optional[np.ndarray]
    inv_freq: np.ndarray
    n_heads: int
    n_kv_heads: int
    head_dim: int
    scale: float
    sliding_window: Optional[int]
    o_proj: Any
    o_bias: Optional[np.ndarray]
    gate: Any
    up: Any
    down: Any
    gate_bias: Optional[np.ndarray]
    up_bias: Optional[np.ndarray]
    down_bias: Optional[np.ndarray]
    act: str

    def __post_init__(self):
        fmts = {weight_format(w) for w in self.weights()}
        #: the weights' common format, None when they mix formats (dispatch asks per token)
        self.format: Optional[str] = fmts.pop() if len(fmts) == 1 else None

    def weights(self) -> tuple:
        """The seven projection weights: q, k, v, o, gate, up, down."""
        return (*self.qkv, self.o_proj, self.gate, self.up, self.down)


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

    # --- fused ops: defaults compose the ops above (``self`` may be an Ops) ---
    def multi_linear(
        self, x: np.ndarray, ws: Sequence[Any], biases: Optional[Sequence[Optional[np.ndarray]]] = None,
        norm: Optional[tuple] = None,
    ) -> list[np.ndarray]:
        """``[linear(x, w, b) for w, b in zip(ws, biases)]``: projections of one input (q/k/v).

        The weights share ``x``'s feature count; ``biases`` is None or one entry
        (array or None) per weight.  ``norm`` = ``(weight, eps, unit_offset)``
        RMS-normalises x first (the pre-norm of the block the projections open).
        """
        if norm is not None:
            x = self.rms_norm(x, *norm)
        if biases is None:
            return [self.linear(x, w) for w in ws]
        return [self.linear(x, w, b) for w, b in zip(ws, biases)]

    def gated_linear(
        self, x: np.ndarray, gate: Any, up: Any, kind: str,
        gate_bias: Optional[np.ndarray] = None, up_bias: Optional[np.ndarray] = None, norm: Optional[tuple] = None,
    ) -> np.ndarray:
        """``act(x @ gate.T + gate_bias) * (x @ up.T + up_bias)``: the first half of a gated MLP
        (x RMS-normalised first by ``norm``, as in :meth:`multi_linear`)."""
        g, u = self.multi_linear(x, (gate, up), (gate_bias, up_bias), norm)
        return self.gated_activation(g, u, kind)

    def rope_qk(
        self, q: np.ndarray, k: np.ndarray, positions: np.ndarray, inv_freq: np.ndarray,
        q_norm: Optional[np.ndarray] = None, k_norm: Optional[np.ndarray] = None,
        eps: float = 1e-6, unit_offset: bool = False,
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`rope` of queries and keys at the same positions, each first RMS-normed over
        ``head_dim`` when its norm weight is given (QK-norm: Qwen3, Gemma 3)."""
        if q_norm is not None:
            q = self.rms_norm(q, q_norm, eps, unit_offset)
        if k_norm is not None:
            k = self.rms_norm(k, k_norm, eps, unit_offset)
        return self.rope(q, positions, inv_freq), self.rope(k, positions, inv_freq)

    def cached_attention(
        self, q: np.ndarray, k: np.ndarray, v: np.ndarray, cache_k: np.ndarray, cache_v: np.ndarray,
        offset: int, *, scale: float, sliding_window: Optional[int] = None, softcap: Optional[float] = None,
    ) -> np.ndarray:
        """Store a layer's new keys and values in its cache, then causal :meth:`attention` over it.

        ``cache_k``/``cache_v`` are the layer's whole preallocated cache, ``(B, Hkv,
        max_len, d)`` in float32 or float16; k, v ``(B, Hkv, L, d)`` go to positions
        ``[offset, offset + L)`` and q ``(B, Hq, L, d)`` attends over ``[0, offset + L)``.
        With nothing cached before (``offset`` 0), a cache of another dtype is not read
        back: the prompt attends over its keys and values as computed.
        """
        end = offset + k.shape[2]
        cache_k[:, :, offset:end] = k
        cache_v[:, :, offset:end] = v
        if offset == 0 and cache_k.dtype != k.dtype:
            keys, values = k, v
        else:
            keys, values = cache_k[:, :, :end], cache_v[:, :, :end]
        return self.attention(q, keys, values, scale=scale, q_offset=offset, sliding_window=sliding_window,
                              softcap=softcap)

    def decoder_block(
        self, x: np.ndarray, block: DecoderBlock, cache_k: np.ndarray, cache_v: np.ndarray, offset: int,
    ) -> np.ndarray:
        """One whole decoder block on x ``(B, L, D)`` at positions ``[offset, offset + L)``:
        ``h = x + o_proj(attention(rope_qk(q, k), v))`` with q/k/v of ``rms_norm(x)``, then
        ``h + down(act(gate(rms_norm(h))) * up(rms_norm(h)))``; the new keys and values go
        to the layer's cache as in :meth:`cached_attention`.  Returns the block's output."""
        B, L, D = x.shape
        H, Hkv, d = block.n_heads, block.n_kv_heads, block.head_dim
        q, k, v = self.multi_linear(x, block.qkv, block.qkv_bias, (block.attn_norm, block.eps))
        q = q.reshape(B, L, H, d).transpose(0, 2, 1, 3)
        k = k.reshape(B, L, Hkv, d).transpose(0, 2, 1, 3)
        v = v.reshape(B, L, Hkv, d).transpose(0, 2, 1, 3)
        positions = np.arange(offset, offset + L)
        q, k = self.rope_qk(q, k, positions, block.inv_freq, block.q_norm, block.k_norm, block.eps)
        out = self.cached_attention(q, k, v, cache_k, cache_v, offset, scale=block.scale,
                                    sliding_window=block.sliding_window)
        out = out.transpose(0, 2, 1, 3).reshape(B, L, H * d)
        h = x + self.linear(out, block.o_proj, block.o_bias)
        g = self.gated_linear(h, block.gate, block.up, block.act, block.gate_bias, block.up_bias,
                              (block.mlp_norm, block.eps))
        return h + self.linear(g, block.down, block.down_bias)

    def decoder_stack(
        self, x: np.ndarray, blocks: Sequence[DecoderBlock], layers: Sequence[tuple[np.ndarray, np.ndarray]],
        offset: int,
    ) -> np.ndarray:
        """:meth:`decoder_block` of every block in order on x ``(B, L, D)``, block i with
        ``layers[i]`` as its ``(cache_k, cache_v)``: a model's whole stack of layers in one
        call (made once per token, where a backend can run it without returning between
        layers).  Returns the last block's output."""
        for block, (cache_k, cache_v) in zip(blocks, layers):
            x = self.decoder_block(x, block, cache_k, cache_v, offset)
        return x


class Ops:
    """Dispatches each op to the first backend, by priority, that supports it.

    ``Ops([neon, numpy_ref])`` runs ``linear`` on neon for the formats neon
    accepts and on numpy_ref for the rest.  Resolution is cached per
    ``(op, format)`` so the per-token cost is one dict lookup.

    A fused op (:data:`FUSED_OPS`) runs on the backend that runs its part (for
    ``multi_linear``, the one that multiplies weights of that format) if that
    backend implements it, else as :class:`Backend`'s composition of the parts
    through this dispatcher.  A subclass that overrides ``linear`` (calibration
    records, weight swaps) sees every projection: fused linears then compose.
    """

    def __init__(self, backends: Sequence[Backend]):
        if not backends:
            raise BackendError("no kernel backend is available; install cactus or a backend plugin")
        self.backends = list(backends)
        self._cache: dict[tuple[str, Optional[str]], Any] = {}
        self._compose_linear = type(self).linear is not Ops.linear

    @property
    def name(self) -> str:
        """The primary (highest priority) backend's name."""
        return self.backends[0].name

    def resolve(self, op: str, fmt: Optional[str] = None):
        """The bound method that will run ``op`` on weights of ``fmt``."""
        key = (op, fmt)
        fn = self._cache.get(key)
        if fn is None and op in FUSED_OPS:
            owner = self.resolve(FUSED_OPS[op], fmt).__self__
            fn = getattr(owner, op) if owner.supports(op, fmt) else getattr(Backend, op).__get__(self)
            self._cache[key] = fn
        elif fn is None:
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
        """Name of the backend that runs ``op`` for ``fmt`` (for reports and tests);
        ``"composed"`` for a fused op that runs as its parts."""
        owner = self.resolve(op, fmt).__self__
        return owner.name if isinstance(owner, Backend) else "composed"

    def prepare(self, w: Any) -> Any:
        """Let the backend that will multiply by ``w`` prepare it once at load."""
        owner = self.resolve("linear", weight_format(w)).__self__
        return owner.prepare(w)

    def linear(self, x, w, bias=None):
        return self.resolve("linear", weight_format(w))(x, w, bias)

    def embedding(self, table, ids):
        return self.resolve("embedding", weight_format(table))(table, ids)

    def multi_linear(self, x, ws, biases=None, norm=None):
        fmt = weight_format(ws[0])
        for w in ws:
            if weight_format(w) != fmt:  # mixed formats: each weight to its own backend
                return Backend.multi_linear(self, x, ws, biases, norm)
        if self._compose_linear:
            return Backend.multi_linear(self, x, ws, biases, norm)
        return self.resolve("multi_linear", fmt)(x, ws, biases, norm)

    def gated_linear(self, x, gate, up, kind, gate_bias=None, up_bias=None, norm=None):
        fmt = weight_format(gate)
        if self._compose_linear or weight_format(up) != fmt:
            return Backend.gated_linear(self, x, gate, up, kind, gate_bias, up_bias, norm)
        return self.resolve("gated_linear", fmt)(x, gate, up, kind, gate_bias, up_bias, norm)

    def decoder_block(self, x, block, cache_k, cache_v, offset):
        fmt = block.format
        if self._compose_linear or fmt is None:
            return Backend.decoder_block(self, x, block, cache_k, cache_v, offset)
        return self.resolve("decoder_block", fmt)(x, block, cache_k, cache_v, offset)

    def decoder_stack(self, x, blocks, layers, offset):
        fmts = {block.format for block in blocks}
        fmt = fmts.pop() if len(fmts) == 1 else None
        if self._compose_linear or fmt is None:
            return Backend.decoder_stack(self, x, blocks, layers, offset)
        return self.resolve("decoder_stack", fmt)(x, blocks, layers, offset)

    def __getattr__(self, op: str):
        if op in OPS or op in FUSED_OPS:
            fn = self.resolve(op)
            self.__dict__[op] = fn  # later calls skip __getattr__ entirely
            return fn
        raise AttributeError(op)
