"""Round-5 training-only structures (training/train_round5.py), drawn only at datagen's
``round5`` share: many per tool, new, never a validation, test or held-out-guide surface
(even with fillers stripped or an adjunct fronted), rendered into valid calls whose copied
values stand whole in the request (checked with rounds 2-4 in test_training_round2.py), on/off
right both ways; and the share itself: 0 draws nothing, so every split is byte-identical, and
1 gives every training single- and multi-call request a round-5 structure while validation
and test stay the same."""
from __future__ import annotations

import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training import compose, datagen, intents, phrasing  # noqa: E402
from training.heldout_patterns import HELDOUT_PATTERNS  # noqa: E402
from training.lexicon import split_lists  # noqa: E402
from training.templates import DND_OFF, DND_ON, LOCK, OFF, ON, UNLOCK  # noqa: E402
from training.tools import TOOLS  # noqa: E402
from training.train_patterns import TRAIN_ONLY  # noqa: E402
from training.train_round5 import ROUND5  # noqa: E402

from test_training_round3 import assert_polarity  # noqa: E402
from test_training_splits import _fills, _held_out, _normalised, _text  # noqa: E402

SPLITS = ("train", "val", "test")


def _surfaces(pattern) -> set[str]:
    return {x.lower() for x in phrasing.expand(_text(pattern))}


def test_many_new_distinct_structures_for_every_tool():
    assert set(ROUND5) == set(TRAIN_ONLY) == set(TOOLS)
    assert sum(len(v) for v in ROUND5.values()) >= 630
    for tool, pats in ROUND5.items():
        assert len(pats) >= 30, tool
        texts = [_text(p) for p in pats]
        assert len(set(texts)) == len(texts), tool
        earlier = {_text(p) for p in intents.TEMPLATES[tool] + TRAIN_ONLY[tool]}
        assert not set(texts) & earlier, (tool, sorted(set(texts) & earlier))


def test_not_merged_into_any_split():
    """Opt-in: no split's own structures hold a round-5 one, so the data that rounds 1-4
    and every existing command produce stays as it was."""
    for tool, pats in ROUND5.items():
        texts = {_text(p) for p in pats}
        for split in (*SPLITS, "heldout"):
            assert not texts & {_text(p) for p in intents.templates_for(tool, split)}, (tool, split)


def test_structures_are_new_not_rewordings_of_training_ones():
    """With fillers stripped, most surfaces of each round-5 structure are not training
    surfaces already (a pattern that only re-said old sentences would add nothing)."""
    for tool, pats in ROUND5.items():
        train = set()
        for p in intents.templates_for(tool, "train"):
            train |= {_normalised(x) for x in _surfaces(p)}
        for p in pats:
            mine = {_normalised(x) for x in _surfaces(p)}
            assert len(mine & train) <= len(mine) // 2, (tool, _text(p))


def test_never_equals_a_held_out_or_guide_surface():
    """No surface, raw, with fillers and punctuation stripped, or with its trailing adjunct
    fronted (the --front drill), equals one of validation, test or the held-out guide
    (heldout_patterns.py, which training must never say). A failure names only the
    round-5 pattern, never the held-out sentence."""
    raw, norm = set(), set()
    for tool in TOOLS:
        for p in _held_out(tool) + list(HELDOUT_PATTERNS[tool]):
            s = _surfaces(p)
            raw |= s
            norm |= {_normalised(x) for x in s}
    for tool, pats in ROUND5.items():
        for p in pats:
            mine = _surfaces(p)
            # plain booleans, so that pytest's report of a failure cannot show a held-out sentence
            clash = bool(mine & raw) or bool({_normalised(x) for x in mine} & norm)
            fronts = [phrasing.front_adjunct(x) for x in mine]
            clash = clash or any(f and _normalised(f) in norm for f in fronts)
            assert not clash, (tool, _text(p))


def test_slots_and_constants_are_the_tools_own():
    for tool, pats in ROUND5.items():
        own = {s for p in intents.templates_for(tool, "train") for s in intents._slots(_text(p))}
        consts = [p[1] for p in intents.templates_for(tool, "train") if not isinstance(p, str)]
        for p in pats:
            assert set(intents._slots(_text(p))) <= own, (tool, p)
            assert isinstance(p, str) or p[1] in consts, (tool, p)


def test_optional_arguments_only_when_said(monkeypatch):
    lists = split_lists()["train"] | {"languages": ["French"]}
    cases = (("set_timer", "label", "{label}"), ("set_alarm", "label", "{label}"), ("get_weather", "location", "{city}"),
             ("get_weather", "day", "{day}"), ("get_news", "topic", "{topic}"), ("get_directions", "mode", "{mode}"),
             ("create_event", "location", "{place}"), ("create_reminder", "time", "{time}"))
    for tool, arg, slot in cases:
        for p in ROUND5[tool]:
            for _, args in _fills(tool, p, lists, random.Random(1), monkeypatch, 3):
                assert (arg in args) == (slot in _text(p)), (tool, p, args)


# Hand-labelled (written apart from the patterns): the value each round-5 wording must
# carry. The words that usually say the opposite are the point: "turn off notifications"
# enables do-not-disturb, "cut the lights to 20 percent" keeps them on, "leave the door
# open" unlocks it, "don't leave the lights burning" turns them off.
_POLARITY = {
    "set_do_not_disturb": {
        "switch off my notifications": DND_ON, "cut off all alerts for a bit": DND_ON,
        "turn my notifications back on": DND_OFF, "flip my phone to silent": DND_ON,
        "don't want my phone buzzing tonight": DND_ON, "nobody call me for the next hour": DND_ON,
        "I don't mind being disturbed anymore": DND_OFF, "it's fine to call me again": DND_OFF,
        "stop hiding my notifications from me": DND_OFF, "do not keep my calls muted anymore": DND_OFF,
        "is dnd still on? turn it off": DND_OFF, "is focus mode off? switch it on": DND_ON,
        "I'm sick of silent mode, scrap it": DND_OFF, "my phone can ring normally from now on": DND_OFF,
    },
    "set_lights": {
        "cut the den lights to {pct} percent": ON, "cut the den lights completely": OFF,
        "don't leave the den lights burning": OFF, "never mind, keep the den lights on": ON,
        "we can't see a thing in the den": ON, "don't need the den lit anymore": OFF,
        "I'd rather the den wasn't dark": ON, "black out the den completely": OFF,
        "lights in the den? off, please": OFF, "lights in the den? on, please": ON,
        "the den does not need to be bright now": OFF, "it's getting dark in the den": ON,
    },
    "lock_door": {
        "leave the side door open for the guests": UNLOCK, "don't leave the side door unlocked": LOCK,
        "the side door is still open, sort that": LOCK, "the side door shouldn't be locked for the party": UNLOCK,
        "switch the side door to unlocked": UNLOCK, "double-lock the side door": LOCK,
        "is the side door locked? unlock it please": UNLOCK, "I've lost my keys, release the side door": UNLOCK,
        "bolt the side door, it's wide open": LOCK, "I don't want strangers getting in through the side door": LOCK,
        "there's no need to have the side door bolted today": UNLOCK, "wave them in at the side door": UNLOCK,
    },
    "set_volume": {
        "don't mute it, turn it all the way up": {"level": 100}, "kill all sound at once": {"level": 0},
        "set the volume to halfway": {"level": 50}, "don't hold back, max volume now": {"level": 100},
        "turn the volume right off": {"level": 0},
    },
}


def test_polarity_cases():
    rendered = {tool: [(p[0].replace("{room}", "den").replace("{door}", "side door"), p[1])
                       for p in pats if not isinstance(p, str)] for tool, pats in ROUND5.items()}
    assert_polarity(rendered, _POLARITY)


def test_on_off_tools_are_covered_both_ways():
    for tool, ways in (("set_lights", (ON, OFF)), ("lock_door", (LOCK, UNLOCK)),
                       ("set_do_not_disturb", (DND_ON, DND_OFF))):
        assert all(not isinstance(p, str) for p in ROUND5[tool]), tool  # every wording is labelled
        for want in ways:
            assert sum(p[1] == want for p in ROUND5[tool]) >= 12, (tool, want)


# --- the datagen share ---

def _gen(path: Path, **kw) -> dict[str, bytes]:
    datagen.generate(path, seed=3, n_train=300, n_val=120, **kw)
    return {s: (path / f"{s}.jsonl").read_bytes() for s in SPLITS}


class _Poisoned(dict):
    def __getitem__(self, key):
        raise AssertionError("round 5 drawn while off")


def test_share_zero_draws_nothing_and_changes_no_byte(tmp_path, monkeypatch):
    """The data as it was before round 5: its draw replaced by a stub that draws nothing.
    The real one at share 0 (the default) must write the same bytes: a single stray draw
    would move every later one."""
    drills = dict(noise=0.3, compose=0.3, swap=0.3, front=0.2, fold_val=0.1)
    real = datagen._round5
    monkeypatch.setattr(datagen, "_round5", lambda intent, rng, L: None)
    before = _gen(tmp_path / "before"), _gen(tmp_path / "before_drills", **drills)
    monkeypatch.setattr(datagen, "_round5", real)
    monkeypatch.setattr(datagen, "ROUND5", _Poisoned())
    assert _gen(tmp_path / "default") == before[0]
    assert _gen(tmp_path / "zero", round5=0.0) == before[0]
    assert _gen(tmp_path / "zero_drills", round5=0.0, **drills) == before[1]
    lists = datagen.prepared_lists(round5=0.7)
    assert lists["train"]["_round5"] == 0.7 and lists["val"]["_round5"] == lists["test"]["_round5"] == 0.0


def _recorded(tmp_path: Path, monkeypatch, share: float, **kw) -> tuple[dict, list, list]:
    """The generated splits, the patterns each training tool request drew (None: not from
    round 5), and the realised structures."""
    drawn, realised = [], []
    fill, realize = datagen.fill, intents.realize

    def recording_fill(intent, rng, L, split, patterns=None):
        if split == "train":
            drawn.append((intent, patterns))
        return fill(intent, rng, L, split, patterns=patterns)

    def recording_realize(pattern, rng, **k):
        realised.append(pattern)
        return realize(pattern, rng, **k)

    monkeypatch.setattr(datagen, "fill", recording_fill)
    monkeypatch.setattr(intents, "realize", recording_realize)
    out = _gen(tmp_path, round5=share, **kw)
    monkeypatch.setattr(datagen, "fill", fill)
    monkeypatch.setattr(intents, "realize", realize)
    return out, drawn, realised


def test_share_one_uses_only_round5_structures_for_training_requests(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("composed while round 5 takes every request")

    off = _gen(tmp_path / "off", mix=(0.5, 0.5, 0, 0, 0))
    monkeypatch.setattr(compose, "fill", boom)
    on, drawn, realised = _recorded(tmp_path / "on", monkeypatch, 1.0, mix=(0.5, 0.5, 0, 0, 0), compose=0.5)
    assert on["val"] == off["val"] and on["test"] == off["test"]
    assert on["train"] != off["train"]
    # single and multi only (mix): every training request drew round 5's structures
    assert len(drawn) > 300 and all(p is ROUND5[it] for it, p in drawn)
    mine = {_text(p) for pats in ROUND5.values() for p in pats}
    train_realised = realised[:len(drawn)]  # training is generated first
    assert set(train_realised) <= mine
    assert len(set(train_realised)) > 200  # many structures, not a few drawn over and over


def test_a_share_between_gives_about_that_share(tmp_path, monkeypatch):
    off = _gen(tmp_path / "off")
    on, drawn, _ = _recorded(tmp_path / "on", monkeypatch, 0.5)
    assert on["val"] == off["val"] and on["test"] == off["test"]
    tool_requests = [p for _, p in drawn]
    share = sum(p is not None for p in tool_requests) / len(tool_requests)
    assert 0.3 < share < 0.6, share  # missing-tool requests never draw it, so a bit under 0.5
