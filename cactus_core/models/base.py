"""What every architecture file shares: config parsing helpers, RoPE frequencies,
scoped weight access, and the model interface the generator drives."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Optional

import numpy as np

from ..errors import ModelLoadError
from ..graph import Ops
from ..weights import Weights


def args_from_config(cls, config: dict):
    """Build a config dataclass from config.json, ignoring unknown keys."""
    names = {f.name for f in dataclasses.fields(cls)}
    try:
        return cls(**{k: v for k, v in config.items() if k in names})
    except TypeError as exc:
        raise ModelLoadError(f"config.json lacks a required field for {cls.__module__}: {exc}") from exc


def rope_parameters(config: dict, layer_type: Optional[str] = None) -> dict:
    """RoPE settings from either transformers 5 (``rope_parameters``) or 4 (``rope_theta``/``rope_scaling``) configs."""
    params = config.get("rope_parameters")
    if isinstance(params, dict) and params:
        if layer_type is not None and isinstance(params.get(layer_type), dict):
            params = params[layer_type]
        if "rope_theta" in params or "rope_type" in params:
            return dict(params)
    out = dict(config.get("rope_scaling") or {})
    out.setdefault("rope_theta", config.get("rope_theta", 10000.0))
    if "type" in out and "rope_type" not in out:
        out["rope_type"] = out.pop("type")
    return out


def rope_inv_freq(params: dict, rotary_dim: int) -> np.ndarray:
    """Inverse frequencies for rotate-half RoPE, with llama3 / linear scaling applied."""
    theta = float(params.get("rope_theta", 10000.0))
    inv = 1.0 / (theta ** (np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim))
    kind = params.get("rope_type", "default") or "default"
    if kind == "default":
        pass
    elif kind == "linear":
        inv = inv / float(params["factor"])
    elif kind == "llama3":
        factor = float(params["factor"])
        low, high = float(params["low_freq_factor"]), float(params["high_freq_factor"])
        old_len = float(params["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv
        scaled = np.where(wavelen > old_len / low, inv / factor, inv)
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = (wavelen >= old_len / high) & (wavelen <= old_len / low)
        inv = np.where(medium, smoothed, scaled)
    else:
        raise ModelLoadError(f"RoPE scaling type '{kind}' is not supported (supported: default, linear, llama3)")
    # transformers computes these in float32; match it so angles agree bit for bit.
    return inv.astype(np.float32)


class Scope:
    """Weights under a name prefix, so layer code reads like the checkpoint keys."""

    def __init__(self, weights: Weights, prefix: str, ops: Ops):
        self.weights, self.prefix, self.ops = weights, prefix, ops

    def __call__(self, name: str, shape: Optional[tuple[int, ...]] = None, linear: bool = False) -> Any:
        t = self.weights.get(self.prefix + name, shape)
        if not linear:
            return t
        t = self.ops.prepare(t)
        named = getattr(self.ops, "name_weight", None)  # calibration records inputs by tensor name
        if named is not None:
            named(self.prefix + name, t)
        return t

    def has(self, name: str) -> bool:
        return self.prefix + name in self.weights

    def sub(self, prefix: str) -> "Scope":
        return Scope(self.weights, self.prefix + prefix, self.ops)


def norm_weight(w: Any) -> np.ndarray:
    """Norm and bias vectors are tiny: widen them to float32 once at load."""
    from ..formats import to_float32

    return np.ascontiguousarray(to_float32(w), dtype=np.float32)


class CausalLM:
    """Interface of a decoder model as the generator sees it.

    ``forward(ids, cache)`` runs ``ids`` ``(B, L)`` through the blocks, appending
    to ``cache`` and returning final-normed hidden states ``(B, L, D)``;
    ``logits(h)`` applies the output head.  ``capture`` lists layer indices
    whose outputs ``forward`` keeps in ``captured`` (for the confidence probe).
    """

    args: Any
    ops: Ops
    n_layers: int
    n_kv_heads: int
    head_dim: int
    max_context: int
    vocab_size: int

    def __init__(self) -> None:
        self.capture: tuple[int, ...] = ()
        self.captured: dict[int, np.ndarray] = {}

    def forward(self, ids: np.ndarray, cache) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def logits(self, h: np.ndarray) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def _keep(self, i: int, h: np.ndarray) -> None:
        if i in self.capture:
            self.captured[i] = h.copy()
