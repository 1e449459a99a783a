"""The verb-swap drill (training/verb_swap.py, --swap-verbs): off by default without a
draw, training-only when on, its verbs new to every split, and a swapped request keeps
its call with every copied value said word for word."""
from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training import compose, datagen, intents, verb_swap  # noqa: E402

from test_training_compose import _gen  # noqa: E402
from test_training_splits import _COPIED  # noqa: E402


def _user_words(path: Path) -> set[str]:
    words = set()
    for line in path.read_text().splitlines():
        for m in json.loads(line)["messages"]:
            if m["role"] == "user":
                words |= set(re.findall(r"[a-z']+", m["content"].lower()))
    return words


def test_off_by_default_draws_nothing(tmp_path, monkeypatch):
    plain = _gen(tmp_path / "plain", compose=0.5)

    def boom(*a, **k):
        raise AssertionError("verb swap drawn while off")

    monkeypatch.setattr(intents, "swap_verb", boom)
    monkeypatch.setattr(compose, "swap_verb", boom)
    assert _gen(tmp_path / "zero", compose=0.5, swap=0.0) == plain


def test_training_only(tmp_path):
    plain, swapped = _gen(tmp_path / "plain"), _gen(tmp_path / "sw", swap=0.5)
    assert swapped["val"] == plain["val"] and swapped["test"] == plain["test"]
    assert swapped["train"] != plain["train"]


def test_its_verbs_are_new_to_every_split(tmp_path):
    pool = set(verb_swap.pool())
    assert len(pool) >= 250
    assert not pool & verb_swap.used_words()
    datagen.generate(tmp_path / "d", seed=11, n_train=300, n_val=2000, compose=0.5)
    for split in ("train", "val", "test"):  # drawn without the drill, no split says one of them
        assert not pool & _user_words(tmp_path / "d" / f"{split}.jsonl"), split
    # validation's unseen verbs that stage 19 took into values stay out of training
    assert not pool & {"slap", "bung", "bug", "poke", "douse"}


def test_swaps_only_a_clause_opening_verb_and_keeps_the_tool_named():
    rng = random.Random(0)
    out = verb_swap.swap_verb("add {items} to my shopping list", "add_to_shopping_list", rng)
    first, rest = out.split(" ", 1)
    assert first in verb_swap.pool() and rest == "{items} to my shopping list"
    out = verb_swap.swap_verb("could you Add {items} to the list", "add_to_shopping_list", rng)
    assert out.split()[2][0].isupper() and out.split()[2].lower() in verb_swap.pool()
    # a verb in a fixed phrase, not opening a clause, stays
    same = "when you get a chance, look for {q}"
    assert verb_swap.swap_verb(same, "web_search", rng) == same
    # no other word names the tool: the verb may be what does, so it stays
    assert verb_swap.swap_verb("search {q}", "web_search", rng) == "search {q}"


def test_swapped_requests_keep_their_calls(tmp_path):
    datagen.generate(tmp_path / "d", seed=5, n_train=600, n_val=10, compose=0.5, swap=1.0)
    pool, swapped, checked = set(verb_swap.pool()), 0, 0
    for line in (tmp_path / "d" / "train.jsonl").read_text().splitlines():
        msgs = json.loads(line)["messages"]
        for m, nxt in zip(msgs, msgs[1:]):
            if m["role"] != "user" or not nxt.get("tool_calls"):
                continue
            text = m["content"]
            swapped += bool(pool & set(re.findall(r"[a-z]+", text.lower())))
            for c in nxt["tool_calls"]:
                args = c["function"]["arguments"]
                args = json.loads(args) if isinstance(args, str) else args
                for v in [v for k, v in args.items() if k in _COPIED] + args.get("items", []):
                    assert re.search(rf"(?<![\w']){re.escape(str(v))}(?!\w)", text, re.IGNORECASE), (v, text)
                    checked += 1
    assert swapped > 150 and checked > 300
