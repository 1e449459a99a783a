"""training.fp8: float8 matrices in a plain safetensors checkpoint that transformers and the engine read."""
import json
import struct
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file
from tinymodel import make_chat_model

from training import fp8


def _dtypes(path: Path) -> dict[str, str]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    return {k: v["dtype"] for k, v in header.items()}


def test_fp8_checkpoint_halves_matrices_and_keeps_the_logits_close(tmp_path):
    src = Path(make_chat_model(tmp_path / "m", seed=5, num_hidden_layers=2))
    size = fp8.convert(src, tmp_path / "f8")
    dtypes = _dtypes(tmp_path / "f8" / "model.safetensors")
    assert dtypes["model.embed_tokens.weight"] == "F8_E4M3"
    assert dtypes["model.layers.0.mlp.up_proj.weight"] == "F8_E4M3"
    assert dtypes["model.norm.weight"] == "F32"  # norms keep their type
    assert size < 0.3 * (src / "model.safetensors").stat().st_size  # float32 source: ~4x smaller
    assert (tmp_path / "f8" / "tokenizer.json").read_bytes() == (src / "tokenizer.json").read_bytes()
    a = transformers.AutoModelForCausalLM.from_pretrained(str(src), dtype=torch.float32).eval()
    b = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "f8"), dtype=torch.float32).eval()
    ids = torch.tensor([[3, 17, 42, 8, 99, 5]])
    with torch.no_grad():
        la, lb = a(ids).logits, b(ids).logits
    assert not torch.equal(la, lb)  # rounded, so not the same model bit for bit
    assert (la - lb).norm() / la.norm() < 0.1


def test_weights_beyond_e4m3_range_are_refused(tmp_path):
    src = Path(make_chat_model(tmp_path / "m", seed=6, num_hidden_layers=1))
    state = load_file(str(src / "model.safetensors"))
    state["model.layers.0.mlp.up_proj.weight"][0, 0] = 1000.0
    save_file(state, str(src / "model.safetensors"))
    with pytest.raises(SystemExit, match="does not fit float8"):
        fp8.main(["--init", str(src), "--out", str(tmp_path / "f8")])
    with pytest.raises(SystemExit, match="no model.safetensors"):
        fp8.main(["--init", str(tmp_path), "--out", str(tmp_path / "f8")])
