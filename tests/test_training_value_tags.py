"""Value tags (training/value_tags.py, --tag-weight): which request tokens are free-text values,
as rows carry them, and the auxiliary loss a training-only head computes from them."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training import datagen  # noqa: E402
from training.dataset import _cuts_hold, _pieces_line, encode_conversations, encode_plain, make_batches  # noqa: E402
from training.value_tags import CLASS, FREE, N_CLASSES, request_spans  # noqa: E402

TOKENIZER = ROOT / "models" / "spine" / "tokenizer.json"


def _conv(user: str, name: str, **args) -> dict:
    call = {"type": "function", "function": {"name": name, "arguments": args}}
    return {"messages": [{"role": "user", "content": user},
                         {"role": "assistant", "content": "", "tool_calls": [call]}], "tools": []}


def test_free_text_arguments_only():
    assert {"recipient", "message", "items", "title", "room"} <= set(FREE)
    assert not {"time", "day", "state", "mode", "unit", "level", "enabled"} & set(FREE)
    assert N_CLASSES == 1 + 2 * len(FREE)


def test_spans_of_values_said_word_for_word():
    c = _conv("Text Maria that the plumber is coming at noon", "send_message",
              recipient="Maria", message="the plumber is coming at noon")
    user = c["messages"][0]["content"]
    spans = request_spans(c)[0]
    assert [(user[a:b], k) for a, b, k in spans] == [("Maria", CLASS["recipient"]),
                                                     ("the plumber is coming at noon", CLASS["message"])]
    # case is folded, word boundaries hold, every item of a list is found
    c = _conv("Workshop lights off", "set_lights", room="workshop", state="off")
    assert [(a, b) for a, b, _ in request_spans(c)[0]] == [(0, 8)]
    c = _conv("add eggs and milk", "add_to_shopping_list", items=["eggs", "milk"])
    assert len(request_spans(c)[0]) == 2
    # closed-class arguments are not looked for: the turn is tagged, all outside
    assert request_spans(_conv("wake me at 7 am", "set_alarm", time="07:00")) == {0: []}


def test_turns_with_a_value_not_said_are_left_untagged():
    assert request_spans(_conv("text my mum", "send_message", recipient="Mom", message="hi")) == {}
    assert request_spans(_conv("the workshops lights", "set_lights", room="workshop", state="on")) == {}
    chat = {"messages": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "Hi!"}],
            "tools": []}
    assert request_spans(chat) == {}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("tags")
    datagen.generate(out, seed=3, n_train=300, n_val=10)
    return out / "train.jsonl"


@pytest.fixture(scope="module")
def tok():
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(TOKENIZER))


def test_rows_keep_ids_and_mask_and_tag_the_values(data, tok):
    plain, _ = encode_conversations(tok, data, 1536)
    tagged, _ = encode_conversations(tok, data, 1536, tags=True)
    assert all(len(r) == 2 for r in plain) and all(len(r) == 3 for r in tagged)
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) for a, b in zip(plain, tagged))
    values = 0
    for ids, mask, tags in tagged:
        assert not (mask & (tags >= 0)).any()  # only request tokens are tagged
        starts = np.flatnonzero((tags > 0) & (tags % 2 == 1))
        for s in starts:  # a value: its B token, then its I tokens
            end = s + 1
            while end < len(tags) and tags[end] == tags[s] + 1:
                end += 1
            value = tok.decode([int(t) for t in ids[s:end]], skip_special_tokens=False)
            assert value.strip() and value == value.strip()
            values += 1
    assert values > 100


def test_parts_and_whole_text_agree(data, tok):
    added = tuple(t.content for t in tok.get_added_tokens_decoder().values())
    lines = data.read_text().splitlines()[:80]
    rendered = [_pieces_line((line, added, True)) for line in lines]
    assert all(isinstance(r, list) for r in rendered)
    assert _cuts_hold(tok, lines, rendered, True)


def test_batches_carry_tags_only_when_rows_do(data, tok):
    rows, _ = encode_conversations(tok, data, 1536, tags=True)
    rows += encode_plain(tok, ["Return the sum of a and b. " * 20], 1536)
    batches = make_batches(rows, 16384, np.random.default_rng(0), 0)
    assert all(len(b) == 3 and b[2].shape == b[0].shape for b in batches)
    assert sum(int((b[2] >= 0).sum()) for b in batches) == sum(int((r[2] >= 0).sum()) for r in rows[:-1])
    untagged = [r[:2] for r in rows]
    assert all(len(b) == 2 for b in make_batches(untagged, 16384, np.random.default_rng(0), 0))


def test_loss_trains_the_head_and_leaves_the_checkpoint_stock(data, tok, tmp_path):
    import torch

    from training.train import build_model, loss_on, save_checkpoint
    from training.value_tags import make_head

    model = build_model(tok.get_vocab_size(), tok, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                        num_key_value_heads=1, head_dim=32, intermediate_size=128)
    rows, _ = encode_conversations(tok, data, 1536, tags=True)
    ids, labels, tags = make_batches(rows[:8], 1 << 20, np.random.default_rng(0), 0)[0]
    tagger = {"head": make_head(64), "layer": 1, "weight": 0.5, "detach": False}
    total, tl = loss_on(model, torch.from_numpy(ids), torch.from_numpy(labels), tags=torch.from_numpy(tags),
                        tagger=tagger)
    lm = loss_on(model, torch.from_numpy(ids), torch.from_numpy(labels))
    t, lm, tl_ = (float(x.detach()) for x in (total, lm, tl))
    assert tl_ > 1.0 and abs(t - lm - 0.5 * tl_) < 1e-4
    total.backward()
    assert tagger["head"][1].weight.grad.abs().sum() > 0
    assert model.model.embed_tokens.weight.grad.abs().sum() > 0
    tagger["detach"] = True  # warm-up: the blocks get no gradient from the tags
    model.zero_grad()
    loss_on(model, torch.from_numpy(ids), torch.from_numpy(labels), tags=torch.from_numpy(tags),
            tagger=tagger)[1].backward()
    assert model.model.embed_tokens.weight.grad is None
    save_checkpoint(model, TOKENIZER.parent, tmp_path / "m", lambda _: None)
    from safetensors import safe_open

    with safe_open(str(tmp_path / "m" / "model.safetensors"), "pt") as f:
        assert all(k.startswith("model.") or k.startswith("lm_head") for k in f.keys())
    assert json.loads((tmp_path / "m" / "config.json").read_text())["model_type"] == "qwen3"
