"""The default model's synthetic data: patterns, split hygiene and call validity."""
from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # training/ is a folder of scripts, not an installed package

from training import datagen, intents, phrasing  # noqa: E402
from training.lexicon import split_lists  # noqa: E402
from training.templates import PATTERNS  # noqa: E402
from training.tools import TOOLS  # noqa: E402


def test_pattern_syntax_choices_and_options():
    rng = random.Random(0)
    seen = {phrasing.realize("(set|put) [me ]an alarm", rng) for _ in range(200)}
    assert seen == {"set an alarm", "put an alarm", "set me an alarm", "put me an alarm"}
    assert phrasing.count("(a|b (c|d))[x]") == 6
    # articles agree with the word drawn after them
    assert {phrasing.realize("a (apple|pear)", rng) for _ in range(100)} == {"an apple", "a pear"}
    for bad in ["(a|b", "a]", "[a)"]:
        with pytest.raises(ValueError, match="pattern"):
            phrasing.realize(bad, rng)


def test_every_pattern_parses_and_fills_only_known_slots():
    rng = random.Random(1)
    vals = intents.slot_values(rng, split_lists()["train"] | {"languages": ["French"]})
    assert set(PATTERNS) == set(TOOLS)
    for tool, pats in PATTERNS.items():
        assert len(pats) >= 18, tool
        for p in pats:
            text = p if isinstance(p, str) else p[0]
            for _ in range(5):
                surface = phrasing.realize(text, rng)
                assert "<" not in surface and "(" not in surface and "[" not in surface, (tool, surface)
                assert set(intents._slots(surface)) <= set(vals), (tool, surface)


def test_splits_deal_disjoint_patterns():
    for tool in PATTERNS:
        parts = {s: intents.templates_for(tool, s) for s in ("train", "val", "test")}
        assert parts["val"] and parts["test"]
        as_keys = {s: {json.dumps(t) for t in v} for s, v in parts.items()}
        assert not as_keys["train"] & as_keys["test"] and not as_keys["train"] & as_keys["val"]
        assert not as_keys["val"] & as_keys["test"]


def _calls(conv):
    return [tc["function"] for m in conv["messages"] if m["role"] == "assistant" for tc in m.get("tool_calls") or []]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    out = tmp_path_factory.mktemp("data")
    datagen.generate(out, seed=3, n_train=600, n_val=200)
    return {s: [json.loads(line) for line in open(out / f"{s}.jsonl")] for s in ("train", "val", "test")}


def test_calls_match_the_tool_schemas(data):
    for split, convs in data.items():
        for c in convs:
            offered = {t["function"]["name"] for t in c["tools"]}
            for call in _calls(c):
                assert call["name"] in offered, (split, call)
                params = TOOLS[call["name"]]["function"]["parameters"]
                assert set(params["required"]) <= set(call["arguments"]) <= set(params["properties"]), call
                for k, v in call["arguments"].items():
                    want = params["properties"][k]["type"]
                    types = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
                             "array": list, "object": dict}[want]
                    assert isinstance(v, types), (call, k)


def test_test_split_has_the_promised_categories_and_no_training_entities(data):
    counts = {}
    for c in data["test"]:
        counts[c["category"]] = counts.get(c["category"], 0) + 1
    assert counts == datagen.EVAL_COUNTS
    lists = split_lists()
    test_only = set(lists["test"]["first_names"]) - set(lists["train"]["first_names"])
    train_only = set(lists["train"]["first_names"])
    assert test_only and not test_only & train_only
    test_text = " ".join(m["content"] for c in data["test"] for m in c["messages"] if m["role"] == "user")
    # an entity list of the test split never leaks its train-only names into test requests
    leaked = [n for n in train_only if len(n) > 3 and f" {n} " in test_text and n not in lists["test"]["first_names"]
              and n not in lists["val"]["first_names"]]
    assert len(leaked) <= 2, leaked  # names that are also ordinary words (e.g. in messages) may appear


def test_missing_requests_never_offer_the_needed_tool(data):
    for convs in data.values():
        for c in convs:
            offered = {t["function"]["name"] for t in c["tools"]}
            if c["category"] == "missing":
                assert c["needs"] and not set(c["needs"]) & offered
                assert not c["messages"][-1].get("tool_calls")
            elif c["category"] in ("single", "multi"):
                k = len(c["needs"])
                calls = c["messages"][-(k + 2)]["tool_calls"]  # user, calls, k tool results, summary
                assert sorted(tc["function"]["name"] for tc in calls) == sorted(c["needs"])
                assert set(c["needs"]) <= offered


def test_fronted_adjuncts_keep_the_call(tmp_path):
    """--front moves a trailing time/day/place phrase to the front; the call is unchanged."""
    assert phrasing.front_adjunct("wake me up at {time}") == "at {time}, wake me up"
    assert phrasing.front_adjunct("turn on the lights in the {room}") == "in the {room}, turn on the lights"
    assert phrasing.front_adjunct("text {who} that {msg}") is None
    datagen.generate(tmp_path, seed=5, n_train=1000, n_val=50, front=1.0)
    convs = [json.loads(line) for line in open(tmp_path / "train.jsonl")]
    fronted = [c for c in convs if c["category"] == "single"
               and c["messages"][-4]["content"].lower().startswith(("at ", "in ", "on ", "for "))]
    assert len(fronted) > 20
    for c in fronted:  # the fronted phrase's value still reaches the arguments
        args = c["messages"][-3]["tool_calls"][0]["function"]["arguments"]
        assert args, c["messages"][-4]["content"]


def test_word_noise_keeps_slots_cues_and_the_eval_splits(tmp_path):
    """--noise perturbs training requests only; slots and tool cue words survive."""
    rng = random.Random(4)
    for _ in range(300):
        out = intents.word_noise("please give me the directions to {dest} {mode}", "get_directions", rng, False)
        assert out.endswith("to {dest} {mode}") and "directions" in out, out
        assert out != "please give me the directions to {dest} {mode}"
        kept = iter(intents.word_noise("switch the {room} lights off", "set_lights", rng, keep_words=True).split())
        assert all(w in kept for w in "switch the {room} lights off".split())  # only insertions
    clean, noisy = tmp_path / "clean", tmp_path / "noisy"
    datagen.generate(clean, seed=6, n_train=200, n_val=50)
    datagen.generate(noisy, seed=6, n_train=200, n_val=50, noise=1.0)
    for split in ("val", "test"):  # evaluation data is identical with and without the drill
        assert (clean / f"{split}.jsonl").read_text() == (noisy / f"{split}.jsonl").read_text()
    assert (clean / "train.jsonl").read_text() != (noisy / "train.jsonl").read_text()


def test_mix_and_turns_change_only_the_training_split(tmp_path):
    """--mix and --turns reshape the training conversations; validation and test stay put."""
    base, tuned = tmp_path / "base", tmp_path / "tuned"
    datagen.generate(base, seed=8, n_train=400, n_val=40)
    datagen.generate(tuned, seed=8, n_train=400, n_val=40, mix=(0, 0, 1, 0, 0), turns=(0, 0, 1))
    for split in ("val", "test"):
        assert (base / f"{split}.jsonl").read_text() == (tuned / f"{split}.jsonl").read_text()
    convs = [json.loads(line) for line in open(tuned / "train.jsonl")]
    assert {c["category"] for c in convs} == {"oos"}
    assert all(sum(m["role"] == "user" for m in c["messages"]) == 3 for c in convs)


def test_val_synth_redraws_only_validation_and_uses_only_lexicon_values(tmp_path):
    """val_synth=0 (a probe's training set drawn like test) moves validation alone, and its
    free-text values then come from the validation lists, never invented."""
    base, real = tmp_path / "base", tmp_path / "real"
    datagen.generate(base, seed=8, n_train=40, n_val=200)
    datagen.generate(real, seed=8, n_train=40, n_val=200, val_synth=0.0)
    for split in ("train", "test"):
        assert (base / f"{split}.jsonl").read_text() == (real / f"{split}.jsonl").read_text()
    assert (base / "val.jsonl").read_text() != (real / "val.jsonl").read_text()
    names = set(split_lists()["val"]["first_names"]) | set(split_lists()["val"]["relations"])
    names |= {r.split(" ", 1)[1] for r in names if r.startswith(("my ", "the "))}
    for line in open(real / "val.jsonl"):
        for call in _calls(json.loads(line)):
            who = call["arguments"].get("contact") or call["arguments"].get("recipient")
            if who:
                assert who in names or who.split(" ")[0] in names or any(c.isdigit() for c in who), who


def test_phrase_and_context_drills_change_only_training(tmp_path):
    """--phrase puts function words inside invented free text, --context puts a clause
    before requests; neither reaches validation or test, and the calls stay exact."""
    base, drilled = tmp_path / "base", tmp_path / "drilled"
    pieces = ["ab", "cd", "ef"]
    datagen.generate(base, seed=9, n_train=400, n_val=40, front=0.5, token_words=pieces)
    datagen.generate(drilled, seed=9, n_train=400, n_val=40, front=0.5, phrase=1.0, context=1.0, token_words=pieces)
    for split in ("val", "test"):
        assert (base / f"{split}.jsonl").read_text() == (drilled / f"{split}.jsonl").read_text()
    shapes = [sh.split("{")[0].strip() or sh.split("}")[1].split("{")[0].strip() for sh in intents._PHRASE_SHAPES]
    with_clause = with_phrase = 0
    for c in map(json.loads, open(drilled / "train.jsonl")):
        for i, m in enumerate(c["messages"]):
            if m["role"] != "assistant" or not m.get("tool_calls") or c["messages"][i - 1]["role"] != "user":
                continue
            request = c["messages"][i - 1]["content"]
            for tc in m["tool_calls"]:
                for v in tc["function"]["arguments"].values():
                    if isinstance(v, str) and len(v.split()) > 1 and any(f" {w} " in f" {v} " for w in shapes if w):
                        with_phrase += 1
                        assert v.lower() in request.lower(), (v, request)  # still copied verbatim
            first = request.split(",")[0].split(".")[0].split(";")[0].split(" so ")[0].lower()
            with_clause += any(first == cl.split("{")[0].strip().lower() or first.startswith(cl.split("{")[0].lower())
                               for cl in intents._CONTEXT if cl.split("{")[0].strip())
    assert with_phrase > 20 and with_clause > 100


def _all_splits(path: Path, **kw) -> dict[str, bytes]:
    datagen.generate(path, seed=3, n_train=400, n_val=120, noise=0.5, phrase=0.5, context=0.3, front=0.3,
                     compose=0.35, **kw)
    return {s: (path / f"{s}.jsonl").read_bytes() for s in ("train", "val", "test")}


def test_drill_off_gives_byte_identical_data_without_a_draw(tmp_path, monkeypatch):
    """--drill 0 (the default) is the data of before, byte for byte, in every split: the
    drill's generator is never called and no random number is drawn for it."""
    before = _all_splits(tmp_path / "before")

    def boom(*a, **k):
        raise AssertionError("drill drawn while off")

    monkeypatch.setattr(datagen, "drill_conversation", boom)
    assert _all_splits(tmp_path / "zero", drill=0.0) == before
    assert _all_splits(tmp_path / "none", drill=0.0, drill_style="none") == before


@pytest.mark.parametrize("style", ["names", "none"])
def test_drill_rows_are_schema_free_valid_calls(tmp_path, style):
    """Drill rows hold no tool schemas, only request -> call exchanges whose calls match the
    schemas; trained text is still the assistant's alone, and a larger share of the row."""
    from training.dataset import _conv_text
    off, on = _all_splits(tmp_path / "off"), _all_splits(tmp_path / "on", drill=0.5, drill_style=style)
    assert on["val"] == off["val"] and on["test"] == off["test"]
    assert on["train"] != off["train"]
    convs = [json.loads(line) for line in on["train"].decode().splitlines()]
    drills = [c for c in convs if c.get("drill")]
    assert 0.4 < len(drills) / len(convs) < 0.6, len(drills)
    assert not any(c.get("drill") for s in ("val", "test") for c in map(json.loads, on[s].decode().splitlines()))
    share = {}
    for kind, rows in (("drill", drills), ("plain", [c for c in convs if not c.get("drill")])):
        trained = total = 0
        for c in rows:
            text, spans, _ = _conv_text(c)
            for a, b in spans:  # trained spans are assistant turns, never a prompt or a tool result
                assert text[a - len("<|im_start|>assistant\n"):a] == "<|im_start|>assistant\n"
                assert "<|im_start|>" not in text[a:b] and text[a:b].endswith("<|im_end|>")
            trained += sum(b - a for a, b in spans)
            total += len(text)
        share[kind] = trained / total
    assert share["drill"] > 2.5 * share["plain"], share
    for c in drills:
        assert c["tools"] == [] and c["category"] in ("single", "multi")
        text, *_ = _conv_text(c)
        assert "# Tools" not in text and '"parameters"' not in text
        msgs, calls = c["messages"], _calls(c)
        assert calls and sorted({call["name"] for call in calls}) == sorted({n for m in msgs
                                                                            for n in _names(m)})
        if style == "names":
            assert msgs[0]["role"] == "system" and msgs[0]["content"].startswith("Tools: ")
            offered = set(msgs[0]["content"][len("Tools: "):-1].split(", "))
            assert {call["name"] for call in calls} <= offered <= set(TOOLS)
        else:
            assert all(m["role"] != "system" for m in msgs)
        for i, m in enumerate(msgs):
            if m.get("tool_calls"):
                assert msgs[i - 1]["role"] == "user"
        for call in calls:
            params = TOOLS[call["name"]]["function"]["parameters"]
            assert set(params["required"]) <= set(call["arguments"]) <= set(params["properties"]), call


def _names(m: dict) -> list[str]:
    return [tc["function"]["name"] for tc in m.get("tool_calls") or []]


def test_train_cli_rejects_bad_shares():
    from training import train
    for bad in (["--mix", "0.5,0.5"], ["--turns", "a,b,c"], ["--mix", "0,0,0,0,0"], ["--drill", "1.5"],
                ["--drill", "x"], ["--drill-style", "schemas"]):
        with pytest.raises(SystemExit):
            train.main(["--out", "/nonexistent", *bad])


def test_bare_tokenizer_spells_a_copied_value_the_same_in_the_request_and_the_call(tmp_path):
    """With --tokenizer-style bare no word carries a leading space or quote, so a value's
    tokens in the request reappear unchanged inside the call's JSON string; with the
    Qwen2 split (stages 1-8 of the default model) the first word is spelled differently there."""
    from training import tokenizer as recipe

    datagen.generate(tmp_path, seed=2, n_train=300, n_val=10)
    texts = list(recipe.corpus(tmp_path, [], limit=300))
    bare = recipe.train_tokenizer(texts, vocab_size=800, style="bare")
    qwen = recipe.train_tokenizer(texts, vocab_size=800, style="qwen")
    value = "the best tips for sleep"  # a first word common enough to be one token
    request, call = f"search {value} please", json.dumps({"query": value})
    for tok, same in ((bare, True), (qwen, False)):
        in_call = tok.encode(call).tokens
        in_request = tok.encode(request).tokens
        want = tok.encode(value).tokens  # the value as the call's JSON string spells it
        assert any(in_call[i:i + len(want)] == want for i in range(len(in_call)))
        assert any(in_request[i:i + len(want)] == want for i in range(len(in_request))) is same, in_request
        assert tok.decode(tok.encode(call).ids) == call  # lossless either way


def test_transplant_keeps_the_layers_and_rebuilds_embeddings_from_the_same_words(tmp_path):
    """training.transplant moves a Qwen2-split model onto a bare tokenizer: layers are
    copied unchanged, and a bare word's row comes from the old rows of "Ġword" (and "word")."""
    import numpy as np
    import torch
    from tokenizers import Tokenizer
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from training import tokenizer as recipe
    from training.chat_format import CHAT_TEMPLATE
    from training.train import save_checkpoint
    from training.transplant import source_rows, transplant

    datagen.generate(tmp_path / "data", seed=3, n_train=300, n_val=10)
    texts = list(recipe.corpus(tmp_path / "data", [], limit=300))
    old_tok = recipe.train_tokenizer(texts, vocab_size=900, style="qwen")
    bare = recipe.train_tokenizer(texts, vocab_size=800, style="bare")
    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=900, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=16, tie_word_embeddings=True,
                      bos_token_id=0, eos_token_id=old_tok.token_to_id("<|im_end|>"), pad_token_id=0)
    src = tmp_path / "src"
    recipe.save_hf(old_tok, src / "tok", CHAT_TEMPLATE)
    save_checkpoint(Qwen3ForCausalLM(cfg), src / "tok", src / "model", lambda rec: None)
    info = transplant(src / "model", bare, tmp_path / "tp")
    assert info["vocab"] == 800 and info["rows"]["none"] == 0
    old = Qwen3ForCausalLM.from_pretrained(str(src / "model"), dtype=torch.float32)
    new = Qwen3ForCausalLM.from_pretrained(str(tmp_path / "tp" / "model"), dtype=torch.float32)
    assert new.config.vocab_size == 800
    assert new.config.eos_token_id == bare.token_to_id("<|im_end|>")
    for name, p in old.model.layers.state_dict().items():
        assert torch.equal(new.model.layers.state_dict()[name], p), name
    E_old = old.get_input_embeddings().weight.detach().numpy()
    E_new = new.get_input_embeddings().weight.detach().numpy()
    rows = source_rows(bare, old_tok)
    word = next(i for i in range(800) if bare.id_to_token(i).isalpha() and len(bare.id_to_token(i)) > 3
                and "Ġ" + bare.id_to_token(i) in old_tok.get_vocab())
    assert rows[word][0] == old_tok.token_to_id("Ġ" + bare.id_to_token(word))
    np.testing.assert_allclose(E_new[word], E_old[rows[word]].mean(0), atol=1e-3)
    im_end = bare.token_to_id("<|im_end|>")
    np.testing.assert_allclose(E_new[im_end], E_old[old_tok.token_to_id("<|im_end|>")], atol=1e-3)
    assert Tokenizer.from_file(str(tmp_path / "tp" / "model" / "tokenizer.json")).get_vocab_size() == 800


def test_new_model_shape_flags_change_only_depth_and_width(tmp_path):
    """--layers / --intermediate / --hidden size a from-scratch model (the 4096-token, 9-block
    lineage; session 34's wider ones); left at 0 the model is ARCH's, and the saved checkpoint
    loads back with the new shape."""
    import torch
    from transformers import Qwen3ForCausalLM

    from training import tokenizer as recipe
    from training import train
    from training.chat_format import CHAT_TEMPLATE

    datagen.generate(tmp_path / "data", seed=4, n_train=200, n_val=10)
    tok = recipe.train_tokenizer(list(recipe.corpus(tmp_path / "data", [], limit=200)), vocab_size=700, style="bare")
    recipe.save_hf(tok, tmp_path / "tok", CHAT_TEMPLATE)
    args = argparse.Namespace(layers=9, intermediate=0, hidden=0)
    assert train._shape(args) == {"num_hidden_layers": 9}
    assert train._shape(argparse.Namespace(layers=0, intermediate=0, hidden=0)) == {}
    wide = train.build_model(700, tok, **train._shape(argparse.Namespace(layers=1, intermediate=128, hidden=64)))
    # eight heads of 8 (two key/value heads): the residual stream widens, the head count stays
    assert wide.model.layers[0].self_attn.q_proj.weight.shape == (64, 64)
    assert wide.model.layers[0].self_attn.k_proj.weight.shape == (16, 64)
    assert wide.model.layers[0].mlp.up_proj.weight.shape == (128, 64)
    with pytest.raises(SystemExit, match="not a multiple of 8 heads"):
        train._shape(argparse.Namespace(layers=0, intermediate=0, hidden=100))
    deep = train.build_model(700, tok, **train._shape(args))
    assert deep.config.num_hidden_layers == 9 == len(deep.model.layers) == len(deep.config.layer_types)
    assert deep.config.intermediate_size == train.ARCH["intermediate_size"]
    torch.manual_seed(0)
    train.save_checkpoint(deep, tmp_path / "tok", tmp_path / "model", lambda rec: None)
    back = Qwen3ForCausalLM.from_pretrained(str(tmp_path / "model"))
    assert back.config.num_hidden_layers == 9 and back.config.vocab_size == 700


def test_first_weight_weighs_the_token_that_opens_each_assistant_turn(tmp_path):
    """--first-weight: the first trained label of each run is an assistant turn's first token
    (<tool_call> when the turn calls a tool), one run per assistant message; W=1 is the plain
    mean and W>1 the weighted mean over exactly those positions."""
    import numpy as np
    import torch
    import torch.nn.functional as F
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from training import tokenizer as recipe
    from training.dataset import encode_conversations, make_batches
    from training.train import loss_on

    datagen.generate(tmp_path / "data", seed=6, n_train=60, n_val=10)
    tok = recipe.train_tokenizer(list(recipe.corpus(tmp_path / "data", [], limit=60)), vocab_size=700, style="bare")
    rows, dropped = encode_conversations(tok, tmp_path / "data" / "train.jsonl", max_len=4096)
    convs = [json.loads(line) for line in (tmp_path / "data" / "train.jsonl").read_text().splitlines()]
    assert dropped == 0 and len(rows) == len(convs)
    call_id = tok.token_to_id("<tool_call>")
    for (ids, mask), conv in zip(rows, convs):
        starts = np.flatnonzero(mask & ~np.concatenate([[False], mask[:-1]]))
        turns = [m for m in conv["messages"] if m["role"] == "assistant"]
        assert len(starts) == len(turns)
        for s, m in zip(starts, turns):
            assert (ids[s] == call_id) == bool(m.get("tool_calls") and not m.get("content"))
    ids_np, lab_np = make_batches(rows[:8], 1 << 16, np.random.default_rng(0), 0)[0]
    ids, lab = torch.from_numpy(ids_np), torch.from_numpy(lab_np)
    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=700, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=16, tie_word_embeddings=True)
    model = Qwen3ForCausalLM(cfg).eval()
    with torch.no_grad():
        logits = model(input_ids=ids).logits.float()
        ce = F.cross_entropy(logits.transpose(1, 2), lab, reduction="none")
        sel = lab != -100
        first = sel & ~torch.cat([torch.zeros_like(sel[:, :1]), sel[:, :-1]], 1)
        assert int(first.sum()) == sum(m["role"] == "assistant" for c in convs[:8] for m in c["messages"])
        plain = ce[sel].mean()
        w = 1.0 + 3.0 * first.float()
        weighted = (ce * w)[sel].sum() / w[sel].sum()
        torch.testing.assert_close(loss_on(model, ids, lab), plain, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(loss_on(model, ids, lab, 4.0), weighted, rtol=1e-5, atol=1e-5)
        assert not torch.isclose(plain, weighted)


def test_compiled_blocks_give_the_eager_loss_and_gradients():
    """--compile swaps in torch.compile(model.model) for the training steps only: the same
    loss and gradients as eager, on two batch shapes (the compile is dynamic)."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from training.train import loss_on

    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=16, tie_word_embeddings=True)
    model = Qwen3ForCausalLM(cfg)
    compiled = torch.compile(model.model, dynamic=True)
    for B, T in ((3, 17), (2, 29)):
        ids = torch.randint(0, 64, (B, T))
        lab = ids.clone()
        lab[:, : T // 3] = -100
        grads = []
        for bb in (None, compiled):
            model.zero_grad()
            loss = loss_on(model, ids, lab, 4.0, bb)
            loss.backward()
            grads.append((loss.detach(), [p.grad.clone() for p in model.parameters()]))
        (l0, g0), (l1, g1) = grads
        torch.testing.assert_close(l1, l0, rtol=1e-5, atol=1e-6)
        for a, b in zip(g1, g0):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)


def test_encoding_by_parts_gives_the_whole_texts_tokens_and_mask(tmp_path):
    """encode_conversations cuts each conversation after newline runs and encodes a recurring
    part once; the rows must be exactly the whole rendered text's ids and trained mask, for
    both tokenizer styles, and for a tokenizer whose merges cross those cuts (the check on
    the first conversations sends it down the whole-text path)."""
    import numpy as np
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from training import tokenizer as recipe
    from training.dataset import _conv_text, _cuts_hold, _pieces, _row, encode_conversations

    datagen.generate(tmp_path / "data", seed=7, n_train=400, n_val=10)
    path = tmp_path / "data" / "train.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    texts = list(recipe.corpus(tmp_path / "data", [], limit=400))
    glued = Tokenizer(models.BPE())  # no regex split: merges may run across a newline
    glued.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    glued.decoder = decoders.ByteLevel()
    glued.train_from_iterator(texts, trainers.BpeTrainer(
        vocab_size=1500, special_tokens=recipe.SPECIAL + recipe.TAGS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    for name, tok in (("bare", recipe.train_tokenizer(texts, 900, "bare")),
                      ("qwen", recipe.train_tokenizer(texts, 900, "qwen")), ("glued", glued)):
        added = tuple(t.content for t in tok.get_added_tokens_decoder().values())
        pieces = [_pieces(json.loads(line), added) for line in lines]
        assert sum(p is None for p in pieces) < len(lines) / 50, name  # nearly all take the fast path
        assert _cuts_hold(tok, lines[:64], pieces[:64]) == (name != "glued"), name
        rows, dropped = encode_conversations(tok, path, max_len=700)
        want = [_row(tok.encode(t, add_special_tokens=False), t, s) for t, s, _ in map(_conv_text, map(json.loads, lines))]
        kept = [w for w in want if len(w[0]) <= 700]
        assert dropped == len(want) - len(kept) > 0, name
        assert len(rows) == len(kept)
        for (ids, mask), (ids0, mask0) in zip(rows, kept):
            assert ids.dtype == np.int32 and np.array_equal(ids, ids0) and np.array_equal(mask, mask0), name
        tagged, _ = encode_conversations(tok, path, max_len=700, tags=True)  # value tags: same ids and mask
        assert all(np.array_equal(t[0], r[0]) and np.array_equal(t[1], r[1]) for t, r in zip(tagged, rows)), name
        assert sum(int((t[2] > 0).sum()) for t in tagged) > 200, name
