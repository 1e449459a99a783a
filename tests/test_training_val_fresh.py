"""The validation split renewed in session 8 (training/val_fresh.py): new material that no
training or test sentence repeats, drawn by validation alone, into valid calls for every
tool, while the published test split stays byte for byte the same."""
from __future__ import annotations

import json
import random
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training import datagen, intents, phrasing, replies, val_fresh  # noqa: E402
from training.lexicon import split_lists  # noqa: E402
from training.tools import TOOLS  # noqa: E402
from training.train_patterns import TRAIN_ONLY  # noqa: E402

from test_training_splits import _COPIED, _fills, _normalised, _text  # noqa: E402


def _surfaces(pattern: str, filler: bool = False) -> set[str]:
    """Every normalised sentence a pattern renders (prefix/suffix fillers expanded too)."""
    if filler:
        for k, v in datagen.FILLER.items():
            pattern = pattern.replace(f"<{k}>", v)
    return {_normalised(x) for x in phrasing.expand(pattern)}


def _union(patterns, filler: bool = False) -> set[str]:
    return set().union(*(_surfaces(_text(p), filler) for p in patterns))


def test_fresh_lists_cover_everything_validation_draws():
    assert set(val_fresh.VAL_PATTERNS) == set(TOOLS)
    for tool, pats in val_fresh.VAL_PATTERNS.items():
        assert len(pats) == 8 and len(set(map(str, pats))) == 8, tool
    for fresh in (val_fresh.VAL_PREFIXES, val_fresh.VAL_SUFFIXES, val_fresh.VAL_CONNECTORS):
        assert len(fresh) >= 4 and len(set(fresh)) == len(fresh)
    assert set(val_fresh.VAL_ARITH) == set(replies.ARITH_TEMPLATES)
    assert all(len(v) >= 3 for v in val_fresh.VAL_ARITH.values())
    assert set(val_fresh.VAL_SMALLTALK) == {r for _, r in replies.SMALLTALK}
    assert all(len(v) >= 2 for v in val_fresh.VAL_SMALLTALK.values())
    assert set(val_fresh.VAL_FACTS) == {r for _, r in replies.FACTS}


def test_validation_draws_only_fresh_lists():
    for tool in TOOLS:
        assert intents.templates_for(tool, "val") == val_fresh.VAL_PATTERNS[tool]
    with pytest.raises(ValueError, match="fresh"):  # no silent fallback onto dealt options
        intents.dealt(datagen.PREFIXES, "val")
    assert intents.dealt(datagen.CONNECTORS, "val", val_fresh.VAL_CONNECTORS) == val_fresh.VAL_CONNECTORS


def test_retired_offsets_and_old_fact_phrasing_train():
    rng = random.Random(1)
    drawn = {replies.chat_turn(rng, "train")[1] for _ in range(20000)}
    assert {phr[1] for phr, _ in replies.FACTS} <= drawn
    assert not {phr[2] for phr, _ in replies.FACTS} & drawn
    for options in (datagen.PREFIXES, datagen.SUFFIXES, datagen.CONNECTORS):
        retired = [o for i, o in enumerate(options) if i % 6 == intents.RETIRED_VAL]
        assert retired and all(o in intents.dealt(options, "train") for o in retired)


def _train_and_test_patterns() -> tuple[set[str], set[str], set[str]]:
    train = _union([p for tool in TOOLS for p in intents.templates_for(tool, "train")])
    test_raw = {x.lower() for tool in TOOLS for p in intents.templates_for(tool, "test")
                for x in phrasing.expand(_text(p))}
    return train, _union([p for tool in TOOLS for p in intents.templates_for(tool, "test")]), test_raw


def test_fresh_structures_render_no_training_or_test_sentence():
    """Of any tool, with fillers, punctuation and case stripped; and no fresh structure is
    a test structure (their surface sets are disjoint)."""
    train, test, test_raw = _train_and_test_patterns()
    seen: set[str] = set()
    for tool, pats in val_fresh.VAL_PATTERNS.items():
        for p in pats:
            mine = _surfaces(_text(p))
            assert not mine & train, (tool, p, sorted(mine & train)[:3])
            assert not mine & test, (tool, p, sorted(mine & test)[:3])
            assert not {x.lower() for x in phrasing.expand(_text(p))} & test_raw, (tool, p)
            assert not mine & seen, (tool, p, sorted(mine & seen)[:3])  # nor another fresh one
            seen |= mine


@pytest.mark.parametrize("name, train_only", [("PREFIXES", "TRAIN_PREFIXES"), ("SUFFIXES", None),
                                              ("CONNECTORS", "TRAIN_CONNECTORS")])
def test_fresh_openers_endings_and_connectors_are_new(name, train_only):
    options = getattr(datagen, name)
    train = _union(intents.dealt(options, "train") + (getattr(datagen, train_only) if train_only else []), True)
    test = _union(intents.dealt(options, "test"), True)
    for o in getattr(val_fresh, "VAL_" + name):
        mine = _surfaces(o, True)
        assert "" not in mine, o  # more than filler words
        assert not mine & (train | test), (o, sorted(mine & (train | test))[:3])


def _chat_surfaces(split: str) -> set[str]:
    """The chat phrasings (arithmetic as templates) a split draws from, normalised."""
    if split == "val":
        out = [x for v in val_fresh.VAL_ARITH.values() for x in v] + list(val_fresh.VAL_FACTS.values())
        out += [x for v in val_fresh.VAL_SMALLTALK.values() for x in v]
    else:
        out = [x for v in replies.ARITH_TEMPLATES.values() for x in intents.dealt(v, split)]
        out += [x for phr, _ in replies.SMALLTALK for x in intents.dealt(phr, split)]
        facts = [phr[2:3] if split == "test" else phr[:2] for phr, _ in replies.FACTS]
        out += [x for phr in facts for x in phr]
        if split == "train":
            out += [x for v in replies.TRAIN_ARITH.values() for x in v]
            out += [x for v in list(replies.TRAIN_SMALLTALK.values()) + list(replies.TRAIN_FACT_PHRASES.values())
                    for x in v]
            out += [x for phr, _ in replies.TRAIN_FACTS for x in phr]
    return {_normalised(x) for x in out}


def test_fresh_chat_phrasings_are_new():
    val = _chat_surfaces("val")
    assert "" not in val and len(val) == sum(map(len, val_fresh.VAL_ARITH.values())) + len(val_fresh.VAL_FACTS) \
        + sum(map(len, val_fresh.VAL_SMALLTALK.values()))
    assert not val & (_chat_surfaces("train") | _chat_surfaces("test")), sorted(val & _chat_surfaces("train"))


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_fresh_structures_fill_valid_calls_with_whole_values(tool, monkeypatch):
    params = TOOLS[tool]["function"]["parameters"]
    lists = split_lists()["val"] | {"languages": ["French", "Greek"]}
    rng = random.Random(8)
    for p in val_fresh.VAL_PATTERNS[tool]:
        for text, args in _fills(tool, p, lists, rng, monkeypatch, 8):
            assert not re.search(r"[{}<>()\[\]]", text), (p, text)
            assert set(params["required"]) <= set(args) <= set(params["properties"]), (p, text, args)
            if tool == "set_timer":
                assert {"hours", "minutes", "seconds"} & set(args), (p, text, args)
            if not isinstance(p, str):  # wording that fixes an argument keeps it
                assert all(args[k] == v for k, v in p[1].items()), (p, args)
            for v in [v for k, v in args.items() if k in _COPIED] + args.get("items", []):
                assert re.search(rf"(?<![\w']){re.escape(str(v))}(?!\w)", text), (tool, v, text)


def _calls(conv):
    return [tc["function"] for m in conv["messages"] if m["role"] == "assistant" for tc in m.get("tool_calls") or []]


def test_generated_validation_uses_every_tool_in_valid_calls(tmp_path):
    datagen.generate(tmp_path, seed=0, n_train=10, n_val=800)
    called = set()
    for c in map(json.loads, open(tmp_path / "val.jsonl")):
        for call in _calls(c):
            params = TOOLS[call["name"]]["function"]["parameters"]
            assert set(params["required"]) <= set(call["arguments"]) <= set(params["properties"]), call
            for k, v in call["arguments"].items():
                want = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
                        "array": list}[params["properties"][k]["type"]]
                assert isinstance(v, want), (call, k)
                if "enum" in params["properties"][k]:
                    assert v in params["properties"][k]["enum"], (call, k)
            called.add(call["name"])
    assert called == set(TOOLS), set(TOOLS) - called


def test_validation_styling_draws_only_fresh_fillers(monkeypatch):
    drawn: list[tuple[str, str]] = []
    choice = datagen._split_choice

    def recording(rng, options, split, val=None):
        out = choice(rng, options, split, val)
        drawn.append((split, out))
        return out

    monkeypatch.setattr(datagen, "_split_choice", recording)
    rng, L = random.Random(6), split_lists()["val"] | {"languages": ["French"]}
    for _ in range(300):
        datagen._tool_exchange(rng.sample(list(TOOLS), 2), rng, L, "val")
    fresh = set(val_fresh.VAL_PREFIXES + val_fresh.VAL_SUFFIXES + val_fresh.VAL_CONNECTORS)
    assert {o for s, o in drawn if s == "val"} == fresh  # all of them, and nothing else
