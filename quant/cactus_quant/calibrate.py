"""Activation statistics without a dataset: Hessians from text the model writes itself.

CQ4's error feedback (feedback.py) needs, for every linear layer, the second
moment ``H = X^T X / tokens`` of its inputs.  A causal LM can supply its own
inputs: it samples plain text from its start token and chats (its own text as a
user turn, then its own reply: a chat model's control tokens carry activations
plain text never produces), then reads them back while every named linear layer
adds ``x^T x`` to its tensor's Hessian.  Accumulating ``H`` instead of keeping the
rows bounds memory by the layer widths (``in^2`` per tensor), not by the number
of tokens, so many more tokens fit than a row cap would allow; the measured gain
from 2K to 16K self-written tokens is in docs/quantization.md.

Sampling is seeded, so a conversion is deterministic.  An encoder cannot write
its own text: :func:`self_hessians` returns None and the caller stays data-free.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from cactus_core.graph import Ops

#: Self-written texts and their length in tokens: 128 x 128 (~16K tokens) measured
#: best on the default model among 16, 32, 64 and 128 samples (docs/quantization.md).
DEFAULT_SAMPLES = 128
DEFAULT_LENGTH = 128
#: Feedback damping (times mean diag H) for Hessians of that many tokens: 0.03
#: gave the lowest KL there; 0.1 and 0.3 suit fewer tokens (docs/quantization.md).
SELF_DAMP = 0.03


class HessianOps(Ops):
    """Ops that add ``x^T x`` of every named linear layer's input to that tensor's Hessian."""

    def __init__(self, backends):
        super().__init__(backends)
        self.names: dict[int, str] = {}
        self.sums: dict[str, np.ndarray] = {}
        self.counts: dict[str, int] = {}
        self.recording = True  # off while the model writes: an outer product per decoded token is wasted work

    def name_weight(self, name: str, w) -> None:
        self.names[id(w)] = name

    def linear(self, x, w, bias=None):
        name = self.names.get(id(w)) if self.recording else None
        if name is not None:
            rows = np.asarray(x, dtype=np.float64).reshape(-1, x.shape[-1])
            acc = self.sums.get(name)
            if acc is None:
                acc = self.sums[name] = np.zeros((rows.shape[1], rows.shape[1]))
            acc += rows.T @ rows
            self.counts[name] = self.counts.get(name, 0) + len(rows)
        return super().linear(x, w, bias)

    def hessians(self) -> dict[str, np.ndarray]:
        """name -> ``X^T X / tokens`` of everything read so far."""
        return {n: s / max(self.counts[n], 1) for n, s in self.sums.items()}


def self_hessians(model_dir: str, samples: int = DEFAULT_SAMPLES, length: int = DEFAULT_LENGTH, seed: int = 0,
                  tokens: Optional[Sequence[Sequence[int]]] = None,
                  backend: str = "auto") -> Optional[dict[str, np.ndarray]]:
    """Per linear weight name, the input Hessian while the float model reads its own text.

    ``tokens`` replaces the self-written text (e.g. windows of a user's
    calibration file).  Returns None when the model cannot write text (an encoder)
    and no ``tokens`` are given.
    """
    from cactus_core import plugins
    from cactus_core.engine import Engine

    from .sensitivity import calibration_tokens

    ops = HessianOps(plugins.select_backends(backend))
    # a self-written chat is a template around a 48-token user turn plus the reply
    longest = 2 * length + 256 if tokens is None else max(len(t) for t in tokens) + 8
    engine = Engine.load(model_dir, context_length=longest, ops=ops)
    if tokens is None:
        if engine.generator is None:
            return None
        ops.recording = False
        tokens = calibration_tokens(engine, samples=samples, length=length, seed=seed)
        ops.recording = True
    for ids in tokens:
        if len(ids) > 1:
            engine.logits(list(ids))
    return ops.hessians()
