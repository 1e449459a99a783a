"""The probe router end to end: train on labelled examples, write the bundle,
route with it, and compare with the entropy baseline."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import cactus_core as cactus
from cactus_core.probe import Probe, auroc, fit_probe, fit_temperature
from tinymodel import make_chat_model

EASY = ["Set an alarm for {} am", "Wake me at {} please", "Alarm at {} tomorrow"]
HARD = ["Prove the Riemann hypothesis for case {}", "Derive the {}th Feynman diagram integral",
        "Explain quantum chromodynamics lattice {} results"]


def test_auroc_matches_definition():
    s = np.array([0.1, 0.4, 0.35, 0.8])
    y = np.array([0, 0, 1, 1])
    assert auroc(s, y) == pytest.approx(0.75)
    assert auroc(np.array([1.0, 1.0]), np.array([0, 1])) == 0.5


def test_fit_probe_separates_and_temperature_calibrates():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((400, 16))
    y = (x[:, 0] + 0.3 * rng.standard_normal(400) > 0).astype(float)
    p = fit_probe(x[:300], y[:300], layer=0, hidden=8)
    assert auroc(p.logit(x[300:]), y[300:]) > 0.9
    t = fit_temperature(p.logit(x[300:]), y[300:])
    assert 0.05 <= t <= 20


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("probe") / "data.jsonl"
    rows = []
    for i in range(40):
        for templates, label in ((EASY, 1), (HARD, 0)):
            text = templates[i % 3].format(i + 1)
            rows.append({"messages": [{"role": "user", "content": text}], "label": label,
                         "category": "easy" if label else "hard"})
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return str(path)


def test_probe_train_writes_bundle_and_routes(tmp_path, data):
    model = make_chat_model(tmp_path / "m")
    out = tmp_path / "bundle"
    p = subprocess.run([sys.executable, "-m", "cactus_core.cli", "probe", "train", model, data, str(out),
                        "--max-tokens", "2", "--json"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout[p.stdout.index("{"):])
    assert report["examples"] == 80 and report["probe_params"] < 50_000
    assert report["probe_auroc"] > 0.8  # the prompts differ in kind: the hidden states show it
    assert 0.0 <= report["entropy_auroc"] <= 1.0
    assert report["accuracy_by_category"] == {"easy": 1.0, "hard": 0.0}  # labelled rows: the rate per kind
    manifest = json.loads((out / "cactus.json").read_text())
    assert manifest["probe"]["file"] == "probe.safetensors" and manifest["probe"]["threshold"] == 0.7

    engine = cactus.load(str(out))
    assert engine.router().name == "probe"
    easy = engine.complete([{"role": "user", "content": "Wake me at 6 please"}], max_tokens=2)
    hard = engine.complete([{"role": "user", "content": "Prove the Riemann hypothesis for case 77"}], max_tokens=2)
    assert easy["confidence"] > hard["confidence"]
    # The probe reads the prefill's hidden states; decode steps then run without captures
    # (all layers in one call), and the next request captures again.
    assert engine.model.capture == ()
    again = engine.complete([{"role": "user", "content": "Wake me at 6 please"}], max_tokens=2)
    assert again["confidence"] == easy["confidence"]
    assert hard["confidence"] < 0.7 and hard["cloud_handoff_reason"] == "no_provider"
    assert hard["success"] and not hard["cloud_handoff"]  # no provider: the local answer is kept


def test_probe_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    p = Probe(3, rng.standard_normal(8), rng.random(8) + 0.5, rng.standard_normal((8, 4)),
              rng.standard_normal(4), rng.standard_normal(4), 0.2, temperature=1.7)
    p.save(str(tmp_path / "p.safetensors"))
    q = Probe.load(str(tmp_path / "p.safetensors"))
    x = rng.standard_normal((5, 8))
    np.testing.assert_allclose(p.confidence(x), q.confidence(x), rtol=1e-5)
    assert q.layer == 3


def test_bad_probe_data_is_one_line(tmp_path):
    model = make_chat_model(tmp_path / "m")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": []}\n')
    p = subprocess.run([sys.executable, "-m", "cactus_core.cli", "probe", "train", model, str(bad),
                        str(tmp_path / "o")], capture_output=True, text=True, timeout=300)
    assert p.returncode != 0 and "Traceback" not in p.stderr and "reference" in p.stderr
