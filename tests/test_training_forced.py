"""training.forced: teacher-forced verdicts are greedy decoding's exact-match verdicts."""
import json
from pathlib import Path

import pytest
from tinymodel import make_chat_model

from training import evaluate, forced, heldout

SPINE = Path(__file__).resolve().parent.parent / "models" / "spine"


@pytest.fixture(scope="module")
def guide40(tmp_path_factory):
    out = tmp_path_factory.mktemp("guide40")
    heldout.heldout(out, n=40)
    return out / "val.jsonl"


def test_forced_verdicts_match_generated_ones_on_the_trained_model(guide40, tmp_path):
    """The shipped model on 40 held-out requests: it gets some right and misses others
    (stage 19: 29 of these 40), and teacher forcing must call each one as decoding does."""
    if not (SPINE / "model.safetensors").exists():
        pytest.skip("models/spine is not present")
    gen = evaluate.evaluate(SPINE, guide40, "cpu", category="single")
    (tmp_path / "gen.json").write_text(json.dumps(gen))
    got = evaluate.evaluate(SPINE, guide40, "cpu", category="single", forced=True)
    oks = [e["ok"] for e in got["examples"]]
    assert 0 < sum(oks) < len(oks)
    assert forced.agreement(oks, str(tmp_path / "gen.json")) == {"same": 40, "n": 40, "forced_only": 0,
                                                                 "generated_only": 0}
    assert got["by_category"]["single"]["exact"] == gen["by_category"]["single"]["exact"]
    for e in got["examples"]:  # a miss is a token whose expected logit is not the largest
        assert (e["margin"] > 0) == e["ok"]


def test_a_random_model_writes_no_answer_and_agreement_checks_row_counts(guide40, tmp_path):
    model_dir = make_chat_model(tmp_path / "m", seed=5)
    got = evaluate.evaluate(model_dir, guide40, "cpu", category="single", forced=True)
    assert got["by_category"]["single"]["exact"] == 0
    assert all(e["margin"] < 0 for e in got["examples"])
    (tmp_path / "short.json").write_text(json.dumps({"examples": got["examples"][:3]}))
    with pytest.raises(ValueError, match="holds 3 examples"):
        forced.agreement([e["ok"] for e in got["examples"]], str(tmp_path / "short.json"))
