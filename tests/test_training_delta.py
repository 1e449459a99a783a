"""training.delta: a checkpoint kept as an int8 difference from another rebuilds to within the code's step."""
import shutil

import numpy as np
import pytest
import torch
import transformers
from safetensors.numpy import load_file, save_file
from tinymodel import make_chat_model

from training import delta, soup


@pytest.fixture(scope="module")
def base_and_members(tmp_path_factory):
    """A random checkpoint and two small continuations of it (the base plus noise), as a soup's members are."""
    root = tmp_path_factory.mktemp("delta")
    make_chat_model(root / "base", seed=1)
    w = load_file(str(root / "base" / "model.safetensors"))
    members = []
    for i in (1, 2):
        rng = np.random.default_rng(i)
        shutil.copytree(root / "base", root / f"m{i}")
        moved = {k: (v.astype(np.float32) + rng.normal(0, 0.01, v.shape)).astype(v.dtype) for k, v in w.items()}
        save_file(moved, str(root / f"m{i}" / "model.safetensors"), metadata={"format": "pt"})
        members.append(root / f"m{i}")
    return root / "base", members


def test_apply_at_one_rebuilds_the_soup(base_and_members, tmp_path):
    base, members = base_and_members
    d = delta.pack(base, members)
    assert any(v.dtype == np.int8 for v in d.values())
    got = load_file(str(delta.apply(base, d, 1.0, tmp_path / "r") / "model.safetensors"))
    want = load_file(str(soup.soup(members, tmp_path / "s") / "model.safetensors"))
    b = load_file(str(base / "model.safetensors"))
    for k, v in want.items():
        change = np.abs(v.astype(np.float32) - b[k].astype(np.float32)).max()
        err = np.abs(got[k].astype(np.float32) - v.astype(np.float32)).max()
        # half an int8 step of the largest change, plus the float rounding of both sides
        assert err <= change / 254 + 2 * np.abs(v.astype(np.float32)).max() * 2.0 ** -10 + 1e-7, k
    # the rebuilt checkpoint is a model transformers loads, with the base's other files
    m = transformers.AutoModelForCausalLM.from_pretrained(str(tmp_path / "r"))
    assert isinstance(m(torch.tensor([[1, 2, 3]])).logits, torch.Tensor)
    assert (tmp_path / "r" / "tokenizer.json").read_bytes() == (base / "tokenizer.json").read_bytes()


def test_alpha_scales_the_change(base_and_members, tmp_path):
    base, members = base_and_members
    d = delta.pack(base, members)
    b = load_file(str(base / "model.safetensors"))
    zero = load_file(str(delta.apply(base, d, 0.0, tmp_path / "z") / "model.safetensors"))
    half = load_file(str(delta.apply(base, d, 0.5, tmp_path / "h") / "model.safetensors"))
    full = load_file(str(delta.apply(base, d, 1.0, tmp_path / "f") / "model.safetensors"))
    k = next(k for k, v in b.items() if v.ndim == 2)
    np.testing.assert_array_equal(zero[k], b[k])
    mid = (b[k].astype(np.float32) + full[k].astype(np.float32)) / 2
    np.testing.assert_allclose(half[k].astype(np.float32), mid, atol=2e-3)


def test_cli_errors_are_one_line(base_and_members, tmp_path, capsys):
    base, members = base_and_members
    path = tmp_path / "d.safetensors"
    assert delta.main(["pack", "--base", str(base), "--out", str(path), *map(str, members)]) == 0
    bad = load_file(str(path))
    bad.pop(next(iter(bad)))
    save_file(bad, str(tmp_path / "bad.safetensors"))
    assert delta.main(["apply", "--base", str(base), "--delta", str(tmp_path / "bad.safetensors"),
                       "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    assert delta.main(["pack", "--base", str(tmp_path / "nowhere"), "--out", str(path), str(members[0])]) == 1
