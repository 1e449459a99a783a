"""The confidence probe: a small head on the model's own hidden states that says,
before any local decoding, how likely the local answer is to be right.

A probe reads the hidden state of the prompt's last position at one layer
(robust to chunked prefill and prefix reuse, and the position where the model
has "decided" how to start its answer), standardises it, and applies a small
MLP (or a linear head with ``hidden=0``).  Its logit is divided by a
temperature fitted on held-out data (temperature scaling), so the sigmoid is a
calibrated probability of a correct answer.

``cactus probe train MODEL DATA.jsonl OUT`` runs the local model on labelled
examples, grades its answers, extracts hidden states, trains and calibrates the
head, reports AUROC next to the entropy router's, and writes the probe into the
bundle (``probe.safetensors`` plus a ``probe`` entry in ``cactus.json``).
"""

from __future__ import annotations

import json
import os
from typing import Optional

import numpy as np

from .errors import BadRequestError, ModelLoadError
from .routing import Prefill, Router

PROBE_FILE = "probe.safetensors"


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z, dtype=np.float64)))


class Probe:
    """Standardise -> (Linear -> tanh ->) Linear -> /T -> sigmoid."""

    def __init__(self, layer: int, mean: np.ndarray, std: np.ndarray, w1: Optional[np.ndarray],
                 b1: Optional[np.ndarray], w2: np.ndarray, b2: float, temperature: float = 1.0):
        self.layer, self.mean, self.std = int(layer), mean.astype(np.float32), std.astype(np.float32)
        self.w1, self.b1, self.w2, self.b2 = w1, b1, w2.astype(np.float32), float(b2)
        self.temperature = float(temperature)

    @property
    def n_params(self) -> int:
        return sum(a.size for a in (self.w1, self.b1, self.w2) if a is not None) + 1

    def logit(self, features: np.ndarray) -> np.ndarray:
        """Uncalibrated logits for features ``(n, D)``."""
        z = (features - self.mean) / self.std
        if self.w1 is not None:
            z = np.tanh(z @ self.w1 + self.b1)
        return z @ self.w2 + self.b2

    def confidence(self, features: np.ndarray) -> np.ndarray:
        return _sigmoid(self.logit(features) / self.temperature)

    # --- persistence ---------------------------------------------------------------
    def save(self, path: str) -> None:
        from safetensors.numpy import save_file

        tensors = {"mean": self.mean, "std": self.std, "w2": self.w2,
                   "b2": np.array([self.b2], np.float32)}
        if self.w1 is not None:
            tensors.update(w1=self.w1.astype(np.float32), b1=self.b1.astype(np.float32))
        meta = {"layer": str(self.layer), "temperature": repr(self.temperature)}
        save_file(tensors, path, metadata=meta)

    @classmethod
    def load(cls, path: str) -> "Probe":
        from safetensors import SafetensorError
        from safetensors.numpy import safe_open

        try:
            with safe_open(path, framework="numpy") as f:
                meta = f.metadata() or {}
                t = {k: f.get_tensor(k) for k in f.keys()}
            return cls(int(meta["layer"]), t["mean"], t["std"], t.get("w1"), t.get("b1"), t["w2"],
                       float(t["b2"][0]), float(meta.get("temperature", 1.0)))
        except (OSError, KeyError, ValueError, SafetensorError) as exc:
            raise ModelLoadError(f"confidence probe {path} is missing or corrupt: {exc}") from exc


class ProbeRouter(Router):
    """Scores the prefill with the bundle's probe (registered as ``probe``)."""

    name = "probe"

    def __init__(self, engine=None, **options):
        super().__init__(engine, **options)
        spec = (getattr(engine, "manifest", None) or {}).get("probe")
        if not spec:
            raise BadRequestError("this model ships no confidence probe; train one with `cactus probe train`")
        self.probe = Probe.load(os.path.join(engine.path, spec.get("file", PROBE_FILE)))
        self.layers = (self.probe.layer,)

    def score(self, prefill: Prefill) -> float:
        h = prefill.hidden.get(self.probe.layer)
        if h is None:
            raise BadRequestError(f"probe needs layer {self.probe.layer} hidden states, which were not captured")
        return float(self.probe.confidence(h.reshape(-1, h.shape[-1])[-1:])[0])


# --- training ------------------------------------------------------------------------
def auroc(scores: np.ndarray, labels: np.ndarray) -> float:
    """Area under the ROC curve by the rank statistic (ties averaged)."""
    scores, labels = np.asarray(scores, float), np.asarray(labels, bool)
    pos, neg = labels.sum(), (~labels).sum()
    if pos == 0 or neg == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    sorted_scores = scores[order]
    i = 0
    while i < len(scores):  # average ranks over ties
        j = i
        while j + 1 < len(scores) and sorted_scores[j + 1] == sorted_scores[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2.0 + 1
        i = j + 1
    return float((ranks[labels].sum() - pos * (pos + 1) / 2) / (pos * neg))


def fit_probe(x: np.ndarray, y: np.ndarray, layer: int, hidden: int = 32, l2: float = 1e-2,
              steps: int = 600, lr: float = 0.02, seed: int = 0) -> Probe:
    """Train a probe head with Adam on binary cross-entropy (numpy, full batch)."""
    rng = np.random.default_rng(seed)
    mean, std = x.mean(0), x.std(0) + 1e-6
    z = (x - mean) / std
    D = z.shape[1]
    params = {"w2": np.zeros(hidden or D), "b2": np.zeros(1)}
    if hidden:
        params["w1"] = rng.standard_normal((D, hidden)) / np.sqrt(D)
        params["b1"] = np.zeros(hidden)
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v = {k: np.zeros_like(p) for k, p in params.items()}
    pos_weight = (len(y) - y.sum()) / max(y.sum(), 1)  # balance classes
    wts = np.where(y > 0, pos_weight, 1.0)
    wts = wts / wts.mean()
    for t in range(1, steps + 1):
        a = np.tanh(z @ params["w1"] + params["b1"]) if hidden else z
        logit = a @ params["w2"] + params["b2"][0]
        p = _sigmoid(logit)
        g = (p - y) * wts / len(y)
        grads = {"w2": a.T @ g + l2 * params["w2"], "b2": np.array([g.sum()])}
        if hidden:
            da = np.outer(g, params["w2"]) * (1 - a**2)
            grads["w1"] = z.T @ da + l2 * params["w1"]
            grads["b1"] = da.sum(0)
        for k in params:
            m[k] = 0.9 * m[k] + 0.1 * grads[k]
            v[k] = 0.999 * v[k] + 0.001 * grads[k] ** 2
            params[k] -= lr * (m[k] / (1 - 0.9**t)) / (np.sqrt(v[k] / (1 - 0.999**t)) + 1e-8)
    return Probe(layer, mean, std, params.get("w1"), params.get("b1"), params["w2"], params["b2"][0])


def fit_temperature(logits: np.ndarray, y: np.ndarray) -> float:
    """Temperature minimising the negative log-likelihood (grid then refine)."""
    def nll(t):
        p = np.clip(_sigmoid(logits / t), 1e-7, 1 - 1e-7)
        return -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))

    grid = np.exp(np.linspace(np.log(0.05), np.log(20), 200))
    return float(grid[int(np.argmin([nll(t) for t in grid]))])


def grade(result: dict, example: dict) -> int:
    """1 when the local answer matches the example's reference (or its label says so)."""
    if "label" in example:
        return int(bool(example["label"]))
    ref = example.get("reference")
    if not isinstance(ref, dict):
        raise BadRequestError("each example needs a 'label' or a 'reference' object")
    if "function_calls" in ref:  # an empty list means "no tool call is the right answer"
        want = sorted((c["name"], json.dumps(c.get("arguments", {}), sort_keys=True)) for c in ref["function_calls"])
        got = sorted((c["name"], json.dumps(c.get("arguments", {}), sort_keys=True)) for c in result["function_calls"])
        return int(want == got)
    if result["function_calls"]:
        return 0
    norm = lambda s: " ".join(str(s).lower().split()).strip(" .!")  # noqa: E731
    answer, expected = norm(result["response"]), norm(ref.get("response", ""))
    return int(bool(expected) and (answer == expected or expected in answer))
