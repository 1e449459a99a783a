"""Composed training requests (training/compose.py): off by default without a single rng
draw, training-only when on, valid calls with whole values, never a held-out surface, and
many distinct structures per tool."""
from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training import compose, datagen, phrasing  # noqa: E402
from training.lexicon import split_lists  # noqa: E402
from training.tools import TOOLS  # noqa: E402

from test_training_splits import _COPIED, _held_out, _normalised, _text  # noqa: E402

SPLITS = ("train", "val", "test")


def _gen(path: Path, **kw) -> dict[str, bytes]:
    datagen.generate(path, seed=3, n_train=300, n_val=120, **kw)
    return {s: (path / f"{s}.jsonl").read_bytes() for s in SPLITS}


def test_off_by_default_draws_nothing(tmp_path, monkeypatch):
    plain = _gen(tmp_path / "plain")

    def boom(*a, **k):
        raise AssertionError("compose drawn while off")

    monkeypatch.setattr(compose, "fill", boom)
    monkeypatch.setattr(compose, "template", boom)
    assert _gen(tmp_path / "zero", compose=0.0) == plain


def test_compose_changes_training_only(tmp_path, monkeypatch):
    off = _gen(tmp_path / "off", compose=0.0)
    calls = []
    real = compose.fill
    monkeypatch.setattr(compose, "fill", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    on = _gen(tmp_path / "on", compose=0.5)
    assert on["val"] == off["val"] and on["test"] == off["test"]
    assert on["train"] != off["train"]
    assert len(calls) > 50


def _lists(stress: float) -> dict:
    return split_lists()["train"] | {"languages": ["French", "Greek"], "_stress": stress, "_synth": 0.3,
                                     "_tokens": None, "_vocab": ["alpha", "beta", "gamma"]}


@pytest.mark.parametrize("more", [False, True])
@pytest.mark.parametrize("stress", [0.0, 1.0])
@pytest.mark.parametrize("tool", list(TOOLS))
def test_composed_requests_make_valid_calls_with_whole_values(tool, stress, more):
    lists = _lists(stress)
    params = TOOLS[tool]["function"]["parameters"]
    rng = random.Random(list(TOOLS).index(tool) * 10 + int(stress))
    for i in range(150):
        text, args = compose.fill(tool, rng, lists, lead=i % 3 != 0, tail=i % 4 != 0, more=more)
        assert not re.search(r"[{}<>()\[\]?]", text), text
        assert set(params["required"]) <= set(args) <= set(params["properties"]), (text, args)
        for k, v in args.items():
            spec = params["properties"][k]
            kind = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": list}[spec["type"]]
            assert isinstance(v, kind), (k, v, text)
            if "enum" in spec:
                assert v in spec["enum"], (k, v, text)
        for v in [v for k, v in args.items() if k in _COPIED] + args.get("items", []):
            assert re.search(rf"(?<![\w']){re.escape(str(v))}(?!\w)", text), (tool, v, text)


def test_arguments_are_exactly_the_slots_said():
    """Optional slots appear in args exactly when their phrase is in the template."""
    rng = random.Random(5)
    seen_with, seen_without = set(), set()
    for tool in ("set_alarm", "create_event", "get_weather", "get_news", "set_lights", "get_directions"):
        for _ in range(200):
            tpl, const = compose.template(tool, rng)
            _, args = compose.fill_slots(tool, tpl, const, rng, _lists(0.0))
            opt = {"set_alarm": ("{label}", "label"), "create_event": ("{place}", "location"),
                   "get_weather": ("{city}", "location"), "get_news": ("{topic}", "topic"),
                   "set_lights": ("{pct}", "brightness"), "get_directions": ("{mode}", "mode")}[tool]
            assert (opt[0] in tpl) == (opt[1] in args), (tpl, args)
            (seen_with if opt[1] in args else seen_without).add(tool)
    assert seen_with == seen_without == {"set_alarm", "create_event", "get_weather", "get_news", "set_lights",
                                         "get_directions"}


def _held() -> set[str]:
    held = set()
    for tool in TOOLS:
        for p in _held_out(tool):
            held.update(_normalised(x) for x in phrasing.expand(_text(p)))
    return held


@pytest.mark.parametrize("more", [False, True])
def test_composed_surfaces_are_never_held_out(more):
    held = _held()
    rng = random.Random(17)
    for tool in TOOLS:
        for i in range(300):
            tpl, _ = compose.template(tool, rng, lead=i % 2 == 0, tail=i % 3 == 0, more=more)
            assert _normalised(tpl) not in held, (tool, tpl)


def test_more_frames_are_new_and_no_held_out_structure():
    """MORE's verb phrases add cores, none of them a held-out surface, so none is only ever
    drawn again; and turning them on changes the training split alone."""
    held = _held()
    for tool in TOOLS:
        base, more = compose.cores(tool), compose.cores(tool, more=True)
        assert len(more) > len(base) and base < more, tool
        assert not {_normalised(c) for c in more - base} & held, tool
        assert compose.structure_count(tool, more=True) > compose.structure_count(tool)


def test_more_frames_change_training_only(tmp_path):
    base = _gen(tmp_path / "base", compose=0.5)
    more = _gen(tmp_path / "more", compose=0.5, more_frames=True)
    assert more["val"] == base["val"] and more["test"] == base["test"]
    assert more["train"] != base["train"]


def test_many_distinct_structures_per_tool():
    for tool in TOOLS:
        assert compose.structure_count(tool) >= 500, tool
    # and a sample really shows that variety, not one frame over and over
    rng = random.Random(1)
    for tool in TOOLS:
        assert len({compose.template(tool, rng)[0] for _ in range(300)}) >= 100, tool


def test_compose_parts_are_train_only():
    """Lead-ins and tails are none of the dealt or validation openers (ordinary filler aside)."""
    from training.val_fresh import VAL_PREFIXES, VAL_SUFFIXES
    held = {x.strip(" ,").lower() for p in VAL_PREFIXES + VAL_SUFFIXES if "<" not in p
            for x in phrasing.expand(p)}
    assert not {x.strip(" ,").lower() for x in compose.LEADS} & held
