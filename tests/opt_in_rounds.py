"""Checks shared by the opt-in rounds of training-only structures (rounds 5 and 6: their
test files hold what differs, their thresholds, earlier rounds and hand-labelled cases).

Each takes a round's {tool: patterns} dict. No check reports a validation, test or
held-out-guide sentence in its failure message, since training must never say one."""
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

from test_training_round3 import assert_polarity  # noqa: E402
from test_training_splits import _fills, _held_out, _normalised, _text  # noqa: E402

SPLITS = ("train", "val", "test")
# the on/off tools and the values each way; the optional arguments a round must not invent
ON_OFF = {"set_lights": (ON, OFF), "lock_door": (LOCK, UNLOCK), "set_do_not_disturb": (DND_ON, DND_OFF)}
OPTIONAL = (("set_timer", "label", "{label}"), ("set_alarm", "label", "{label}"), ("get_weather", "location", "{city}"),
            ("get_weather", "day", "{day}"), ("get_news", "topic", "{topic}"), ("get_directions", "mode", "{mode}"),
            ("create_event", "location", "{place}"), ("create_reminder", "time", "{time}"))


def surfaces(pattern) -> set[str]:
    return {x.lower() for x in phrasing.expand(_text(pattern))}


def assert_many_new(rounds: dict, earlier: dict, per_tool: int, total: int) -> None:
    """At least `per_tool` distinct patterns for every tool (`total` in all), none of them a
    pattern of `earlier` ({tool: patterns})."""
    assert set(rounds) == set(TOOLS)
    assert sum(len(v) for v in rounds.values()) >= total
    for tool, pats in rounds.items():
        assert len(pats) >= per_tool, tool
        texts = [_text(p) for p in pats]
        assert len(set(texts)) == len(texts), tool
        old = {_text(p) for p in earlier[tool]}
        assert not set(texts) & old, (tool, sorted(set(texts) & old))


def assert_not_merged(rounds: dict) -> None:
    """No split's own structures (the guide's included) hold one of the round's."""
    for tool, pats in rounds.items():
        texts = {_text(p) for p in pats}
        for split in (*SPLITS, "heldout"):
            assert not texts & {_text(p) for p in intents.templates_for(tool, split)}, (tool, split)


def assert_not_rewordings(rounds: dict, seen: dict) -> None:
    """With fillers stripped, at most half the surfaces of each pattern are surfaces of
    `seen` ({tool: patterns}) already."""
    for tool, pats in rounds.items():
        old = set()
        for p in seen[tool]:
            old |= {_normalised(x) for x in surfaces(p)}
        for p in pats:
            mine = {_normalised(x) for x in surfaces(p)}
            assert len(mine & old) <= len(mine) // 2, (tool, _text(p))


def assert_never_held_out(rounds: dict) -> None:
    """No surface, raw, with fillers and punctuation stripped, or with its trailing adjunct
    fronted (the --front drill), equals one of validation, test or the held-out guide. A
    failure names only the round's pattern, never the held-out sentence."""
    raw, norm = set(), set()
    for tool in TOOLS:
        for p in _held_out(tool) + list(HELDOUT_PATTERNS[tool]):
            s = surfaces(p)
            raw |= s
            norm |= {_normalised(x) for x in s}
    for tool, pats in rounds.items():
        for p in pats:
            mine = surfaces(p)
            # plain booleans, so that pytest's report of a failure cannot show a held-out sentence
            clash = bool(mine & raw) or bool({_normalised(x) for x in mine} & norm)
            fronts = [phrasing.front_adjunct(x) for x in mine]
            clash = clash or any(f and _normalised(f) in norm for f in fronts)
            assert not clash, (tool, _text(p))


def assert_slots_and_constants_own(rounds: dict) -> None:
    """Every slot and labelled constant is one the tool's training patterns use."""
    for tool, pats in rounds.items():
        own = {s for p in intents.templates_for(tool, "train") for s in intents._slots(_text(p))}
        consts = [p[1] for p in intents.templates_for(tool, "train") if not isinstance(p, str)]
        for p in pats:
            assert set(intents._slots(_text(p))) <= own, (tool, p)
            assert isinstance(p, str) or p[1] in consts, (tool, p)


def assert_optional_only_when_said(rounds: dict, cases, monkeypatch) -> None:
    """For each (tool, argument, slot): the call has the argument exactly when the
    pattern says the slot."""
    lists = split_lists()["train"] | {"languages": ["French"]}
    for tool, arg, slot in cases:
        for p in rounds[tool]:
            for _, args in _fills(tool, p, lists, random.Random(1), monkeypatch, 3):
                assert (arg in args) == (slot in _text(p)), (tool, p, args)


def assert_labelled_polarity(rounds: dict, polarity: dict) -> None:
    """The hand-labelled sentences (rooms as "den", doors as "side door") carry their values."""
    rendered = {tool: [(p[0].replace("{room}", "den").replace("{door}", "side door"), p[1])
                       for p in pats if not isinstance(p, str)] for tool, pats in rounds.items()}
    assert_polarity(rendered, polarity)


def assert_both_ways(rounds: dict, ways: dict, at_least: int) -> None:
    """Every wording of each on/off tool is labelled, with `at_least` patterns each way."""
    for tool, wants in ways.items():
        assert all(not isinstance(p, str) for p in rounds[tool]), tool
        for want in wants:
            assert sum(p[1] == want for p in rounds[tool]) >= at_least, (tool, want)


# --- the datagen share ---

def gen(path: Path, **kw) -> dict[str, bytes]:
    """Every split's bytes, generated small at seed 3 with datagen's keywords `kw`."""
    datagen.generate(path, seed=3, n_train=300, n_val=120, **kw)
    return {s: (path / f"{s}.jsonl").read_bytes() for s in SPLITS}


class Poisoned(dict):
    """A round's patterns that fail the test when any is looked up."""

    def __init__(self, name: str):
        super().__init__()
        self.name = name

    def __getitem__(self, key):
        raise AssertionError(f"{self.name} drawn while off")


def recorded(tmp_path: Path, monkeypatch, **kw) -> tuple[dict, list, list]:
    """The generated splits, the patterns each training tool request drew (None: the usual
    ones), and the realised structures."""
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
    out = gen(tmp_path, **kw)
    monkeypatch.setattr(datagen, "fill", fill)
    monkeypatch.setattr(intents, "realize", realize)
    return out, drawn, realised


def assert_share_zero_changes_no_byte(tmp_path: Path, monkeypatch, n: int, earlier: dict | None = None) -> None:
    """The data as it was before round `n`: its draw (datagen._round<n>) replaced by a stub
    that draws nothing. The real one at share 0 (the default) must write the same bytes, with
    the drills on and with the `earlier` rounds' shares on (e.g. {"round5": 0.4}): a single
    stray draw would move every later one."""
    flag, draw = f"round{n}", f"_round{n}"
    drills = dict(noise=0.3, compose=0.3, swap=0.3, front=0.2, fold_val=0.1)
    kinds = [{}, drills] + ([{**earlier, **drills}] if earlier else [])
    real = getattr(datagen, draw)
    monkeypatch.setattr(datagen, draw, lambda intent, rng, L: None)
    before = [gen(tmp_path / f"before{i}", **kw) for i, kw in enumerate(kinds)]
    monkeypatch.setattr(datagen, draw, real)
    monkeypatch.setattr(datagen, f"ROUND{n}", Poisoned(f"round {n}"))
    assert gen(tmp_path / "default") == before[0]
    for i, kw in enumerate(kinds):
        assert gen(tmp_path / f"zero{i}", **{flag: 0.0}, **kw) == before[i]
    lists = datagen.prepared_lists(**{flag: 0.7})
    assert lists["train"][draw] == 0.7 and lists["val"][draw] == lists["test"][draw] == 0.0


def assert_share_one_takes_all(tmp_path: Path, monkeypatch, rounds: dict, flag: str) -> None:
    """At share 1 (keyword `flag`) every training single- and multi-call request draws the
    round's structures, many of them, and nothing is composed; validation and test stay."""
    def boom(*a, **k):
        raise AssertionError(f"composed while {flag} takes every request")

    off = gen(tmp_path / "off", mix=(0.5, 0.5, 0, 0, 0))
    monkeypatch.setattr(compose, "fill", boom)
    on, drawn, realised = recorded(tmp_path / "on", monkeypatch, **{flag: 1.0}, mix=(0.5, 0.5, 0, 0, 0), compose=0.5)
    assert on["val"] == off["val"] and on["test"] == off["test"]
    assert on["train"] != off["train"]
    # single and multi only (mix): every training request drew the round's structures
    assert len(drawn) > 300 and all(p is rounds[it] for it, p in drawn)
    mine = {_text(p) for pats in rounds.values() for p in pats}
    train_realised = realised[:len(drawn)]  # training is generated first
    assert set(train_realised) <= mine
    assert len(set(train_realised)) > 200  # many structures, not a few drawn over and over


def assert_share_half_gives_about_half(tmp_path: Path, monkeypatch, flag: str) -> None:
    """At share 0.5 about half the training tool requests draw the round; val and test stay."""
    off = gen(tmp_path / "off")
    on, drawn, _ = recorded(tmp_path / "on", monkeypatch, **{flag: 0.5})
    assert on["val"] == off["val"] and on["test"] == off["test"]
    tool_requests = [p for _, p in drawn]
    share = sum(p is not None for p in tool_requests) / len(tool_requests)
    assert 0.3 < share < 0.6, share  # missing-tool requests never draw it, so a bit under 0.5
