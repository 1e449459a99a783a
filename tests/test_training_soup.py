"""training.soup: the mean of several checkpoints of one model is a loadable checkpoint."""
import json
import shutil

import numpy as np
import pytest
import torch
import transformers
from safetensors.numpy import load_file
from tinymodel import make_chat_model

from training import soup


@pytest.fixture(scope="module")
def members(tmp_path_factory):
    """Three random checkpoints with one config and one tokenizer (seeds differ)."""
    root = tmp_path_factory.mktemp("soup")
    make_chat_model(root / "a", seed=1)
    paths = [root / "a"]
    for name, seed in (("b", 2), ("c", 3)):
        make_chat_model(root / name, seed=seed)
        # the tokenizer is trained the same way each time; copying makes its bytes equal by construction
        shutil.copy(root / "a" / "tokenizer.json", root / name / "tokenizer.json")
        paths.append(root / name)
    return paths


def test_soup_is_the_mean_of_its_members(members, tmp_path):
    out = soup.soup(members, tmp_path / "s")
    got = load_file(str(out / "model.safetensors"))
    states = [load_file(str(m / "model.safetensors")) for m in members]
    assert set(got) == set(states[0])
    for k, v in got.items():
        want = np.mean([sd[k].astype(np.float32) for sd in states], axis=0).astype(states[0][k].dtype)
        assert v.dtype == states[0][k].dtype
        np.testing.assert_array_equal(v, want)
    # a differing member moves the mean: not a copy of the first
    k = next(iter(got))
    assert not np.array_equal(got[k], states[0][k])
    assert (out / "tokenizer_config.json").read_text() == (members[0] / "tokenizer_config.json").read_text()


def test_soup_loads_in_transformers_and_matches_averaged_logits(members, tmp_path):
    out = soup.soup(members[:2], tmp_path / "s")
    model = transformers.AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32).eval()
    a, b = (transformers.AutoModelForCausalLM.from_pretrained(str(m), dtype=torch.float32) for m in members[:2])
    mean = {k: (a.state_dict()[k] + b.state_dict()[k]) / 2 for k in a.state_dict()}
    a.load_state_dict(mean)
    ids = torch.tensor([[5, 17, 42, 8, 99]])
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, a.eval()(ids).logits, rtol=1e-4, atol=1e-4)


def test_members_must_share_config_and_tokenizer(members, tmp_path):
    odd = tmp_path / "odd"
    shutil.copytree(members[0], odd)
    cfg = json.loads((odd / "config.json").read_text())
    cfg["rms_norm_eps"] = 1e-3
    (odd / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(soup.SoupError, match="config.json differs"):
        soup.average([members[0], odd])
    shutil.copy(members[0] / "config.json", odd / "config.json")
    (odd / "tokenizer.json").write_text((odd / "tokenizer.json").read_text().replace("<|im_end|>", "<|im_stop|>"))
    with pytest.raises(soup.SoupError, match="tokenizer.json differs"):
        soup.average([members[0], odd])
    with pytest.raises(soup.SoupError, match="at least two"):
        soup.average(members[:1])


def test_cli_gives_one_line_errors(members, tmp_path, capsys):
    assert soup.main(["--out", str(tmp_path / "x"), str(members[0]), str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "no model.safetensors" in err and "\n" not in err
    assert not (tmp_path / "x").exists()
    assert soup.main(["--out", str(tmp_path / "ok"), *map(str, members)]) == 0
    assert (tmp_path / "ok" / "model" / "model.safetensors").is_file()
