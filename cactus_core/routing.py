"""Built-in routers: how confident the local model is, as a number in [0, 1].

A router looks at the prefill (the logits and hidden states of the prompt's
last position) and returns a confidence; ``complete()`` hands the request to
the cloud when it falls below the threshold.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

DEFAULT_THRESHOLD = 0.7


class Router:
    """Base class: ``score(prefill)`` -> confidence in [0, 1]."""

    name = "router"

    def __init__(self, engine: Any = None, **options: Any):
        self.engine = engine
        self.options = options

    def score(self, prefill: "Prefill") -> float:
        raise NotImplementedError


class Prefill:
    """What a router can read after prefill: last-position logits and hidden states."""

    def __init__(self, logits: np.ndarray, hidden: dict[int, np.ndarray] | None = None):
        self.logits = logits  # (vocab,) float32 for the next token
        self.hidden = hidden or {}  # layer index -> (L, D) hidden states


class EntropyRouter(Router):
    """Confidence = 1 - normalised entropy of the next-token distribution."""

    name = "entropy"

    def score(self, prefill: Prefill) -> float:
        z = prefill.logits.astype(np.float64)
        z = z - z.max()
        p = np.exp(z)
        p /= p.sum()
        h = -float(np.sum(p * np.log(np.clip(p, 1e-30, None))))
        return float(min(1.0, max(0.0, 1.0 - h / math.log(len(p)))))


class AlwaysLocalRouter(Router):
    """Never hands off."""

    name = "always_local"

    def score(self, prefill: Prefill) -> float:
        return 1.0


class AlwaysCloudRouter(Router):
    """Always hands off (when a provider is configured)."""

    name = "always_cloud"

    def score(self, prefill: Prefill) -> float:
        return 0.0
