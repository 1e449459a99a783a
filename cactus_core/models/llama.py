"""Llama (and Mistral): RMSNorm, GQA attention with RoPE (llama3/linear scaling), SwiGLU MLP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from ..graph import DecoderBlock, Ops
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


class TransformerBlock:
    attention_class = Attention

    def __init__(self, args: ModelArgs, w: Scope, inv_freq: np.ndarray, layer: int):
        D = args.hidden_size
        self.eps = args.rms_norm_eps
        self.self_attn = self.attention_class(args, w.sub("self_attn."), inv_freq, layer)
        self.mlp = MLP(args, w.sub("mlp."))
        self.input_layernorm = norm_weight(w("input_layernorm.weight", (D,)))
        self.post_attention_layernorm = norm_weight(w("post_attention_layernorm.weight", (D,)))
        a, m = self.self_attn, self.mlp
        # The whole block is one op: a backend may run it in one call (cpu_neon does for
        # one-token decode); the others compose it from multi_linear, rope_qk, ... (graph.py).
        self.spec = DecoderBlock(
            attn_norm=self.input_layernorm, mlp_norm=self.post_attention_layernorm, eps=self.eps,
            qkv=a.qkv_proj, qkv_bias=a.qkv_bias, q_norm=a.q_norm, k_norm=a.k_norm, inv_freq=a.inv_freq,
            n_heads=a.n_heads, n_kv_heads=a.n_kv_heads, head_dim=a.head_dim, scale=a.scale,
            sliding_window=a.sliding_window, o_proj=a.o_proj, o_bias=a.o_bias, gate=m.gate_proj, up=m.up_proj,
            down=m.down_proj, gate_bias=m.gate_bias, up_bias=m.up_bias, down_bias=m.down_bias, act=m.act)

    def __call__(self, ops: Ops, x: np.ndarray, cache, layer: int) -> np.ndarray:
        keys, values = cache.layer(layer, x.shape[1])  # the whole preallocated (B, Hkv, max_len, d)
        return ops.decoder_block(x, self.spec, keys, values, cache.offset)


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
        self.specs = tuple(layer.spec for layer in self.layers)  # for ops.decoder_stack
        self.norm = norm_weight(w("model.norm.weight", (D,)))
        tied = args.tie_word_embeddings or not w.has("lm_head.weight")
        self.lm_head: Any = self.embed_tokens if tied else w("lm_head.weight", (V, D), linear=True)
        self.n_layers, self.n_kv_heads, self.head_dim = len(self.layers), args.num_key_value_heads, args.head_dim
        self.max_context, self.vocab_size = args.max_position_embeddings, V

    def forward(self, ids: np.ndarray, cache) -> np.ndarray:
        ops = self.ops
        h = ops.embedding(self.embed_tokens, ids)  # (B, L, D)
        if self.capture:  # hidden states wanted between layers (the probe): one call each
            for i, layer in enumerate(self.layers):
                h = layer(ops, h, cache, i)
                self._keep(i, h)
        else:  # one call for all layers: cpu_neon decodes a token without returning to Python
            h = ops.decoder_stack(h, self.specs, cache.layers(ids.shape[1]), cache.offset)
        cache.advance(ids.shape[1])
        return ops.rms_norm(h, self.norm, self.args.rms_norm_eps)

    def logits(self, h: np.ndarray) -> np.ndarray:
        return self.ops.linear(h, self.lm_head)
