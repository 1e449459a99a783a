"""Round-6 training-only structures (training/train_round6.py), drawn only at datagen's
``round6`` share, from the requests round 5 left: many per tool, new against rounds 1-5,
never a validation, test or held-out-guide surface (even with fillers stripped or an
adjunct fronted), rendered into valid calls whose copied values stand whole in the request
(checked with rounds 2-5 in test_training_round2.py), on/off right both ways; and the share
itself: 0 draws nothing, so every split is byte-identical (with round 5 on or off), 1 gives
every training single- and multi-call request a round-6 structure while validation and test
stay the same, and round 5 keeps its share when both are on."""
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
from training.train_round6 import ROUND6  # noqa: E402

from test_training_round3 import assert_polarity  # noqa: E402
from test_training_splits import _fills, _held_out, _normalised, _text  # noqa: E402

SPLITS = ("train", "val", "test")


def _surfaces(pattern) -> set[str]:
    return {x.lower() for x in phrasing.expand(_text(pattern))}


def test_many_new_distinct_structures_for_every_tool():
    assert set(ROUND6) == set(ROUND5) == set(TOOLS)
    assert sum(len(v) for v in ROUND6.values()) >= 756
    for tool, pats in ROUND6.items():
        assert len(pats) >= 36, tool
        texts = [_text(p) for p in pats]
        assert len(set(texts)) == len(texts), tool
        earlier = {_text(p) for p in intents.TEMPLATES[tool] + TRAIN_ONLY[tool] + ROUND5[tool]}
        assert not set(texts) & earlier, (tool, sorted(set(texts) & earlier))


def test_not_merged_into_any_split():
    """Opt-in: no split's own structures hold a round-6 one, so the data that rounds 1-5
    and every existing command produce stays as it was."""
    for tool, pats in ROUND6.items():
        texts = {_text(p) for p in pats}
        for split in (*SPLITS, "heldout"):
            assert not texts & {_text(p) for p in intents.templates_for(tool, split)}, (tool, split)


def test_structures_are_new_not_rewordings_of_training_ones():
    """With fillers stripped, most surfaces of each round-6 structure are neither training
    surfaces nor round-5 ones already (a pattern that only re-said old sentences would add
    nothing)."""
    for tool, pats in ROUND6.items():
        seen = set()
        for p in intents.templates_for(tool, "train") + ROUND5[tool]:
            seen |= {_normalised(x) for x in _surfaces(p)}
        for p in pats:
            mine = {_normalised(x) for x in _surfaces(p)}
            assert len(mine & seen) <= len(mine) // 2, (tool, _text(p))


def test_never_equals_a_held_out_or_guide_surface():
    """No surface, raw, with fillers and punctuation stripped, or with its trailing adjunct
    fronted (the --front drill), equals one of validation, test or the held-out guide
    (heldout_patterns.py, which training must never say). A failure names only the
    round-6 pattern, never the held-out sentence."""
    raw, norm = set(), set()
    for tool in TOOLS:
        for p in _held_out(tool) + list(HELDOUT_PATTERNS[tool]):
            s = _surfaces(p)
            raw |= s
            norm |= {_normalised(x) for x in s}
    for tool, pats in ROUND6.items():
        for p in pats:
            mine = _surfaces(p)
            # plain booleans, so that pytest's report of a failure cannot show a held-out sentence
            clash = bool(mine & raw) or bool({_normalised(x) for x in mine} & norm)
            fronts = [phrasing.front_adjunct(x) for x in mine]
            clash = clash or any(f and _normalised(f) in norm for f in fronts)
            assert not clash, (tool, _text(p))


def test_slots_and_constants_are_the_tools_own():
    for tool, pats in ROUND6.items():
        own = {s for p in intents.templates_for(tool, "train") for s in intents._slots(_text(p))}
        consts = [p[1] for p in intents.templates_for(tool, "train") if not isinstance(p, str)]
        for p in pats:
            assert set(intents._slots(_text(p))) <= own, (tool, p)
            assert isinstance(p, str) or p[1] in consts, (tool, p)


def test_optional_arguments_only_when_said(monkeypatch):
    lists = split_lists()["train"] | {"languages": ["French"]}
    cases = (("set_timer", "label", "{label}"), ("set_alarm", "label", "{label}"), ("get_weather", "location", "{city}"),
             ("get_weather", "day", "{day}"), ("get_news", "topic", "{topic}"), ("get_directions", "mode", "{mode}"),
             ("create_event", "location", "{place}"), ("create_reminder", "time", "{time}"),
             ("create_reminder", "day", "{day}"), ("set_lights", "brightness", "{pct}"))
    for tool, arg, slot in cases:
        for p in ROUND6[tool]:
            for _, args in _fills(tool, p, lists, random.Random(1), monkeypatch, 3):
                assert (arg in args) == (slot in _text(p)), (tool, p, args)


# Hand-labelled (written apart from the patterns): the value each round-6 wording must
# carry. Corrections flip the first word ("lights off in the den - no wait, on" keeps them
# on), non-native verbs read as the user means them ("open the light" is on, "close with
# key" locks) and "notifications off" enables do-not-disturb.
_POLARITY = {
    "set_do_not_disturb": {
        "turn off dnd - no wait, on": DND_ON, "turn on dnd - sorry, off": DND_OFF,
        "silent hours start now, notifications off": DND_ON, "quiet time is over, notifications back on": DND_OFF,
        "mute every notification too": DND_ON, "unmute my notifications again": DND_OFF,
        "don't silence calls anymore": DND_OFF, "don't let notifications bother me tonight": DND_ON,
        "please you put my phone in not disturb": DND_ON, "please you take off the not disturb": DND_OFF,
        "pls no notifs for a while": DND_ON, "pls let calls thru again": DND_OFF,
        "buzzing is welcome now, I'm free": DND_OFF, "no buzzing for a while, I'm working": DND_ON,
    },
    "set_lights": {
        "lights off in the den - no wait, on": ON, "light on in the den - sorry, off": OFF,
        "please you open the light in the den": ON, "please you close the light in the den": OFF,
        "don't leave me in the dark in the den": ON, "keep the den lights out tonight": OFF,
        "keep the den lights on tonight": ON, "the den lights are still on and nobody's in there": OFF,
        "stop wasting light on the den": OFF, "Kindly illuminate the den, if you would.": ON,
        "Kindly extinguish the lamps in the den.": OFF, "the den is pitch black, fix that": ON,
        "total darkness in the den, please": OFF,
    },
    "lock_door": {
        "unlock the side door - no wait, lock it": LOCK, "bolt the side door - sorry, open it": UNLOCK,
        "please you close with key the side door": LOCK, "please you open with key the side door": UNLOCK,
        "the side door seems open, so could you bolt it": LOCK, "the side door is still locked, can you open it": UNLOCK,
        "a locked side door would be reassuring": LOCK, "an unlocked side door is handy right now": UNLOCK,
        "pls unlock the side door im outside": UNLOCK, "Kindly secure the side door for the evening.": LOCK,
        "no one should come in through the side door tonight, lock it": LOCK,
        "my friend needs to get in through the side door, open it": UNLOCK,
    },
    "set_volume": {
        "volume: as high as it goes": {"level": 100}, "sound: off": {"level": 0},
        "halfway is fine for the volume": {"level": 50}, "please you put the sound the most loud": {"level": 100},
        "I'd like the audio muted": {"level": 0},
    },
}


def test_polarity_cases():
    rendered = {tool: [(p[0].replace("{room}", "den").replace("{door}", "side door"), p[1])
                       for p in pats if not isinstance(p, str)] for tool, pats in ROUND6.items()}
    assert_polarity(rendered, _POLARITY)


def test_on_off_tools_are_covered_both_ways():
    for tool, ways in (("set_lights", (ON, OFF)), ("lock_door", (LOCK, UNLOCK)),
                       ("set_do_not_disturb", (DND_ON, DND_OFF))):
        assert all(not isinstance(p, str) for p in ROUND6[tool]), tool  # every wording is labelled
        for want in ways:
            assert sum(p[1] == want for p in ROUND6[tool]) >= 15, (tool, want)


# --- the datagen share ---

def _gen(path: Path, **kw) -> dict[str, bytes]:
    datagen.generate(path, seed=3, n_train=300, n_val=120, **kw)
    return {s: (path / f"{s}.jsonl").read_bytes() for s in SPLITS}


class _Poisoned(dict):
    def __getitem__(self, key):
        raise AssertionError("round 6 drawn while off")


def test_share_zero_draws_nothing_and_changes_no_byte(tmp_path, monkeypatch):
    """The data as it was before round 6: its draw replaced by a stub that draws nothing.
    The real one at share 0 (the default) must write the same bytes, with round 5 off or on:
    a single stray draw would move every later one."""
    drills = dict(noise=0.3, compose=0.3, swap=0.3, front=0.2, fold_val=0.1)
    real = datagen._round6
    monkeypatch.setattr(datagen, "_round6", lambda intent, rng, L: None)
    before = (_gen(tmp_path / "before"), _gen(tmp_path / "before_drills", **drills),
              _gen(tmp_path / "before_r5", round5=0.4, **drills))
    monkeypatch.setattr(datagen, "_round6", real)
    monkeypatch.setattr(datagen, "ROUND6", _Poisoned())
    assert _gen(tmp_path / "default") == before[0]
    assert _gen(tmp_path / "zero", round6=0.0) == before[0]
    assert _gen(tmp_path / "zero_drills", round6=0.0, **drills) == before[1]
    assert _gen(tmp_path / "zero_r5", round5=0.4, round6=0.0, **drills) == before[2]
    lists = datagen.prepared_lists(round6=0.7)
    assert lists["train"]["_round6"] == 0.7 and lists["val"]["_round6"] == lists["test"]["_round6"] == 0.0


def _recorded(tmp_path: Path, monkeypatch, **kw) -> tuple[dict, list, list]:
    """The generated splits, the patterns each training tool request drew (None: neither
    round 5 nor round 6), and the realised structures."""
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
    out = _gen(tmp_path, **kw)
    monkeypatch.setattr(datagen, "fill", fill)
    monkeypatch.setattr(intents, "realize", realize)
    return out, drawn, realised


def test_share_one_uses_only_round6_structures_for_training_requests(tmp_path, monkeypatch):
    def boom(*a, **k):
        raise AssertionError("composed while round 6 takes every request")

    off = _gen(tmp_path / "off", mix=(0.5, 0.5, 0, 0, 0))
    monkeypatch.setattr(compose, "fill", boom)
    on, drawn, realised = _recorded(tmp_path / "on", monkeypatch, round6=1.0, mix=(0.5, 0.5, 0, 0, 0), compose=0.5)
    assert on["val"] == off["val"] and on["test"] == off["test"]
    assert on["train"] != off["train"]
    # single and multi only (mix): every training request drew round 6's structures
    assert len(drawn) > 300 and all(p is ROUND6[it] for it, p in drawn)
    mine = {_text(p) for pats in ROUND6.values() for p in pats}
    train_realised = realised[:len(drawn)]  # training is generated first
    assert set(train_realised) <= mine
    assert len(set(train_realised)) > 200  # many structures, not a few drawn over and over


def test_a_share_between_gives_about_that_share(tmp_path, monkeypatch):
    off = _gen(tmp_path / "off")
    on, drawn, _ = _recorded(tmp_path / "on", monkeypatch, round6=0.5)
    assert on["val"] == off["val"] and on["test"] == off["test"]
    tool_requests = [p for _, p in drawn]
    share = sum(p is not None for p in tool_requests) / len(tool_requests)
    assert 0.3 < share < 0.6, share  # missing-tool requests never draw it, so a bit under 0.5


def test_with_round5_on_round6_takes_only_what_round5_leaves(tmp_path, monkeypatch):
    """Round 5 draws first and keeps its share; round 6 at 1 takes every request left."""
    _, drawn, _ = _recorded(tmp_path, monkeypatch, round5=0.5, round6=1.0, mix=(0.5, 0.5, 0, 0, 0))
    r5 = sum(p is ROUND5[it] for it, p in drawn)
    r6 = sum(p is ROUND6[it] for it, p in drawn)
    assert r5 + r6 == len(drawn) > 300
    assert 0.4 < r5 / len(drawn) < 0.6, r5 / len(drawn)
