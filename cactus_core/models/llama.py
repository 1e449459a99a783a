"""Llama (and Mistral): RMSNorm, GQA attention with RoPE (llama3/linear scaling), SwiGLU MLP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

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
    rms_norm_eps: float = 1e-6
    num_key_value_heads: Optional[int] = None
    head_dim: Optional[int] = None
    max_position_embeddings: int = 2048
    attention_bias: bool = False
    mlp_bias: bool = False
    tie_word_embeddings: bool = False
    hidden_act: str = "silu"
    sliding_window: Optional[int] = None  # Mistral

    def __post_init__(self):
        self.num_key_value_heads = self.num_key_value_heads or self.num_attention_heads
        self.head_dim = self.head_dim or self.hidden_size // self.num_attention_heads


_ACT = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_pytorch_tanh": "gelu_tanh"}


class Attention:
    def __init__(self, args: ModelArgs, w: Scope, inv_freq: np.ndarray, layer: int):
        D, H, Hkv, d = args.hidden_size, args.num_attention_heads, args.num_key_value_heads, args.head_dim
        self.n_heads, self.n_kv_heads, self.head_dim = H, Hkv, d
        self.scale = d**-0.5
        self.sliding_window = args.sliding_window
        self.inv_freq = inv_freq
        self.q_proj = w("q_proj.weight", (H * d, D), linear=True)
        self.k_proj = w("k_proj.weight", (Hkv * d, D), linear=True)
        self.v_proj = w("v_proj.weight", (Hkv * d, D), linear=True)
        self.o_proj = w("o_proj.weight", (D, H * d), linear=True)
        bias = args.attention_bias
        self.q_bias = norm_weight(w("q_proj.bias", (H * d,))) if bias else None
        self.k_bias = norm_weight(w("k_proj.bias", (Hkv * d,))) if bias else None
        self.v_bias = norm_weight(w("v_proj.bias", (Hkv * d,))) if bias else None
        self.o_bias = norm_weight(w("o_proj.bias", (D,))) if bias else None
        self.qkv_proj = (self.q_proj, self.k_proj, self.v_proj)
        self.qkv_bias = (self.q_bias, self.k_bias, self.v_bias) if bias else None
        self.q_norm = self.k_norm = None  # QK-norm weights (Qwen3 sets them)
        self.eps = args.rms_norm_eps

    def project(self, ops: Ops, x: np.ndarray, norm=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Queries, keys and values as ``(B, heads, L, head_dim)``, before RoPE, of x
        normed by ``norm`` (rms_norm's arguments) in the same call."""
        B, L, D = x.shape
        q, k, v = ops.multi_linear(x, self.qkv_proj, self.qkv_bias, norm)  # one call: they share x
        q = q.reshape(B, L, self.n_heads, self.head_dim)
        k = k.reshape(B, L, self.n_kv_heads, self.head_dim)
        v = v.reshape(B, L, self.n_kv_heads, self.head_dim)
        return q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)

    def __call__(self, ops: Ops, x: np.ndarray, cache, layer: int, norm=None) -> np.ndarray:
        B, L, D = x.shape
        q, k, v = self.project(ops, x, norm)
        offset = cache.offset
        positions = np.arange(offset, offset + L)
        q, k = ops.rope_qk(q, k, positions, self.inv_freq, self.q_norm, self.k_norm, self.eps)
        keys, values = cache.layer(layer, L)  # the whole preallocated (B, Hkv, max_len, d)
        out = ops.cached_attention(
            q, k, v, keys, values, offset, scale=self.scale, sliding_window=self.sliding_window
        )
        out = out.transpose(0, 2, 1, 3).reshape(B, L, self.n_heads * self.head_dim)
        return ops.linear(out, self.o_proj, self.o_bias)


class MLP:
    def __init__(self, args: ModelArgs, w: Scope):
        D, F = args.hidden_size, args.intermediate_size
        self.act = _ACT.get(args.hidden_act, args.hidden_act)
        self.gate_proj = w("gate_proj.weight", (F, D), linear=True)
        self.up_proj = w("up_proj.weight", (F, D), linear=True)
        self.down_proj = w("down_proj.weight", (D, F), linear=True)
        bias = args.mlp_bias
        self.gate_bias = norm_weight(w("gate_proj.bias", (F,))) if bias else None
        self.up_bias = norm_weight(w("up_proj.bias", (F,))) if bias else None
        self.down_bias = norm_weight(w("down_proj.bias", (D,))) if bias else None

    def __call__(self, ops: Ops, x: np.ndarray, norm=None) -> np.ndarray:
        h = ops.gated_linear(x, self.gate_proj, self.up_proj, self.act, self.gate_bias, self.up_bias, norm)
        return ops.linear(h, self.down_proj, self.down_bias)


class TransformerBlock:
    attention_class = Attention

    def __init__(self, args: ModelArgs, w: Scope, inv_freq: np.ndarray, layer: int):
        D = args.hidden_size
        self.eps = args.rms_norm_eps
        self.self_attn = self.attention_class(args, w.sub("self_attn."), inv_freq, layer)
        self.mlp = MLP(args, w.sub("mlp."))
        self.input_layernorm = norm_weight(w("input_layernorm.weight", (D,)))
        self.post_attention_layernorm = norm_weight(w("post_attention_layernorm.weight", (D,)))

    def __call__(self, ops: Ops, x: np.ndarray, cache, layer: int) -> np.ndarray:
        # Each pre-norm runs inside the first projections that read it (q/k/v, gate/up).
        h = x + self.self_attn(ops, x, cache, layer, norm=(self.input_layernorm, self.eps))
        return h + self.mlp(ops, h, norm=(self.post_attention_layernorm, self.eps))


class Model(CausalLM):
    """LlamaForCausalLM: ``model.embed_tokens``, ``model.layers.N``, ``model.norm``, ``lm_head``."""

    args_class, block_class = ModelArgs, TransformerBlock

    def __init__(self, config: dict, weights: Weights, ops: Ops):
        super().__init__()
        args = self.args = args_from_config(self.args_class, config)
        self.ops = ops
        D, V = args.hidden_size, args.vocab_size
        w = Scope(weights, "", ops)
        inv_freq = rope_inv_freq(rope_parameters(config), args.head_dim)
        self.embed_tokens = w("model.embed_tokens.weight", (V, D))
        self.layers = [
            self.block_class(args, w.sub(f"model.layers.{i}."), inv_freq, i)
            for i in range(args.num_hidden_layers)
        ]
        self.norm = norm_weight(w("model.norm.weight", (D,)))
        tied = args.tie_word_embeddings or not w.has("lm_head.weight")
        self.lm_head: Any = self.embed_tokens if tied else w("lm_head.weight", (V, D), linear=True)
        self.n_layers, self.n_kv_heads, self.head_dim = len(self.layers), args.num_key_value_heads, args.head_dim
        self.max_context, self.vocab_size = args.max_position_embeddings, V

    def forward(self, ids: np.ndarray, cache) -> np.ndarray:
        ops = self.ops
        h = ops.embedding(self.embed_tokens, ids)  # (B, L, D)
        for i, layer in enumerate(self.layers):
            h = layer(ops, h, cache, i)
            self._keep(i, h)
        cache.advance(ids.shape[1])
        return ops.rms_norm(h, self.norm, self.args.rms_norm_eps)

    def logits(self, h: np.ndarray) -> np.ndarray:
        return self.ops.linear(h, self.lm_head)
