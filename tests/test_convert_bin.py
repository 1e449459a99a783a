"""`cactus convert` from PyTorch `.bin` checkpoints (one file, or shards with an index):
the bundle is byte for byte the one the same weights as safetensors give, and a broken
`.bin` checkpoint gives one line."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tinymodel import make_chat_model

pytest.importorskip("cactus_quant", reason="the quantizer plugin is not installed (pip install ./quant)")
torch = pytest.importorskip("torch")


def cactus_cli(*args):
    return subprocess.run([sys.executable, "-m", "cactus_core.cli", *args], capture_output=True, text=True,
                          timeout=600)


def as_bin(src: Path, dst: Path, shards: int = 1) -> Path:
    """The checkpoint at ``src`` as older exporters wrote it: ``torch.save`` of its state
    dict (transformers 5 writes only safetensors), in ``shards`` files with an index."""
    from safetensors.torch import load_file

    dst.mkdir()
    for f in src.iterdir():  # config, tokenizer and template files
        if not f.name.endswith(".safetensors"):
            shutil.copy2(f, dst / f.name)
    state = load_file(src / "model.safetensors")
    names = sorted(state)
    if shards == 1:
        torch.save(state, dst / "pytorch_model.bin")
        return dst
    weight_map = {}
    for i in range(shards):
        file = f"pytorch_model-{i + 1:05d}-of-{shards:05d}.bin"
        part = {n: state[n] for n in names[i::shards]}
        torch.save(part, dst / file)
        weight_map.update({n: file for n in part})
    (dst / "pytorch_model.bin.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return dst


def same_tensors(a: Path, b: Path) -> bool:
    """Both files hold the same tensors, bit for bit (shards may change their order)."""
    import numpy as np
    from safetensors.numpy import load_file

    x, y = load_file(a), load_file(b)
    return set(x) == set(y) and all(x[n].dtype == y[n].dtype and np.array_equal(x[n], y[n]) for n in x)


@pytest.fixture(scope="module")
def src(tmp_path_factory) -> Path:
    return Path(make_chat_model(tmp_path_factory.mktemp("bin") / "src", hidden_size=128, intermediate_size=256,
                                num_attention_heads=4, num_key_value_heads=2, head_dim=32))


def one_line_error(p, needle):
    assert p.returncode != 0 and "Traceback" not in p.stderr
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert needle in lines[-1], p.stderr


def test_a_bin_checkpoint_converts_to_the_same_bundle_as_its_safetensors(src, tmp_path):
    binary = as_bin(src, tmp_path / "bin")
    assert (binary / "pytorch_model.bin").is_file()
    a = cactus_cli("convert", str(src), str(tmp_path / "a"), "--calibration-samples", "2", "--json")
    b = cactus_cli("convert", str(binary), str(tmp_path / "b"), "--calibration-samples", "2", "--json")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == (tmp_path / "b" / "model.safetensors").read_bytes()
    report = json.loads(b.stdout)
    assert report["source"] == str(binary) and report["calibration"] == "self-written text"
    assert json.loads((tmp_path / "b" / "cactus.json").read_text())["source"] == str(binary)
    run = cactus_cli("run", str(tmp_path / "b"), "-p", "hi", "--json", "--max-tokens", "3", "--backend", "numpy_ref")
    assert run.returncode == 0, run.stderr


def test_sharded_bin_weights_are_read_through_their_index(src, tmp_path):
    binary = as_bin(src, tmp_path / "bin", shards=3)
    a = cactus_cli("convert", str(src), str(tmp_path / "a"), "--no-calibrate", "--report", "--json")
    b = cactus_cli("convert", str(binary), str(tmp_path / "b"), "--no-calibrate", "--report", "--json")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert same_tensors(tmp_path / "a" / "model.safetensors", tmp_path / "b" / "model.safetensors")
    assert json.loads(b.stdout)["quality"]["kl_mean"] == pytest.approx(json.loads(a.stdout)["quality"]["kl_mean"])
    assert not list(Path(tmp_path / "b").glob("*.bin"))  # the bundle holds safetensors only


def test_broken_bin_checkpoints_give_one_line(src, tmp_path):
    binary = as_bin(src, tmp_path / "bin")
    (binary / "pytorch_model.bin").write_bytes(b"not a pickle at all")
    one_line_error(cactus_cli("convert", str(binary), str(tmp_path / "o")), "cannot read pytorch_model.bin")
    assert not (tmp_path / "o").exists()

    shards = as_bin(src, tmp_path / "shards", shards=3)
    first = sorted(shards.glob("pytorch_model-*.bin"))[0]
    first.unlink()
    one_line_error(cactus_cli("convert", str(shards), str(tmp_path / "o")), f"shard {first.name} listed")

    empty = tmp_path / "empty"
    empty.mkdir()
    shutil.copy2(src / "config.json", empty / "config.json")
    one_line_error(cactus_cli("convert", str(empty), str(tmp_path / "o")), "no .safetensors")
