"""training.ensemble: greedy decoding from several checkpoints' mean log-probabilities."""
import shutil

import pytest
import torch
from tinymodel import make_chat_model

from training import ensemble, evaluate

PROMPTS = ["Hello! How can I help", "Set an alarm for 7:30 tomorrow morning, please. The weather in Paris", "def"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Two random checkpoints sharing one tokenizer; the prompts differ in length, so the
    batch is left-padded."""
    root = tmp_path_factory.mktemp("ens")
    make_chat_model(root / "a", seed=1)
    make_chat_model(root / "b", seed=2)
    shutil.copy(root / "a" / "tokenizer.json", root / "b" / "tokenizer.json")
    tok, a = evaluate.load(root / "a", "cpu")
    return tok, a, evaluate.load(root / "b", "cpu")[1]


def test_one_model_decodes_as_generate_does(pair):
    tok, a, _ = pair
    want = evaluate.generate(tok, a, PROMPTS, max_new_tokens=12)
    assert ensemble.generate(tok, [a], PROMPTS, max_new_tokens=12) == want
    assert ensemble.generate(tok, [a, a], PROMPTS, max_new_tokens=12) == want  # the mean of one model is itself
    assert any(w for w in want)


def test_two_models_follow_the_mean_log_probabilities(pair):
    tok, a, b = pair
    got = ensemble.generate(tok, [a, b], PROMPTS, max_new_tokens=6)
    for prompt, text in zip(PROMPTS, got):  # unbatched reference, one prompt at a time, no cache
        ids = tok(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            for _ in range(6):
                lp = sum(torch.log_softmax(m(ids).logits[:, -1].float(), -1) for m in (a, b))
                ids = torch.cat([ids, lp.argmax(-1, keepdim=True)], 1)
        n = len(tok(prompt, add_special_tokens=False)["input_ids"])
        assert text == evaluate.reply_text(tok, ids[0, n:])
    assert got != ensemble.generate(tok, [a], PROMPTS, max_new_tokens=6)
