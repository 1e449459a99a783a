"""training.grow: a deepened checkpoint computes what the original did, and its copies can learn."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from safetensors.numpy import load_file
from tinymodel import make_chat_model

from training import grow


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return make_chat_model(tmp_path_factory.mktemp("grow") / "m", seed=4, num_hidden_layers=3)


def _load(path):
    return transformers.AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()


def test_source_layers_keeps_each_block_first_then_its_copies():
    assert grow.source_layers(3, 3) == [(0, True), (1, True), (2, True)]
    assert grow.source_layers(2, 4) == [(0, True), (0, False), (1, True), (1, False)]
    assert grow.source_layers(3, 7) == [(0, True), (0, False), (0, False), (1, True), (1, False),
                                        (2, True), (2, False)]
    with pytest.raises(grow.GrowError):
        grow.source_layers(4, 3)


def test_grown_model_gives_the_original_logits(small, tmp_path):
    grow.grow(Path(small), tmp_path / "g", 6)
    cfg = json.loads((tmp_path / "g" / "config.json").read_text())
    assert cfg["num_hidden_layers"] == 6 and len(cfg.get("layer_types", [0] * 6)) == 6
    a, b = _load(small), _load(tmp_path / "g")
    assert len(b.model.layers) == 6
    ids = torch.tensor([[3, 17, 42, 8, 99, 5, 61]])
    with torch.no_grad():
        torch.testing.assert_close(b(ids).logits, a(ids).logits, rtol=1e-5, atol=1e-5)
    # the copies are not the originals: their output projections are zero, the rest copied
    w = load_file(str(tmp_path / "g" / "model.safetensors"))
    assert not w["model.layers.1.self_attn.o_proj.weight"].any()
    assert not w["model.layers.1.mlp.down_proj.weight"].any()
    np.testing.assert_array_equal(w["model.layers.1.mlp.up_proj.weight"], w["model.layers.0.mlp.up_proj.weight"])
    assert w["model.layers.2.self_attn.o_proj.weight"].any()
    assert (tmp_path / "g" / "tokenizer.json").read_bytes() == (Path(small) / "tokenizer.json").read_bytes()


def test_zeroed_projections_get_a_gradient(small, tmp_path):
    grow.grow(Path(small), tmp_path / "g", 6)
    model = _load(tmp_path / "g").train()
    ids = torch.tensor([[3, 17, 42, 8, 99, 5, 61]])
    model(ids, labels=ids).loss.backward()
    for name in ("self_attn.o_proj", "mlp.down_proj"):
        mod = model.model.layers[1].get_submodule(name)
        assert mod.weight.grad is not None and mod.weight.grad.abs().sum() > 0


def test_bad_requests_fail_with_a_message(small, tmp_path):
    with pytest.raises(SystemExit, match="fewer than"):
        grow.main(["--init", small, "--out", str(tmp_path / "g"), "--layers", "2"])
    with pytest.raises(SystemExit, match="not a checkpoint"):
        grow.main(["--init", str(tmp_path), "--out", str(tmp_path / "g"), "--layers", "4"])
    with pytest.raises(SystemExit, match="narrower than"):
        grow.main(["--init", small, "--out", str(tmp_path / "g"), "--intermediate", "8"])


def test_widened_model_gives_the_original_logits_and_learns(small, tmp_path):
    width = json.loads((Path(small) / "config.json").read_text())["intermediate_size"] * 2
    grow.grow(Path(small), tmp_path / "w", intermediate=width)
    cfg = json.loads((tmp_path / "w" / "config.json").read_text())
    assert cfg["intermediate_size"] == width
    a, b = _load(small), _load(tmp_path / "w")
    ids = torch.tensor([[3, 17, 42, 8, 99, 5, 61]])
    with torch.no_grad():
        torch.testing.assert_close(b(ids).logits, a(ids).logits, rtol=1e-5, atol=1e-5)
    mlp = b.model.layers[0].mlp
    assert mlp.gate_proj.weight.shape[0] == width and mlp.down_proj.weight.shape[1] == width
    b.train()
    b(ids, labels=ids).loss.backward()
    half = width // 2
    assert mlp.down_proj.weight.grad[:, half:].abs().sum() > 0  # the new units' outputs learn
