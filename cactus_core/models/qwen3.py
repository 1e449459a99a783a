"""Qwen3: Llama's block with per-head RMSNorm on queries and keys (QK-norm) before RoPE."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from . import llama
from .base import Scope, norm_weight


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
        super().__init__(args, w, inv_freq, layer)
        self.sliding_window = args.window_for(layer)
        # Normed per head before RoPE, in the same fused call (ops.rope_qk).
        self.q_norm = norm_weight(w("q_norm.weight", (args.head_dim,)))
        self.k_norm = norm_weight(w("k_norm.weight", (args.head_dim,)))


MLP = llama.MLP


class TransformerBlock(llama.TransformerBlock):
    attention_class = Attention


class Model(llama.Model):
    """Qwen3ForCausalLM: same keys as Llama plus ``self_attn.q_norm`` / ``k_norm``."""

    args_class, block_class = ModelArgs, TransformerBlock
