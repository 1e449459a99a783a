"""Round-4 training-only material (train_round4.py: ROUND4 merged into
train_patterns.TRAIN_ONLY, STRESS4 into train_entities, openers / connectors into datagen,
chat phrasings into replies): many, new, held-out-free, and rendered into valid calls with
values copied whole (the held-out surface and whole-value checks run for every round in
test_training_round2.py)."""
from __future__ import annotations

import random
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training import datagen, intents, lexicon, replies, train_entities, train_round4  # noqa: E402
from training.lexicon import split_lists  # noqa: E402
from training.templates import DND_OFF, DND_ON, LOCK, OFF, ON, UNLOCK  # noqa: E402
from training.train_patterns import ROUND2, ROUND3, TRAIN_ONLY  # noqa: E402
from training.train_round4 import ROUND4  # noqa: E402
from training.val_fresh import VAL_CONNECTORS, VAL_PREFIXES  # noqa: E402

from test_training_round2 import _held_chat  # noqa: E402
from test_training_round3 import assert_polarity  # noqa: E402
from test_training_splits import _fills, _text  # noqa: E402


def test_round4_patterns_are_many_and_train_only():
    assert sum(len(v) for v in ROUND4.values()) >= 100
    assert len(ROUND4) >= 15  # spread over the tools the misses concern
    for tool, pats in ROUND4.items():
        assert all(p in TRAIN_ONLY[tool] for p in pats)
        assert len(set(map(str, pats))) == len(pats), tool
        assert not set(map(str, pats)) & set(map(str, ROUND2.get(tool, []) + ROUND3.get(tool, [])))
        for s in ("val", "test"):
            assert not any(p in intents.templates_for(tool, s) for p in pats), (tool, s)


def test_round4_patterns_fill_only_their_tools_slots():
    for tool, pats in ROUND4.items():
        own = set()
        for p in intents.TEMPLATES[tool]:
            own |= set(re.findall(r"\{(\w+)\}", _text(p)))
        for p in pats:
            assert set(re.findall(r"\{(\w+)\}", _text(p))) <= own, (tool, p)


def test_round4_timers_and_alarms_have_a_label_only_when_one_is_said(monkeypatch):
    lists = split_lists()["train"] | {"languages": ["French"]}
    for tool in ("set_timer", "set_alarm"):
        for p in ROUND4[tool]:
            for text, args in _fills(tool, p, lists, random.Random(3), monkeypatch, 4):
                assert ("label" in args) == ("{label}" in p), (p, text, args)


def test_round4_weather_and_news_set_optional_arguments_only_when_said(monkeypatch):
    lists = split_lists()["train"] | {"languages": ["French"]}
    for tool, arg, slot in (("get_weather", "location", "{city}"), ("get_news", "topic", "{topic}")):
        for p in ROUND4[tool]:
            for _, args in _fills(tool, p, lists, random.Random(1), monkeypatch, 4):
                assert (arg in args) == (slot in p), (p, args)


# Hand-labelled (written apart from the patterns): the ROUND4 value each on/off wording
# must carry. "let ... in" opens a door; letting calls through turns do-not-disturb OFF.
_POLARITY = {
    "lock_door": {
        "let the plumber in at the {door}": UNLOCK, "a courier is here at the {door}, let them in": UNLOCK,
        "pop open the {door} for mum": UNLOCK, "we're expecting guests at the {door}, open it": UNLOCK,
        "nobody should get in through the {door}, lock it": LOCK, "{door} - bolt it for the night": LOCK,
        "confirm the {door} is locked before bed": LOCK,
    },
    "set_do_not_disturb": {
        "let my calls through again": DND_OFF, "I'm free now, people can reach me again": DND_OFF,
        "get rid of do not disturb, I'm reachable again": DND_OFF, "un-silence my phone": DND_OFF,
        "hush my phone during the exam": DND_ON, "keep my phone quiet until I'm out of class": DND_ON,
        "I'm in a lecture, no buzzing from my phone": DND_ON,
    },
    "set_lights": {
        "snuff out the {room} lights": OFF, "no one is in the {room} anymore, the lights can go off": OFF,
        "it's pitch black in the {room}, sort the lights": ON, "wasting money on the {room} lamps, kill them": OFF,
    },
    "set_volume": {
        "zero out the speaker entirely": {"level": 0}, "knock the volume right down to zero": {"level": 0},
        "whack the volume all the way up": {"level": 100}, "loudest setting on the speaker": {"level": 100},
    },
}


def test_round4_polarity_cases():
    assert_polarity(ROUND4, _POLARITY)
    for tool in ("lock_door", "set_do_not_disturb", "set_lights"):  # every on/off wording is labelled
        assert all(not isinstance(p, str) for p in ROUND4[tool]), tool


def test_round4_stress_values_are_not_lexicon_values():
    lex = open(Path(lexicon.__file__)).read().lower()
    for slot, vals in train_round4.STRESS4.items():
        for v in vals:
            assert v.lower() not in lex, (slot, v)
            assert v in train_entities.STRESS[slot]
    for v in train_round4.STRESS4_ITEMS:
        assert v.lower() not in lex, v
        assert v in train_entities.STRESS_ITEMS


def test_round4_stress_values_fill_their_slots_whole(monkeypatch):
    """A stress value of a new slot (room, door, city) reaches its argument whole."""
    lists = split_lists()["train"] | {"languages": ["French"], "_stress": 1.0}
    cases = {"set_lights": ("(turn|switch) on the {room} <lights>", "room", "room"),
             "lock_door": ("lock the {door}", "door", "door"), "get_weather": ("weather in {city}", "city", "location")}
    for tool, (p, slot, arg) in cases.items():
        got = {args[arg] for _, args in _fills(tool, p, lists, random.Random(5), monkeypatch, 40)}
        assert got & set(train_round4.STRESS4[slot]), (tool, got)


def test_round4_openers_connectors_and_chat_are_new_and_train_only():
    for c in train_round4.ROUND4_CONNECTORS:
        assert c in datagen.TRAIN_CONNECTORS
        assert c not in datagen.CONNECTORS and c not in VAL_CONNECTORS, c
    assert len(set(datagen.TRAIN_CONNECTORS)) == len(datagen.TRAIN_CONNECTORS)
    for p in train_round4.ROUND4_PREFIXES:
        assert p in datagen.TRAIN_PREFIXES
        assert p not in datagen.PREFIXES and p not in VAL_PREFIXES, p
    new = [x for opts in train_round4.ROUND4_SMALLTALK.values() for x in opts]
    new += [x for opts in train_round4.ROUND4_ARITH.values() for x in opts]
    old = {x.lower() for opts in replies.ARITH_TEMPLATES.values() for x in opts}
    old |= {x.lower() for phr, _ in replies.SMALLTALK + replies.FACTS for x in phr}
    assert not {x.lower() for x in new} & old
    assert not {re.sub(r"\{[ab]\}", "N", x.lower()) for x in new} & _held_chat()
    for reply, opts in train_round4.ROUND4_SMALLTALK.items():
        assert set(opts) <= set(replies.TRAIN_SMALLTALK[reply])
    for op, opts in train_round4.ROUND4_ARITH.items():
        assert set(opts) <= set(replies.TRAIN_ARITH[op])
