"""Round-2 training-only material (train_patterns.ROUND2, train_entities.STRESS2, the
train-only chat phrasings, connectors and out-of-scope kinds): new, held-out-free, and
rendered into valid calls with values copied whole."""
from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training import datagen, intents, out_of_scope, phrasing, replies  # noqa: E402
from training.lexicon import split_lists  # noqa: E402
from training.tools import TOOLS  # noqa: E402
from training.train_patterns import ROUND2, ROUND3, TRAIN_ONLY  # noqa: E402
from training.train_round4 import ROUND4  # noqa: E402
from training.train_round5 import ROUND5  # noqa: E402
from training.train_round6 import ROUND6  # noqa: E402
from training.train_round7 import ROUND7  # noqa: E402
from training.val_fresh import VAL_ARITH, VAL_FACTS, VAL_SMALLTALK  # noqa: E402

from test_training_splits import _COPIED, _fills, _held_out, _normalised, _text  # noqa: E402


def _held_out_surfaces(normalise) -> set[str]:
    held = set()
    for tool in TOOLS:
        for p in _held_out(tool):
            held.update(normalise(x.lower()) for x in phrasing.expand(_text(p)))
    return held


def test_round2_patterns_are_many_and_train_only():
    assert sum(len(v) for v in ROUND2.values()) >= 140
    for tool, pats in ROUND2.items():
        assert all(p in TRAIN_ONLY[tool] for p in pats)
        for s in ("val", "test"):
            assert not any(p in intents.templates_for(tool, s) for p in pats), (tool, s)


ROUNDS = pytest.mark.parametrize("patterns, least", [(ROUND2, 500), (ROUND3, 300), (ROUND4, 500), (ROUND5, 2500),
                                                     (ROUND6, 2500),
                                                     (ROUND7, 1500)],
                                 ids=["round2", "round3", "round4", "round5", "round6", "round7"])


@ROUNDS
def test_never_equals_a_held_out_surface_even_without_fillers(patterns, least):
    held, held_norm = _held_out_surfaces(lambda x: x), _held_out_surfaces(_normalised)
    for tool, pats in patterns.items():
        for p in pats:
            surfaces = {x.lower() for x in phrasing.expand(_text(p))}
            assert not surfaces & held, (tool, p, sorted(surfaces & held)[:3])
            same = {_normalised(x) for x in surfaces} & held_norm
            assert not same, (tool, p, sorted(same)[:3])


@ROUNDS
@pytest.mark.parametrize("stress", [0.0, 1.0])
def test_structures_copy_whole_values(patterns, least, stress, monkeypatch):
    lists = split_lists()["train"] | {"languages": ["French", "Greek"], "_stress": stress}
    rng = random.Random(7)
    checked = 0
    for tool, pats in patterns.items():
        params = TOOLS[tool]["function"]["parameters"]
        for p in pats:
            for text, args in _fills(tool, p, lists, rng, monkeypatch, 6):
                # no pattern syntax left over; a "?" only ends a sentence
                assert not re.search(r"[{}<>()\[\]?]", text.replace("? ", " ").rstrip("?")), (p, text)
                assert set(params["required"]) <= set(args) <= set(params["properties"]), (p, text, args)
                if not isinstance(p, str):
                    assert all(args[k] == v for k, v in p[1].items()), (p, args)
                for v in [v for k, v in args.items() if k in _COPIED] + args.get("items", []):
                    assert re.search(rf"(?<![\w']){re.escape(str(v))}(?!\w)", text), (tool, v, text)
                    checked += 1
    assert checked > least


def test_optional_arguments_only_when_said(monkeypatch):
    """The no-location weather and no-topic news shapes never set the optional argument."""
    lists = split_lists()["train"] | {"languages": ["French"]}
    for tool, arg in (("get_weather", "location"), ("get_news", "topic")):
        for p in ROUND2[tool]:
            slot = {"get_weather": "{city}", "get_news": "{topic}"}[tool]
            if slot in p:
                continue
            for _, args in _fills(tool, p, lists, random.Random(1), monkeypatch, 4):
                assert arg not in args, (p, args)


def _held_chat(splits=("val", "test")) -> set[str]:
    """The chat phrasings the held-out splits draw from: validation's own (val_fresh.py),
    and the test offset and each fact's third phrasing."""
    held = set()
    if "val" in splits:
        held |= {o for opts in VAL_ARITH.values() for o in opts} | set(VAL_FACTS.values())
        held |= {o for opts in VAL_SMALLTALK.values() for o in opts}
    if "test" in splits:
        for opts in replies.ARITH_TEMPLATES.values():
            held |= {o for i, o in enumerate(opts) if intents.SPLIT_OF_INDEX[i % 6] == "test"}
        for phr, _ in replies.SMALLTALK:
            held |= {o for i, o in enumerate(phr) if intents.SPLIT_OF_INDEX[i % 6] == "test"}
        held |= {phr[2] for phr, _ in replies.FACTS}
    return {re.sub(r"\{[ab]\}", "N", h.lower()) for h in held}


def test_train_only_chat_is_new_and_held_out_draws_are_unchanged():
    old = {x.lower() for opts in replies.ARITH_TEMPLATES.values() for x in opts}
    old |= {x.lower() for phr, _ in replies.SMALLTALK + replies.FACTS for x in phr}
    new = [x for opts in replies.TRAIN_ARITH.values() for x in opts]
    new += [x for opts in replies.TRAIN_SMALLTALK.values() for x in opts]
    new += [x for opts in replies.TRAIN_FACT_PHRASES.values() for x in opts]
    new += [x for phr, _ in replies.TRAIN_FACTS for x in phr]
    assert len(new) >= 150
    assert not {x.lower() for x in new} & old
    assert set(replies.TRAIN_SMALLTALK) == {r for _, r in replies.SMALLTALK}
    assert set(replies.TRAIN_FACT_PHRASES) == {r for _, r in replies.FACTS}
    assert not {re.sub(r"\{[ab]\}", "N", x.lower()) for x in new} & _held_chat()
    for split in ("val", "test"):
        held = _held_chat((split,))
        rng = random.Random(3)
        for _ in range(500):
            _, q, _ = replies.chat_turn(rng, split)
            assert re.sub(r"\d+", "N", q.lower()) in held, (split, q)


def test_arithmetic_replies_are_right():
    rng = random.Random(5)
    seen = set()
    for _ in range(3000):
        kind, q, a = replies.chat_turn(rng, "train")
        if kind != "arithmetic":
            continue
        m = re.fullmatch(r"(\d+) ([+\-x]) (\d+) = (-?\d+)\.", a)
        assert m, a
        x, op, y, z = int(m[1]), m[2], int(m[3]), int(m[4])
        assert z == {"+": x + y, "-": x - y, "x": x * y}[op], a
        assert str(x) in q and str(y) in q, (q, a)
        seen.add(q.replace(str(x), "A").replace(str(y), "B"))
    assert len(seen) > 40  # the train-only phrasings are drawn


def test_train_connectors_and_oos_kinds_are_new():
    assert not set(datagen.TRAIN_CONNECTORS) & set(datagen.CONNECTORS)
    lists = split_lists()
    held = {k for s in ("val", "test") for k in lists[s]["out_of_scope"]}
    assert not set(out_of_scope.TRAIN_ROUND2) & held
    assert set(out_of_scope.TRAIN_ROUND2) <= set(lists["train"]["out_of_scope"])
