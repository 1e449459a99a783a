"""Qwen3: Llama's block with per-head RMSNorm on queries and keys (QK-norm) before RoPE."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..graph import Ops
from ..weights import Weights
from . import llama
from .base import CausalLM, Scope, args_from_config, norm_weight, rope_inv_freq, rope_parameters


@dataclass
class ModelArgs(llama.ModelArgs):
    use_sliding_window: bool = False
    max_window_layers: int = 0
    layer_types: Optional[list] = None

    def window_for(self, layer: int) -> Optional[int]:
        """Qwen3 only slides on layers marked so (none in released checkpoints)."""
        if self.layer_types is not None:
            return self.sliding_window if self.layer_types[layer] == "sliding_attention" else None
        if self.use_sliding_window and layer >= self.max_window_layers:
            return self.sliding_window
        return None


class Attention(llama.Attention):
    def __init__(self, args: ModelArgs, w: Scope, inv_freq: np.ndarray, layer: int):
        super().__init__(args, w, inv_freq)
        self.sliding_window = args.window_for(layer)
        self.eps = args.rms_norm_eps
        self.q_norm = norm_weight(w("q_norm.weight", (args.head_dim,)))
        self.k_norm = norm_weight(w("k_norm.weight", (args.head_dim,)))

    def __call__(self, ops: Ops, x: np.ndarray, cache, layer: int) -> np.ndarray:
        B, L, D = x.shape
        q = ops.linear(x, self.q_proj, self.q_bias).reshape(B, L, self.n_heads, self.head_dim)
        k = ops.linear(x, self.k_proj, self.k_bias).reshape(B, L, self.n_kv_heads, self.head_dim)
        v = ops.linear(x, self.v_proj, self.v_bias).reshape(B, L, self.n_kv_heads, self.head_dim)
        q = ops.rms_norm(q, self.q_norm, self.eps).transpose(0, 2, 1, 3)
        k = ops.rms_norm(k, self.k_norm, self.eps).transpose(0, 2, 1, 3)
        v = v.transpose(0, 2, 1, 3)
        offset = cache.offset
        positions = np.arange(offset, offset + L)
        q = ops.rope(q, positions, self.inv_freq)
        k = ops.rope(k, positions, self.inv_freq)
        keys, values = cache.update(layer, k, v)
        out = ops.attention(
            q, keys, values, scale=self.scale, q_offset=offset, sliding_window=self.sliding_window
        )
        out = out.transpose(0, 2, 1, 3).reshape(B, L, self.n_heads * self.head_dim)
        return ops.linear(out, self.o_proj, self.o_bias)


MLP = llama.MLP


class TransformerBlock(llama.TransformerBlock):
    def __init__(self, args: ModelArgs, w: Scope, inv_freq: np.ndarray, layer: int):
        D = args.hidden_size
        self.eps = args.rms_norm_eps
        self.self_attn = Attention(args, w.sub("self_attn."), inv_freq, layer)
        self.mlp = MLP(args, w.sub("mlp."))
        self.input_layernorm = norm_weight(w("input_layernorm.weight", (D,)))
        self.post_attention_layernorm = norm_weight(w("post_attention_layernorm.weight", (D,)))


class Model(llama.Model):
    """Qwen3ForCausalLM: same keys as Llama plus ``self_attn.q_norm`` / ``k_norm``."""

    def __init__(self, config: dict, weights: Weights, ops: Ops):
        CausalLM.__init__(self)
        args = self.args = args_from_config(ModelArgs, config)
        self.ops = ops
        D, V = args.hidden_size, args.vocab_size
        w = Scope(weights, "", ops)
        inv_freq = rope_inv_freq(rope_parameters(config), args.head_dim)
        self.embed_tokens = w("model.embed_tokens.weight", (V, D))
        self.layers = [
            TransformerBlock(args, w.sub(f"model.layers.{i}."), inv_freq, i)
            for i in range(args.num_hidden_layers)
        ]
        self.norm = norm_weight(w("model.norm.weight", (D,)))
        tied = args.tie_word_embeddings or not w.has("lm_head.weight")
        self.lm_head: Any = self.embed_tokens if tied else w("lm_head.weight", (V, D), linear=True)
        self.n_layers, self.n_kv_heads, self.head_dim = len(self.layers), args.num_key_value_heads, args.head_dim
        self.max_context, self.vocab_size = args.max_position_embeddings, V
