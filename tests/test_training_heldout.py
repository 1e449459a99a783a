"""The held-out selection guide (training/heldout_patterns.py, training/heldout.py): 20 new
request structures per tool that render valid calls, no sentence of which any split (or
training's composed structures and drills) says, drawn by split "heldout" alone with
validation's other material, while the published splits stay byte for byte the same."""
from __future__ import annotations

import hashlib
import json
import random
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training import compose, datagen, heldout, intents, phrasing, val_fresh, verb_swap  # noqa: E402
from training.heldout_patterns import HELDOUT_PATTERNS  # noqa: E402
from training.tools import TOOLS  # noqa: E402

from test_training_splits import PUBLISHED_TEST_SHA256, _COPIED, _normalised, _text  # noqa: E402

_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list}


def _surfaces(pattern) -> set[str]:
    return {_normalised(x) for x in phrasing.expand(_text(pattern))}


def _const(pattern) -> dict:
    return {} if isinstance(pattern, str) else pattern[1]


def test_every_tool_has_twenty_distinct_patterns_with_validations_slots():
    assert set(HELDOUT_PATTERNS) == set(TOOLS) == set(val_fresh.VAL_PATTERNS)
    for tool, pats in HELDOUT_PATTERNS.items():
        assert len(pats) == 20 and len({_text(p) for p in pats}) == 20, tool
        slots = {s for p in val_fresh.VAL_PATTERNS[tool] for s in intents._slots(_text(p))}
        consts = {k for p in val_fresh.VAL_PATTERNS[tool] for k in _const(p)}
        for p in pats:
            assert set(intents._slots(_text(p))) <= slots, (tool, p)
            assert set(_const(p)) <= consts, (tool, p)


def test_heldout_split_draws_its_patterns_and_validations_other_material():
    for tool in TOOLS:
        assert intents.templates_for(tool, "heldout") == HELDOUT_PATTERNS[tool]
        mine = {_text(p) for p in HELDOUT_PATTERNS[tool]}
        for split in ("train", "val", "test"):
            assert not mine & {_text(p) for p in intents.templates_for(tool, split)}, (tool, split)
    for options, val in ((datagen.PREFIXES, val_fresh.VAL_PREFIXES), (datagen.SUFFIXES, val_fresh.VAL_SUFFIXES),
                         (datagen.CONNECTORS, val_fresh.VAL_CONNECTORS)):
        assert intents.dealt(options, "heldout", val) == intents.dealt(options, "val", val) == val
    with pytest.raises(ValueError, match="fresh"):  # no fallback onto dealt options either
        intents.dealt(datagen.PREFIXES, "heldout")


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_heldout_patterns_fill_valid_calls_with_whole_values(tool):
    params = TOOLS[tool]["function"]["parameters"]
    L = datagen.prepared_lists(synth=0.0, val_synth=0.0, stress=0.0)["val"]
    rng = random.Random(20)
    for p in HELDOUT_PATTERNS[tool]:
        for _ in range(8):
            text, args = intents.fill_slots(tool, intents.realize(_text(p), rng), dict(_const(p)), rng, L)
            assert not re.search(r"[{}<>()\[\]]", text), (p, text)
            assert set(params["required"]) <= set(args) <= set(params["properties"]), (p, text, args)
            for k, v in args.items():
                spec = params["properties"][k]
                assert isinstance(v, _TYPES[spec["type"]]), (p, k, v)
                assert "enum" not in spec or v in spec["enum"], (p, k, v)
            if tool == "set_timer":
                assert {"hours", "minutes", "seconds"} & set(args), (p, text, args)
            assert all(args[k] == v for k, v in _const(p).items()), (p, args)
            for v in [v for k, v in args.items() if k in _COPIED] + args.get("items", []):
                assert re.search(rf"(?<![\w']){re.escape(str(v))}(?!\w)", text), (tool, v, text)


def _composed_matcher():
    """Whether a normalised surface is one that compose.template can draw (any tool, its
    MORE frames too, with or without a lead-in and a trailing modifier)."""
    cores = {tuple(_normalised(c).split()) for t in TOOLS for c in compose.cores(t, more=True)}
    leads = {tuple(_normalised(x).split()) for x in compose.LEADS} | {()}
    tails = {tuple(_normalised(x).split()) for t in TOOLS for x in compose._tails(t)} | {()}

    def composed(surface: str) -> bool:
        w = tuple(surface.split())
        return any(w[:len(lead)] == lead and (not tail or w[len(w) - len(tail):] == tail)
                   and w[len(lead):len(w) - len(tail)] in cores for lead in leads for tail in tails)
    return composed


def test_heldout_sentences_are_new_to_every_split_and_to_each_other():
    """With fillers, punctuation and case stripped, no heldout surface equals a surface of
    training (its dealt offsets, the retired validation one included, its train-only
    patterns, their fronted-adjunct forms and compose.py's structures), of validation or
    of test, of any tool; nor one of another heldout pattern. Equality is symmetric, so
    no such surface renders a heldout sentence either. A collision names only the
    heldout pattern, never the other split's sentence."""
    train: set[str] = set()
    for tool in TOOLS:
        for p in intents.templates_for(tool, "train"):
            for x in phrasing.expand(_text(p)):
                train.add(_normalised(x))
                fronted = phrasing.front_adjunct(x)
                if fronted:
                    train.add(_normalised(fronted))
    val = set().union(*(_surfaces(p) for tool in TOOLS for p in intents.templates_for(tool, "val")))
    test = set().union(*(_surfaces(p) for tool in TOOLS for p in intents.templates_for(tool, "test")))
    test_raw = {x.lower() for tool in TOOLS for p in intents.templates_for(tool, "test")
                for x in phrasing.expand(_text(p))}
    composed = _composed_matcher()
    seen: set[str] = set()
    for tool, pats in HELDOUT_PATTERNS.items():
        for p in pats:
            mine = _surfaces(p)
            assert "" not in mine, (tool, p)
            assert not mine & train, (tool, _text(p), "renders a training sentence")
            assert not any(composed(x) for x in mine), (tool, _text(p), "renders a composed training sentence")
            assert not mine & val, (tool, _text(p), "renders a validation sentence")
            assert not mine & test, (tool, _text(p), "renders a test sentence")
            assert not {x.lower() for x in phrasing.expand(_text(p))} & test_raw, (tool, _text(p), "test")
            assert not mine & seen, (tool, _text(p), "renders another heldout pattern's sentence")
            seen |= mine


def test_the_verb_swap_drill_never_puts_in_a_heldout_word():
    """verb_swap.py trains verbs that no data module uses; none of them is a heldout word."""
    words = {w for pats in HELDOUT_PATTERNS.values() for p in pats for x in phrasing.expand(_text(p))
             for w in re.findall(r"[a-z']+", x.lower())}
    assert not words & set(verb_swap.pool()), sorted(words & set(verb_swap.pool()))


def test_training_never_draws_a_heldout_pattern(tmp_path, monkeypatch):
    splits, patterns = set(), set()
    templates_for, realize = intents.templates_for, intents.realize

    def recording_templates_for(intent, split):
        splits.add(split)
        return templates_for(intent, split)

    def recording_realize(pattern, rng, **kw):
        patterns.add(pattern)
        return realize(pattern, rng, **kw)

    monkeypatch.setattr(intents, "templates_for", recording_templates_for)
    monkeypatch.setattr(intents, "realize", recording_realize)
    datagen.generate(tmp_path, seed=0, n_train=600, n_val=100, noise=0.5, front=0.3, context=0.3, phrase=0.5,
                     compose=0.3, drill=0.3, swap=0.3, casefold=0.2)
    assert splits == {"train", "val", "test"}
    assert patterns and not patterns & {_text(p) for pats in HELDOUT_PATTERNS.values() for p in pats}


def _final_call(row: dict) -> dict:
    return [m for m in row["messages"] if m.get("tool_calls")][-1]["tool_calls"][0]["function"]


def test_heldout_writes_single_calls_from_heldout_patterns_and_validation_material(tmp_path, monkeypatch):
    splits = []
    templates_for = intents.templates_for

    def recording_templates_for(intent, split):
        splits.append(split)
        return templates_for(intent, split)

    monkeypatch.setattr(intents, "templates_for", recording_templates_for)
    assert heldout.heldout(tmp_path / "a", n=300, seed=1) == 300
    assert set(splits) == {"heldout"}
    rows = [json.loads(line) for line in (tmp_path / "a" / "val.jsonl").read_text().splitlines()]
    assert len(rows) == 300 and all(r["category"] == "single" for r in rows)
    assert {_final_call(r)["name"] for r in rows} == set(TOOLS)
    cities = set(datagen.split_lists()["val"]["cities"])
    places = [_final_call(r)["arguments"]["location"] for r in rows
              if _final_call(r)["name"] == "get_weather" and "location" in _final_call(r)["arguments"]]
    assert places and set(places) <= cities  # validation's entities, none invented
    heldout.heldout(tmp_path / "b", n=300, seed=1)
    heldout.heldout(tmp_path / "c", n=300, seed=2)
    a = (tmp_path / "a" / "val.jsonl").read_bytes()
    assert a == (tmp_path / "b" / "val.jsonl").read_bytes() and a != (tmp_path / "c" / "val.jsonl").read_bytes()


def test_heldout_chat_turns_are_validation_ones():
    for seed in range(300):  # facts too, whose phrasing replies.chat_turn picks by split name
        assert datagen.chat_turn(random.Random(seed), "heldout") == datagen.chat_turn(random.Random(seed), "val")


def test_published_test_split_is_unchanged(tmp_path):
    datagen.generate(tmp_path, seed=0, n_train=10, n_val=10)
    assert hashlib.sha256((tmp_path / "test.jsonl").read_bytes()).hexdigest() == PUBLISHED_TEST_SHA256


def test_fold_val_trains_validation_structures_only_when_asked(monkeypatch):
    lists = datagen.prepared_lists(fold_val=1.0)
    assert lists["val"]["_fold_val"] == lists["test"]["_fold_val"] == 0.0  # never outside training
    realised = []
    realize = intents.realize
    monkeypatch.setattr(intents, "realize", lambda pattern, rng: realised.append(pattern) or realize(pattern, rng))
    rng = random.Random(0)
    for tool in TOOLS:
        realised.clear()
        intents.fill(tool, rng, lists["train"], "train")
        assert realised[0] in {_text(p) for p in val_fresh.VAL_PATTERNS[tool]}, tool
    # off (the default) draws exactly as before: no extra draw from the generator
    plain, folded0 = datagen.prepared_lists()["train"], datagen.prepared_lists(fold_val=0.0)["train"]
    a, b = random.Random(5), random.Random(5)
    assert [intents.fill(t, a, plain, "train") for t in TOOLS] == [intents.fill(t, b, folded0, "train") for t in TOOLS]
