"""Round-3 training-only material (train_patterns.ROUND3, train_entities.STRESS3, the
train-only openers and connectors, and fact phrasings): new,
held-out-free, and rendered into valid calls with values copied whole."""
from __future__ import annotations

import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training import datagen, intents, lexicon, phrasing, replies, train_entities  # noqa: E402
from training.lexicon import split_lists  # noqa: E402
from training.templates import DND_OFF, DND_ON, OFF, ON  # noqa: E402
from training.train_patterns import ROUND2, ROUND3, TRAIN_ONLY  # noqa: E402

from test_training_round2 import _held_chat  # noqa: E402
from test_training_splits import _fills, _text  # noqa: E402


def test_round3_patterns_are_many_and_train_only():
    assert sum(len(v) for v in ROUND3.values()) >= 100
    for tool, pats in ROUND3.items():
        assert all(p in TRAIN_ONLY[tool] for p in pats)
        assert not set(map(str, pats)) & set(map(str, ROUND2.get(tool, [])))
        for s in ("val", "test"):
            assert not any(p in intents.templates_for(tool, s) for p in pats), (tool, s)


# The held-out surface and whole-value checks run for every round in test_training_round2.py.


def test_round3_timers_have_a_label_only_when_one_is_marked(monkeypatch):
    lists = split_lists()["train"] | {"languages": ["French"]}
    for p in ROUND3["set_timer"]:
        for text, args in _fills("set_timer", p, lists, random.Random(2), monkeypatch, 4):
            assert ("label" in args) == ("{label}" in p), (p, text, args)


# Hand-labelled: the ROUND3 value each polarity pattern must carry (negative words both ways).
_POLARITY = {
    "set_do_not_disturb": {
        "being bothered is the last thing I want right now": DND_ON,
        "please don't let me be interrupted tonight": DND_ON,
        "mute all alerts for now": DND_ON,
        "I don't need the silence anymore": DND_OFF,
        "resume all my notifications": DND_OFF,
    },
    "set_lights": {"fill the {room} with light": ON, "let the {room} go dark now": OFF},
}


def assert_polarity(patterns: dict, polarity: dict) -> None:
    """Each hand-labelled sentence is rendered by some pattern of ``patterns``, and every
    pattern rendering it carries the labelled constant arguments."""
    for tool, cases in polarity.items():
        for sentence, want in cases.items():
            hits = [p for p in patterns[tool] if not isinstance(p, str)
                    and sentence.lower() in {x.lower() for x in phrasing.expand(_text(p))}]
            assert hits, (tool, sentence)
            assert all(p[1] == want for p in hits), (sentence, hits)


def test_round3_polarity_cases():
    assert_polarity(ROUND3, _POLARITY)
    for p in ROUND3["set_volume"]:
        if isinstance(p, tuple):
            up = "up" in p[0] or "top" in p[0] or "high" in p[0] or "max" in p[0] or "full" in p[0]
            assert p[1]["level"] == (100 if up else 0), p


def test_round3_stress_values_are_not_lexicon_values():
    lex = open(Path(lexicon.__file__)).read().lower()
    for slot, vals in train_entities.STRESS3.items():
        for v in vals:
            assert v.lower() not in lex, (slot, v)
            assert v in train_entities.STRESS[slot]


def test_round3_openers_connectors_and_facts_are_new_and_train_only():
    assert not set(datagen.TRAIN_PREFIXES) & set(datagen.PREFIXES)
    assert not set(datagen.TRAIN_CONNECTORS) & set(datagen.CONNECTORS)
    assert len(set(datagen.TRAIN_CONNECTORS)) == len(datagen.TRAIN_CONNECTORS)
    rng = random.Random(4)
    seen = set()
    for _ in range(400):
        seen.add(datagen.style("set a timer for 5 minutes", rng, "train"))
    assert any(s.lower().startswith(("be a star", "help me out", "favour to ask")) for s in seen)
    old = {x.lower() for phr, _ in replies.FACTS for x in phr}
    new = [x for x in sum(replies._ROUND3_FACT_PHRASES.values(), [])]
    new += [x for x in sum(replies._ROUND3_FACT_EXTRA.values(), [])]
    assert not {x.lower() for x in new} & old
    assert not {x.lower() for x in new} & _held_chat()


def test_train_prefix_draws_leave_held_out_styling_unchanged():
    """The train-only opener is drawn only for the training split: the held-out splits'
    random streams are untouched (the split test checks the files byte for byte too)."""
    for split in ("val", "test"):
        a, b = random.Random(9), random.Random(9)
        saved = datagen.TRAIN_PREFIX_SHARE
        try:
            out_a = [datagen.style("set a timer for 5 minutes", a, split) for _ in range(200)]
            datagen.TRAIN_PREFIX_SHARE = 1.0
            out_b = [datagen.style("set a timer for 5 minutes", b, split) for _ in range(200)]
        finally:
            datagen.TRAIN_PREFIX_SHARE = saved
        assert out_a == out_b
