"""Gemma 3 (text): scaled embeddings, (1 + w) RMSNorms around both sublayers,
QK-norm, interleaved sliding-window and global layers with their own RoPE bases,
GeGLU MLP, and optional final logit soft-capping.

Also serves ``gemma3`` multimodal checkpoints used text-only: the text config is
nested under ``text_config`` and the weights under a ``language_model`` prefix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..errors import ModelLoadError
from ..graph import Ops
from ..weights import Weights
from .base import CausalLM, Scope, args_from_config, norm_weight, rope_inv_freq, rope_parameters


@dataclass
class ModelArgs:
    model_type: str
    hidden_size: int
    num_hidden_layers: int
    intermediate_size: int
    num_attention_heads: int
    vocab_size: int
    head_dim: int = 256
    num_key_value_heads: int = 4
    rms_norm_eps: float = 1e-6
    query_pre_attn_scalar: float = 256
    sliding_window: int = 4096
    sliding_window_pattern: int = 6
    layer_types: Optional[list] = None
    max_position_embeddings: int = 131072
    attn_logit_softcapping: Optional[float] = None
    final_logit_softcapping: Optional[float] = None
    hidden_activation: str = "gelu_pytorch_tanh"
    rope_local_base_freq: float = 10000.0

    def __post_init__(self):
        if self.layer_types is None:  # transformers 4 configs give only the pattern
            p = self.sliding_window_pattern
            self.layer_types = [
                "full_attention" if (i + 1) % p == 0 else "sliding_attention"
                for i in range(self.num_hidden_layers)
            ]


def _rope_for(config: dict, layer_type: str, head_dim: int) -> np.ndarray:
    params = rope_parameters(config, layer_type)
    if layer_type == "sliding_attention" and not isinstance(
        (config.get("rope_parameters") or {}).get("sliding_attention"), dict
    ):
        # transformers 4 layout: local layers use rope_local_base_freq, unscaled.
        params = {"rope_type": "default", "rope_theta": config.get("rope_local_base_freq", 10000.0)}
    return rope_inv_freq(params, head_dim)


class Attention:
    def __init__(self, args: ModelArgs, w: Scope, inv_freq: np.ndarray, sliding: bool):
        D, H, Hkv, d = args.hidden_size, args.num_attention_heads, args.num_key_value_heads, args.head_dim
        self.n_heads, self.n_kv_heads, self.head_dim = H, Hkv, d
        self.scale = args.query_pre_attn_scalar**-0.5
        # Gemma 3 checkpoints set attn_logit_softcapping to null and transformers'
        # Gemma 3 ignores the field (QK-norm replaced Gemma 2's capping); so do we.
        self.softcap = None
        self.sliding_window = args.sliding_window if sliding else None
        self.inv_freq = inv_freq
        self.eps = args.rms_norm_eps
        self.q_proj = w("q_proj.weight", (H * d, D), linear=True)
        self.k_proj = w("k_proj.weight", (Hkv * d, D), linear=True)
        self.v_proj = w("v_proj.weight", (Hkv * d, D), linear=True)
        self.o_proj = w("o_proj.weight", (D, H * d), linear=True)
        self.q_norm = norm_weight(w("q_norm.weight", (d,)))
        self.k_norm = norm_weight(w("k_norm.weight", (d,)))
        self.qkv_proj = (self.q_proj, self.k_proj, self.v_proj)

    def __call__(self, ops: Ops, x: np.ndarray, cache, layer: int, norm=None) -> np.ndarray:
        B, L, D = x.shape
        q, k, v = ops.multi_linear(x, self.qkv_proj, None, norm)  # one call: they share x and its norm
        q = q.reshape(B, L, self.n_heads, self.head_dim).transpose(0, 2, 1, 3)
        k = k.reshape(B, L, self.n_kv_heads, self.head_dim).transpose(0, 2, 1, 3)
        v = v.reshape(B, L, self.n_kv_heads, self.head_dim).transpose(0, 2, 1, 3)
        offset = cache.offset
        positions = np.arange(offset, offset + L)
        q, k = ops.rope_qk(q, k, positions, self.inv_freq, self.q_norm, self.k_norm, self.eps,
                           unit_offset=True)
        keys, values = cache.layer(layer, L)
        out = ops.cached_attention(
            q, k, v, keys, values, offset, scale=self.scale,
            sliding_window=self.sliding_window, softcap=self.softcap,
        )
        out = out.transpose(0, 2, 1, 3).reshape(B, L, self.n_heads * self.head_dim)
        return ops.linear(out, self.o_proj)


class MLP:
    def __init__(self, args: ModelArgs, w: Scope):
        D, F = args.hidden_size, args.intermediate_size
        self.act = {"gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu"}.get(args.hidden_activation, args.hidden_activation)
        self.gate_proj = w("gate_proj.weight", (F, D), linear=True)
        self.up_proj = w("up_proj.weight", (F, D), linear=True)
        self.down_proj = w("down_proj.weight", (D, F), linear=True)

    def __call__(self, ops: Ops, x: np.ndarray, norm=None) -> np.ndarray:
        return ops.linear(ops.gated_linear(x, self.gate_proj, self.up_proj, self.act, norm=norm), self.down_proj)


class TransformerBlock:
    def __init__(self, args: ModelArgs, w: Scope, inv_freq: np.ndarray, sliding: bool):
        D = args.hidden_size
        self.eps = args.rms_norm_eps
        self.self_attn = Attention(args, w.sub("self_attn."), inv_freq, sliding)
        self.mlp = MLP(args, w.sub("mlp."))
        self.input_layernorm = norm_weight(w("input_layernorm.weight", (D,)))
        self.post_attention_layernorm = norm_weight(w("post_attention_layernorm.weight", (D,)))
        self.pre_feedforward_layernorm = norm_weight(w("pre_feedforward_layernorm.weight", (D,)))
        self.post_feedforward_layernorm = norm_weight(w("post_feedforward_layernorm.weight", (D,)))

    def __call__(self, ops: Ops, x: np.ndarray, cache, layer: int) -> np.ndarray:
        # The pre-norms run inside the first projections that read them (q/k/v, gate/up).
        a = self.self_attn(ops, x, cache, layer, norm=(self.input_layernorm, self.eps, True))
        h = x + ops.rms_norm(a, self.post_attention_layernorm, self.eps, unit_offset=True)
        m = self.mlp(ops, h, norm=(self.pre_feedforward_layernorm, self.eps, True))
        return h + ops.rms_norm(m, self.post_feedforward_layernorm, self.eps, unit_offset=True)


_PREFIXES = ("model.", "language_model.model.", "model.language_model.")


class Model(CausalLM):
    """Gemma3ForCausalLM (tied output head, scaled input embeddings)."""

    def __init__(self, config: dict, weights: Weights, ops: Ops):
        super().__init__()
        if config.get("model_type") == "gemma3":
            config = {**config.get("text_config", {}), "model_type": "gemma3_text"}
        args = self.args = args_from_config(ModelArgs, config)
        self.ops = ops
        D, V = args.hidden_size, args.vocab_size
        prefix = next((p for p in _PREFIXES if p + "embed_tokens.weight" in weights), None)
        if prefix is None:
            raise ModelLoadError("checkpoint has no Gemma 3 embed_tokens.weight under any known prefix")
        w = Scope(weights, prefix, ops)
        self.embed_tokens = w("embed_tokens.weight", (V, D))
        self.embed_scale = np.float32(math.sqrt(D))
        freqs = {t: _rope_for(config, t, args.head_dim) for t in set(args.layer_types)}
        self.layers = [
            TransformerBlock(args, w.sub(f"layers.{i}."), freqs[t], t == "sliding_attention")
            for i, t in enumerate(args.layer_types)
        ]
        self.norm = norm_weight(w("norm.weight", (D,)))
        self.lm_head = self.embed_tokens
        self.n_layers, self.n_kv_heads, self.head_dim = len(self.layers), args.num_key_value_heads, args.head_dim
        self.max_context, self.vocab_size = args.max_position_embeddings, V

    def forward(self, ids: np.ndarray, cache) -> np.ndarray:
        ops = self.ops
        h = ops.embedding(self.embed_tokens, ids) * self.embed_scale
        for i, layer in enumerate(self.layers):
            h = layer(ops, h, cache, i)
            self._keep(i, h)
        cache.advance(ids.shape[1])
        return ops.rms_norm(h, self.norm, self.args.rms_norm_eps, unit_offset=True)

    def logits(self, h: np.ndarray) -> np.ndarray:
        z = self.ops.linear(h, self.lm_head)
        cap = self.args.final_logit_softcapping
        return z if cap is None else (np.tanh(z / cap) * cap).astype(np.float32)
