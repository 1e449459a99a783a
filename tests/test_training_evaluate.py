"""training.evaluate: beam search and the per-category filter."""
import json

import pytest
import torch
from tinymodel import make_chat_model

from training import datagen, evaluate

PROMPTS = ["Hello! How can I help", "Set an alarm for 7:30 tomorrow morning, please. The weather in Paris", "def"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_chat_model(tmp_path_factory.mktemp("evalm") / "m", seed=3)


def test_one_beam_is_greedy_and_batched_beams_match_one_prompt_at_a_time(model_dir):
    tok, model = evaluate.load(model_dir, "cpu")
    greedy = evaluate.generate(tok, model, PROMPTS, max_new_tokens=10)
    assert evaluate.generate(tok, model, PROMPTS, max_new_tokens=10, beams=1) == greedy
    got = evaluate.generate(tok, model, PROMPTS, max_new_tokens=10, beams=4)  # one left-padded batch
    eos = [tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")]
    for prompt, text in zip(PROMPTS, got):
        enc = tok(prompt, return_tensors="pt", add_special_tokens=False)
        with torch.no_grad():
            out = model.generate(**enc, max_new_tokens=10, do_sample=False, num_beams=4, length_penalty=0.0,
                                 eos_token_id=eos, pad_token_id=eos[1])
        assert text == evaluate.reply_text(tok, out[0, enc["input_ids"].shape[1]:])
    assert got != greedy  # a random model's most probable answer is rarely its greedy one


def test_category_keeps_one_category(model_dir, tmp_path):
    datagen.generate(tmp_path, seed=0, n_train=5, n_val=40)
    rows = [json.loads(line) for line in open(tmp_path / "val.jsonl")]
    res = evaluate.evaluate(model_dir, tmp_path / "val.jsonl", "cpu", max_new_tokens=4, category="oos")
    assert list(res["by_category"]) == ["oos"]
    assert res["n"] == res["by_category"]["oos"]["n"] == sum(r["category"] == "oos" for r in rows) > 0
    assert all(e["category"] == "oos" for e in res["examples"])
