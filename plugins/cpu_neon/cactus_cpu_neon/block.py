"""The fused ``decoder_block`` op of cpu_neon: a whole Llama / Mistral / Qwen3 block of one
decoded token in one C call (csrc/block.c).

Per layer and token the op-by-op path made six Python op calls (dispatch, shape checks,
``np.empty``, cffi conversions), ~2.7 ms of a 16 ms Qwen3-0.6B token with the caches
cold after each kernel (docs/cpu_neon.md).  Here the block's C arguments are built once
per block (weights, biases, norms, RoPE table) and once per cache layer (pointers), so a
decode step per layer is one dictionary hit, a few checks and one cffi call.  The C code
runs the same kernels in the same order: results are bit for bit those of the op-by-op
path.  Anything else (prefill, batches, int4 / int8 or mixed weights, other caches) takes
the core's composition of the ops.
"""

from __future__ import annotations

import weakref
from typing import Any

import numpy as np

from cactus_core.formats import QuantizedTensor
from cactus_core.graph import Backend

_ACTIVATIONS = {"silu": 0, "gelu": 1, "gelu_tanh": 2, "relu": 3}
_KV_TYPES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1}


class BlockOps:
    """Mixin of :class:`~cactus_cpu_neon.backend.NeonBackend`: the ``decoder_block`` op."""

    def decoder_block(self, x, block, cache_k, cache_v, offset):
        """:meth:`cactus_core.graph.Backend.decoder_block`; one C call for one-token decode."""
        shape = getattr(x, "shape", ())
        if len(shape) != 3 or shape[0] != 1 or shape[1] != 1:  # prefill, batches: the ops one by one
            return Backend.decoder_block(self, x, block, cache_k, cache_v, offset)
        c = self._block_args(block)
        kv = self._cache_args(cache_k, cache_v, block)
        if c is None or kv is None:
            return Backend.decoder_block(self, x, block, cache_k, cache_v, offset)
        pk, pv, kvtype, max_len = kv
        if shape[2] != c.D:
            raise self._arg_error(f"decoder_block: input has {shape[2]} features, the block expects {c.D}")
        if not 0 <= offset < max_len:
            raise self._arg_error(f"decoder_block: position {offset} does not fit a cache of {max_len}")
        x = np.ascontiguousarray(x, dtype=np.float32)
        out = np.empty_like(x)
        rc = self._lib.cn_decoder_block(c, self._fp(x), self._fp(out), pk, pv, kvtype, max_len, int(offset))
        if rc != 0:
            raise self._arg_error("cpu_neon decoder_block: out of memory" if rc == -2 else
                                  "cpu_neon cannot run this block's weight layouts in one call")
        return out

    def decoder_stack(self, x, blocks, layers, offset):
        """:meth:`cactus_core.graph.Backend.decoder_stack`; one C call for all layers of a
        one-token decode step (no return to Python between blocks)."""
        shape = getattr(x, "shape", ())
        st = self._stack_args(blocks, layers) if len(shape) == 3 and shape[0] == 1 and shape[1] == 1 else None
        if st is None:  # prefill, batches, layouts the block call does not take: block by block
            return Backend.decoder_stack(self, x, blocks, layers, offset)
        _, _, _, n, D, pb, pk, pv, kvtype, max_len = st
        if shape[2] != D:
            raise self._arg_error(f"decoder_stack: input has {shape[2]} features, the blocks expect {D}")
        if not 0 <= offset < max_len:
            raise self._arg_error(f"decoder_stack: position {offset} does not fit a cache of {max_len}")
        x = np.ascontiguousarray(x, dtype=np.float32)
        out = np.empty_like(x)
        rc = self._lib.cn_decoder_stack(pb, n, self._fp(x), self._fp(out), pk, pv, kvtype, max_len, int(offset))
        if rc != 0:
            raise self._arg_error("cpu_neon decoder_stack: out of memory" if rc == -2 else
                                  "cpu_neon cannot run these blocks' weight layouts in one call")
        return out

    def _stack_args(self, blocks, layers):
        """(first block's weakref, first cache array's weakref, keep, n, D, block pointers, key
        pointers, value pointers, kvtype, max_len) of a model's blocks and a
        cache's layers, made once per pair (both are made once per model and cache); None when
        a block or a layer's cache does not take the C block call."""
        key = (id(blocks), id(layers))
        hit = self._stacks.get(key)
        if (hit is not None and hit[0]() is blocks[0] and hit[1]() is layers[0][0]
                and hit[3] == len(blocks) == len(layers)):
            return hit
        n = len(blocks)
        if n == 0 or len(layers) != n:
            return None
        cs, kvs = [self._block_args(b) for b in blocks], [self._cache_args(k, v, b) for b, (k, v) in zip(blocks, layers)]
        if any(c is None for c in cs) or any(kv is None for kv in kvs) or len({c.D for c in cs}) != 1 \
                or len({kv[2:] for kv in kvs}) != 1:
            return None
        ffi = self._ffi
        pb = ffi.new("cn_block *[]", cs)
        pk = ffi.new("void *[]", [kv[0] for kv in kvs])
        pv = ffi.new("void *[]", [kv[1] for kv in kvs])
        # The blocks' C arguments point into weights their table entries keep; hold those here
        # too, until the first block (and with it the model) goes.
        keep = [self._blocks[id(b)] for b in blocks]
        table = self._stacks
        drop = lambda _, k=key: table.pop(k, None)  # noqa: E731
        entry = (weakref.ref(blocks[0], drop), weakref.ref(layers[0][0], drop), keep, n, int(cs[0].D), pb, pk, pv,
                 *kvs[0][2:])
        table[key] = entry
        return entry

    # --- per block: C arguments made once ------------------------------------
    def _block_args(self, block):
        """The block's ``cn_block`` (None: not for the C path), made once per block object."""
        hit = self._blocks.get(id(block))
        if hit is not None and hit[0]() is block:
            return hit[1]
        c, keep = self._make_block(block)
        key, table = id(block), self._blocks
        table[key] = (weakref.ref(block, lambda _, k=key: table.pop(k, None)), c, keep)
        return c

    def _make_block(self, block) -> tuple[Any, list]:
        ws = block.weights()
        act = _ACTIVATIONS.get(block.act)
        if act is None or block.format is None or any(len(w.shape) != 2 for w in ws):
            return None, []
        D, F = int(block.o_proj.shape[0]), int(block.gate.shape[0])
        Hq, Hkv, d = int(block.n_heads), int(block.n_kv_heads), int(block.head_dim)
        want = [(Hq * d, D), (Hkv * d, D), (Hkv * d, D), (D, Hq * d), (F, D), (F, D), (D, F)]
        got = [tuple(int(n) for n in w.shape) for w in ws]
        if got != want or Hkv <= 0 or Hq % Hkv:
            raise self._arg_error(f"decoder_block: weight shapes {got} do not make a block of {Hq} query / "
                                  f"{Hkv} KV heads of {d} over {D} features (expected {want})")
        c = self._ffi.new("cn_block *")
        keep: list = []
        if all(isinstance(w, QuantizedTensor) and w.format == "cq" for w in ws):
            c.kind = 0
            for i, w in enumerate(ws):
                keep.append(self._fill_cq(c.cq[i], w))
        elif all(not isinstance(w, QuantizedTensor) for w in ws):
            c.kind = 1
            for i, w in enumerate(ws):
                keep.append(self._fill_float(c.fw[i], w))
        else:
            return None, []  # int4 / int8: the core composes (their fused linears compose too)
        qkv_bias = block.qkv_bias or (None, None, None)
        biases = (*qkv_bias, block.o_bias, block.gate_bias, block.up_bias, block.down_bias)
        for i, (b, (N, _)) in enumerate(zip(biases, want)):
            if b is not None:
                v = self._param(b, N, "linear bias")
                keep.append(v)
                (c.cq[i] if c.kind == 0 else c.fw[i]).bias = self._fp(v)
        c.act, c.bf16 = act, int(self.bf16_prefill)
        c.D, c.F, c.Hq, c.Hkv, c.d = D, F, Hq, Hkv, d
        inv = np.ascontiguousarray(block.inv_freq, dtype=np.float32).reshape(-1)
        if 2 * inv.shape[0] > d:
            raise self._arg_error(f"decoder_block: rotary dim {2 * inv.shape[0]} exceeds head_dim {d}")
        c.half, c.inv_freq = inv.shape[0], self._fp(inv)
        c.window = -1 if block.sliding_window is None else int(block.sliding_window)
        c.eps, c.scale = float(block.eps), float(block.scale)
        c.attn_norm = self._fp(self._param(block.attn_norm, D, "norm weight"))
        c.mlp_norm = self._fp(self._param(block.mlp_norm, D, "norm weight"))
        null = self._ffi.NULL
        c.q_norm = null if block.q_norm is None else self._fp(self._param(block.q_norm, d, "q_norm weight"))
        c.k_norm = null if block.k_norm is None else self._fp(self._param(block.k_norm, d, "k_norm weight"))
        keep += [inv, block.attn_norm, block.mlp_norm, block.q_norm, block.k_norm]
        return c, keep

    def _fill_cq(self, c, w) -> Any:
        """A ``cn_cq_weight`` of CQ tensor w, as the fused linears fill it; returns what to keep alive."""
        prep = self._cq_prep(w)
        _, args, i8 = prep
        (c.codes, c.stride, c.index_bits, c.vec_dim, c.scales, c.group, c.codebook, c.signs, c.block) = args
        c.N = int(w.shape[0])
        if i8 is not None:
            c.cb_q8, c.cb_scale = i8[6], i8[7]
        return prep

    def _fill_float(self, c, w) -> Any:
        from .backend import _matrix  # noqa: PLC0415 - backend imports this module

        raw, c.wtype = _matrix(w, "decoder_block")
        c.w, c.N = self._ffi.from_buffer(raw), int(raw.shape[0])
        return raw

    # --- per cache layer: pointers made once ----------------------------------
    def _cache_args(self, cache_k, cache_v, block):
        """(key pointer, value pointer, kvtype, max_len) of one layer's contiguous preallocated
        cache, made once per pair of arrays; None for any other layout (the ops then run)."""
        key = (id(cache_k), id(cache_v))
        hit = self._caches.get(key)
        if hit is not None and hit[0]() is cache_k and hit[1]() is cache_v:
            return hit[2]
        shape = getattr(cache_k, "shape", ())
        kvtype = _KV_TYPES.get(getattr(cache_k, "dtype", None))
        if (kvtype is None or getattr(cache_v, "dtype", None) != cache_k.dtype or getattr(cache_v, "shape", ()) != shape
                or len(shape) != 4 or shape[0] != 1 or shape[1] != block.n_kv_heads or shape[3] != block.head_dim
                or not (cache_k.flags.c_contiguous and cache_v.flags.c_contiguous)
                or not (cache_k.flags.writeable and cache_v.flags.writeable)):
            return None
        # Bare addresses: a from_buffer object would keep a dead generator's cache alive.
        args = (self._ptr(cache_k), self._ptr(cache_v), kvtype, int(shape[2]))
        table = self._caches
        drop = lambda _, k=key: table.pop(k, None)  # noqa: E731
        table[key] = (weakref.ref(cache_k, drop), weakref.ref(cache_v, drop), args)
        return args
