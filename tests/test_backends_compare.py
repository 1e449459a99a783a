"""Every usable backend runs the same model; logits and greedy tokens must agree.

Reuse it for a new backend with one line: register its plugin module in
``PLUGIN_MODULES`` (or pass your own chains to :func:`compare_backends`)::

    report = compare_backends(model_dir, {"mine": [MyBackend(), NumpyBackend()]})

Each backend runs in the chain ``[backend, numpy_ref]`` so the ops it lacks
fall back to the reference, and what it computes is compared against
numpy_ref alone.
"""

from __future__ import annotations

import importlib
import json
import os
from typing import Optional, Sequence

import numpy as np
import pytest

from cactus_core import plugins
from cactus_core.backends.numpy_ref import NumpyBackend
from cactus_core.generate import Generator, SamplingParams
from cactus_core.graph import OPS, Ops, weight_format
from cactus_core.models import model_module
from cactus_core.weights import load_weights

#: Backend plugins compared when importable: (plugin name, module).
PLUGIN_MODULES = [
    ("mlx_ref", "cactus_mlx_ref.plugin"),
    ("cpu_neon", "cactus_cpu_neon.plugin"),
    ("metal", "cactus_metal.plugin"),
]


def load_model(model_dir: str, backends: Sequence):
    """A model from ``model_dir`` whose ops dispatch over ``backends``."""
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    return model_module(config).Model(config, load_weights(model_dir), Ops(list(backends)))


def run_model(model_dir: str, backends: Sequence, ids: Sequence[int], prompt: Sequence[int],
              max_tokens: int) -> dict:
    """Logits of ``ids`` (one prefill) and ``max_tokens`` greedy tokens after ``prompt``."""
    model = load_model(model_dir, backends)
    gen = Generator(model)
    logits = model.logits(model.forward(np.asarray([ids]), gen.cache))[0]
    tokens = Generator(model).generate(list(prompt), SamplingParams(max_tokens=max_tokens),
                                       decode=lambda t: "").tokens
    served = {op: model.ops.backend_for(op) for op in OPS if op not in ("linear", "embedding")}
    weights = load_weights(model_dir)
    for fmt in {weight_format(weights[name]) for name in weights.keys()}:
        # Which backend multiplies (and looks up) weights of each stored format.
        served[f"linear:{fmt}"] = model.ops.backend_for("linear", fmt)
    return {"logits": logits, "tokens": tokens, "served": served}


def compare_backends(model_dir: str, backends: dict[str, Sequence], *, reference: Optional[Sequence] = None,
                     n_ids: int = 24, max_tokens: int = 24, rtol: float = 1e-4, seed: int = 0) -> dict:
    """Run ``model_dir`` on each backend chain and assert it agrees with ``reference``.

    ``backends`` maps a label to a backend chain; ``reference`` defaults to
    numpy_ref alone.  Logits must agree within ``rtol`` of their largest
    magnitude and greedy tokens must be identical.  Returns the per-backend
    results (logits, tokens, which backend served each op) for reporting.
    """
    reference = reference or [NumpyBackend()]
    with open(os.path.join(model_dir, "config.json")) as f:
        vocab = json.load(f)["vocab_size"]
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, vocab, size=n_ids).tolist()
    prompt = rng.integers(0, vocab, size=6).tolist()
    want = run_model(model_dir, reference, ids, prompt, max_tokens)
    results = {}
    for label, chain in backends.items():
        got = run_model(model_dir, chain, ids, prompt, max_tokens)
        rel = float(np.abs(got["logits"] - want["logits"]).max() / np.abs(want["logits"]).max())
        assert rel < rtol, f"{label}: logits differ from the reference by {rel:.2e} (relative)"
        assert got["tokens"] == want["tokens"], f"{label}: greedy tokens differ from the reference"
        results[label] = {**got, "max_rel_error": rel}
    return results


def usable_backends(register_plugin) -> dict[str, list]:
    """Every registered, usable backend on this device, each as ``[backend, numpy_ref]``."""
    for name, module in PLUGIN_MODULES:
        try:
            register_plugin(importlib.import_module(module), name=name)
        except ImportError:
            continue  # not installed: nothing to compare
    chains = {}
    for info in plugins.backends():
        if info.available and info.name != "numpy_ref":
            chains[info.name] = [info.factory(), NumpyBackend()]
    return chains


@pytest.mark.parametrize("arch", ["qwen3-gqa", "gemma3-softcap"])
def test_every_usable_backend_agrees_with_numpy_ref(arch, tmp_path, register_plugin):
    from test_models import build_reference

    _, model_dir = build_reference(arch, tmp_path)
    chains = usable_backends(register_plugin)
    if not chains:
        pytest.skip("only numpy_ref is usable here: install a backend plugin to compare")
    results = compare_backends(model_dir, chains)
    for label, res in results.items():
        # The comparison is only meaningful if the backend really ran its own kernels.
        assert label in res["served"].values(), f"{label} served no op: {res['served']}"
