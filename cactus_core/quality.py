"""Measuring a quantized bundle against its float model, and calibration without data.

- :func:`heldout_text` is text every Python install carries (standard-library
  docstrings), so ``cactus convert --report`` works offline on any machine;
  ``--eval-text FILE`` replaces it.
- :func:`compare` runs both models over the same token windows and reports the
  mean KL divergence of the quantized model's next-token distribution from the
  float model's, and both perplexities.
- :func:`self_calibration` makes GPTQ and CQ's error feedback calibration-free:
  the float model samples its own text, and the inputs that reach every linear
  layer while it reads that text are recorded by tensor name.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Optional

import numpy as np

from .graph import Ops

_MODULES = ("json", "textwrap", "argparse", "string", "fractions", "statistics", "calendar",
            "difflib", "shlex", "heapq", "bisect", "functools")


def heldout_text(max_chars: int = 20000) -> str:
    """Docstrings of a fixed list of standard-library modules, in a fixed order."""
    parts: list[str] = []
    for name in _MODULES:
        mod = importlib.import_module(name)
        for obj in [mod, *(v for _, v in sorted(vars(mod).items()) if inspect.isfunction(v) or inspect.isclass(v))]:
            doc = inspect.getdoc(obj)
            if doc and len(doc) > 80:
                parts.append(doc)
        if sum(map(len, parts)) > max_chars:
            break
    return "\n\n".join(parts)[:max_chars]


def windows(engine, text: str, window: int = 256, max_windows: int = 8) -> list[list[int]]:
    """Non-overlapping token windows of ``text`` for evaluation."""
    ids = engine.tokenizer.encode(text)
    window = min(window, engine.context_length)
    return [ids[i : i + window] for i in range(0, len(ids) - window + 1, window)][:max_windows] or [ids[:window]]


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z.astype(np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def compare(float_engine, quant_engine, text: Optional[str] = None, window: int = 256,
            max_windows: int = 8, segments: Optional[list[tuple[list[int], int]]] = None) -> dict:
    """KL(float || quant) per token and both perplexities.

    Scored over token windows of ``text`` (default: held-out text), or over
    ``segments``: ``(ids, start)`` pairs scoring only the tokens from ``start`` on,
    e.g. the assistant turns of a chat model that was never trained on prompts.
    """
    if segments is None:
        segments = [(ids, 1) for ids in windows(float_engine, text or heldout_text(), window, max_windows)]
    kls, nll_f, nll_q, n = [], 0.0, 0.0, 0
    for ids, start in segments:
        lp = _log_softmax(float_engine.logits(ids))[start - 1 : -1]
        lq = _log_softmax(quant_engine.logits(ids))[start - 1 : -1]
        kls.append(np.sum(np.exp(lp) * (lp - lq), axis=-1))
        nxt = np.asarray(ids[start:])
        nll_f -= lp[np.arange(len(nxt)), nxt].sum()
        nll_q -= lq[np.arange(len(nxt)), nxt].sum()
        n += len(nxt)
    kl = np.concatenate(kls)
    ppl_f, ppl_q = float(np.exp(nll_f / n)), float(np.exp(nll_q / n))
    return {"tokens": int(n), "kl_mean": float(kl.mean()), "kl_p99": float(np.quantile(kl, 0.99)),
            "perplexity_float": ppl_f, "perplexity_quant": ppl_q,
            "perplexity_delta_pct": 100.0 * (ppl_q / ppl_f - 1.0)}


class RecordingOps(Ops):
    """Ops that keep the inputs of every named linear layer (for calibration)."""

    def __init__(self, backends, max_rows: int = 2048):
        super().__init__(backends)
        self.names: dict[int, str] = {}
        self.inputs: dict[str, list[np.ndarray]] = {}
        self.max_rows = max_rows

    def name_weight(self, name: str, w) -> None:
        self.names[id(w)] = name

    def linear(self, x, w, bias=None):
        name = self.names.get(id(w))
        if name is not None:
            rows = self.inputs.setdefault(name, [])
            if sum(len(r) for r in rows) < self.max_rows:
                rows.append(np.array(x.reshape(-1, x.shape[-1]), dtype=np.float32))
        return super().linear(x, w, bias)


def self_calibration(model_dir: str, samples: int = 8, length: int = 128, seed: int = 0,
                     max_rows: int = 2048) -> dict[str, np.ndarray]:
    """Linear-layer inputs recorded while the float model reads text it sampled itself."""
    from . import plugins
    from .engine import Engine
    from .generate import SamplingParams

    ops = RecordingOps(plugins.select_backends("auto"), max_rows=max_rows)
    engine = Engine.load(model_dir, context_length=length + 8, ops=ops)
    starts = engine.tokenizer.eos_token_ids[:1] or [0]
    bos = engine.tokenizer.bos_token_id
    texts = []
    for i in range(samples):
        gen = engine.generator
        prompt = [bos] if bos is not None else [starts[0]]
        res = gen.generate(prompt, SamplingParams(max_tokens=length, temperature=1.0, top_p=0.95, seed=seed + i),
                           decode=lambda t: "")
        texts.append(prompt + res.tokens)
    ops.inputs.clear()  # keep only the inputs seen while reading the finished samples
    for ids in texts:
        engine.logits(ids)
    return {name: np.concatenate(rows)[:max_rows] for name, rows in ops.inputs.items()}
