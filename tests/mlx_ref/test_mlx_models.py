"""Whole models on mlx_ref give numpy_ref's logits and greedy tokens: float
checkpoints (llama, qwen3, gemma3), a bfloat16 checkpoint, and a bundle whose
linear layers are quantized (cq, int4, int8)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.numpy import save_file

from cactus_core.backends.numpy_ref import NumpyBackend
from cactus_core.formats import Int4Tensor, Int8Tensor
from test_backends_compare import compare_backends
from test_mlx_quant import affine_tensor, cq_tensor
from test_models import build_reference


def _compare(model_dir, mlx_backend):
    res = compare_backends(model_dir, {"mlx_ref": [mlx_backend, NumpyBackend()]})["mlx_ref"]
    assert set(res["served"].values()) == {"mlx_ref"}, res["served"]
    return res


@pytest.mark.parametrize("arch", ["llama-gqa-untied", "llama-bias-headdim", "qwen3-gqa",
                                  "gemma3-softcap", "gemma3-sliding"])
def test_greedy_tokens_match_numpy_ref(arch, tmp_path, mlx_backend):
    _, model_dir = build_reference(arch, tmp_path)
    _compare(model_dir, mlx_backend)


def test_bfloat16_checkpoint(tmp_path, mlx_backend):
    _, model_dir = build_reference("qwen3-gqa", tmp_path, dtype=torch.bfloat16)
    _compare(model_dir, mlx_backend)


def test_quantized_bundle(tmp_path, mlx_backend):
    """Random codes in every linear layer: the model is nonsense, but both backends must agree on it."""
    _, model_dir = build_reference("qwen3-gqa", tmp_path)
    with open(f"{model_dir}/config.json") as f:
        cfg = json.load(f)
    D, F, H, Hkv, d = (cfg[k] for k in ("hidden_size", "intermediate_size", "num_attention_heads",
                                        "num_key_value_heads", "head_dim"))
    shapes = {"self_attn.q_proj": (H * d, D), "self_attn.k_proj": (Hkv * d, D),
              "self_attn.v_proj": (Hkv * d, D), "self_attn.o_proj": (D, H * d),
              "mlp.gate_proj": (F, D), "mlp.up_proj": (F, D), "mlp.down_proj": (D, F)}
    rng = np.random.default_rng(5)
    tensors, arrays = {}, {}
    for i in range(cfg["num_hidden_layers"]):
        for j, (name, (out, n)) in enumerate(shapes.items()):
            if name.startswith("self_attn"):
                t = cq_tensor(rng, out, n, 6 if j % 2 else 8, 2, 32, 32)
            else:
                t = affine_tensor(rng, Int4Tensor if name != "mlp.down_proj" else Int8Tensor, out, n, 32)
            key = f"model.layers.{i}.{name}.weight"
            tensors[key] = t.manifest_entry()
            arrays.update(t.named_arrays(key))
    save_file(arrays, f"{model_dir}/quantized.safetensors")
    with open(f"{model_dir}/cactus.json", "w") as f:
        json.dump({"format_version": 1, "quantization": {"tensors": tensors}}, f)
    res = _compare(model_dir, mlx_backend)
    assert len(set(res["tokens"])) > 1  # not a degenerate run
