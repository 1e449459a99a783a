"""Split hygiene of the default model's data: out-of-scope kinds and train-only structures.

Validation and test must measure generalisation: their sentence structures and
out-of-scope kinds are never trained on, and nothing added to training changes them.
"""
from __future__ import annotations

import json
import random
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # training/ is a folder of scripts, not an installed package

from training import datagen, intents, out_of_scope, phrasing, replies  # noqa: E402
from training.lexicon import split_lists  # noqa: E402
from training.tools import TOOLS  # noqa: E402
from training.train_patterns import TRAIN_ONLY  # noqa: E402

SPLITS = ("train", "val", "test")


def _text(pattern) -> str:
    return pattern if isinstance(pattern, str) else pattern[0]


def test_every_split_has_its_own_twenty_oos_kinds():
    oos = {s: split_lists()[s]["out_of_scope"] for s in SPLITS}
    for s in SPLITS:
        assert len(oos[s]) >= 20, (s, len(oos[s]))
        assert len(set(oos[s])) == len(oos[s]), s
    assert len(oos["train"]) >= 150
    for a, b in (("train", "val"), ("train", "test"), ("val", "test")):
        assert not set(oos[a]) & set(oos[b]), (a, b, set(oos[a]) & set(oos[b]))


# Words that name what a tool does; an out-of-scope kind holding one could be served, or
# would teach the model to refuse a real request.
_TOOL_WORDS = re.compile(r"\b(alarm|timer|remind\w*|weather|forecast|thermostat|temperature|translat\w*|direction"
                         r"|navigat\w*|shopping list|grocery list|calendar|news|headlines?|volume|disturb|lights?"
                         r"|lamps?|lock|unlock|notes?|search|google|look up|convert|text|message|play|music|song)\b")


def test_oos_kinds_stay_clear_of_the_tools():
    for s in SPLITS:
        for kind in split_lists()[s]["out_of_scope"]:
            assert not _TOOL_WORDS.search(kind), kind
            assert set(intents._slots(kind)) <= {"city", "name"}, kind


def test_held_out_oos_kinds_keep_the_published_draws():
    """Validation and test kinds are imperative, so `style` makes the same draws for them
    as for the first 41 kinds and no other conversation of those splits moves."""
    for _, _, *held in out_of_scope.THEMES:
        for kind in held:
            assert kind.split(" ", 1)[0].lower() not in datagen.QUESTION_WORDS, kind
            assert kind[-1] not in "!?.", kind


def test_growing_the_oos_lists_moves_only_oos_exchanges(tmp_path, monkeypatch):
    def masked(path: Path) -> list:
        out = []
        for line in open(path):
            c = json.loads(line)
            msgs = c["messages"]
            # an oos exchange is a user turn answered by one of the refusals (old or new)
            keep = [m for i, m in enumerate(msgs) if not (m["role"] == "assistant" and m["content"] in refusals)
                    and not (m["role"] == "user" and i + 1 < len(msgs) and msgs[i + 1]["content"] in refusals)]
            out.append((c["category"], keep))
        return out

    refusals = set(replies.REFUSAL_OOS) | {"No tool of mine does that."}
    datagen.generate(tmp_path / "a", seed=4, n_train=50, n_val=300)
    monkeypatch.setattr(datagen, "REFUSAL_OOS", replies.REFUSAL_OOS + ["No tool of mine does that."])
    monkeypatch.setattr(out_of_scope, "THEMES", out_of_scope.THEMES + [
        ("extra", "knit me a scarf", "paint the fence blue", "repair my bicycle chain")])
    datagen.generate(tmp_path / "b", seed=4, n_train=50, n_val=300)
    for split in ("val", "test"):
        a, b = masked(tmp_path / "a" / f"{split}.jsonl"), masked(tmp_path / "b" / f"{split}.jsonl")
        assert a == b, split
        before = (tmp_path / "a" / f"{split}.jsonl").read_text()
        assert before != (tmp_path / "b" / f"{split}.jsonl").read_text()  # the oos turns did change


def test_train_only_patterns_are_many_new_and_only_in_training():
    for tool in TOOLS:
        extra = TRAIN_ONLY[tool]
        assert len(extra) >= 12, tool
        train = intents.templates_for(tool, "train")
        assert all(p in train for p in extra)
        for s in ("val", "test"):
            held = intents.templates_for(tool, s)
            assert not any(p in held for p in extra), (tool, s)
            assert held == [p for i, p in enumerate(intents.TEMPLATES[tool]) if intents.SPLIT_OF_INDEX[i % 6] == s]


def test_train_only_sentences_never_render_in_validation_or_test():
    """No surface template of a train-only pattern equals one of any held-out pattern,
    of any tool; nor does it repeat one of the earlier training patterns (it is new)."""
    held, dealt_train = set(), set()
    for tool in TOOLS:
        for i, p in enumerate(intents.TEMPLATES[tool]):
            surfaces = {x.lower() for x in phrasing.expand(_text(p))}
            (dealt_train if intents.SPLIT_OF_INDEX[i % 6] == "train" else held).update(surfaces)
    for tool, pats in TRAIN_ONLY.items():
        for p in pats:
            surfaces = {x.lower() for x in phrasing.expand(_text(p))}
            assert not surfaces & held, (tool, p, sorted(surfaces & held)[:3])
            assert not surfaces & dealt_train, (tool, p, sorted(surfaces & dealt_train)[:3])


def test_expand_lists_exactly_what_realize_draws():
    rng = random.Random(2)
    pattern = "(set|put) [me ]a <alarm> (at|for) {time}"
    surfaces = phrasing.expand(pattern)
    assert len(surfaces) == phrasing.count(pattern) == 32
    assert {phrasing.realize(pattern, rng) for _ in range(2000)} == surfaces
    assert "put me an alarm clock at {time}" in surfaces  # articles agree, as in realize


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_train_only_patterns_fill_valid_calls(tool, monkeypatch):
    params = TOOLS[tool]["function"]["parameters"]
    lists = split_lists()["train"] | {"languages": ["French", "German"]}
    rng = random.Random(5)
    for p in TRAIN_ONLY[tool]:
        monkeypatch.setattr(intents, "templates_for", lambda intent, split, p=p: [p])
        for _ in range(8):
            text, args = intents.fill(tool, rng, lists, "train")
            assert "{" not in text and "<" not in text and "(" not in text, (p, text)
            assert set(params["required"]) <= set(args) <= set(params["properties"]), (p, text, args)
            if tool == "set_timer":
                assert {"hours", "minutes", "seconds"} & set(args), (p, text, args)
            if not isinstance(p, str):  # wording that fixes an argument keeps it
                assert all(args[k] == v for k, v in p[1].items()), (p, args)


def _generate_recording(out: Path, monkeypatch) -> dict[str, set[str]]:
    """Generate data and record which request patterns each split realised."""
    used: dict[str, set[str]] = defaultdict(set)
    current = {}
    fill, realize = intents.fill, intents.realize

    def recording_fill(intent, rng, L, split):
        current["split"] = split
        return fill(intent, rng, L, split)

    def recording_realize(pattern, rng, **kw):
        used[current["split"]].add(pattern)
        return realize(pattern, rng, **kw)

    monkeypatch.setattr(datagen, "fill", recording_fill)
    monkeypatch.setattr(intents, "realize", recording_realize)
    datagen.generate(out, seed=0, n_train=300, n_val=300, noise=0.5, front=0.3, context=0.3, phrase=0.5)
    return used


def test_validation_and_test_use_only_held_out_material(tmp_path, monkeypatch):
    used = _generate_recording(tmp_path / "a", monkeypatch)
    train_only = {_text(p) for pats in TRAIN_ONLY.values() for p in pats}
    assert used["train"] & train_only  # training does draw the new structures
    for split in ("val", "test"):
        allowed = {_text(p) for tool in TOOLS for p in intents.templates_for(tool, split)}
        assert used[split] and used[split] <= allowed, sorted(used[split] - allowed)[:3]
    # and nothing that is training material changes them: empty the train-only patterns and
    # replace the themes' training oos kinds, and validation and test stay byte for byte the same
    monkeypatch.setattr(intents, "TRAIN_ONLY", {})
    themes = [(t, "juggle three oranges", v, s) for t, _, v, s in out_of_scope.THEMES]
    monkeypatch.setattr(out_of_scope, "THEMES", themes)
    datagen.generate(tmp_path / "b", seed=0, n_train=300, n_val=300, noise=0.5, front=0.3, context=0.3, phrase=0.5)
    for split in ("val", "test"):
        assert (tmp_path / "a" / f"{split}.jsonl").read_text() == (tmp_path / "b" / f"{split}.jsonl").read_text()
    assert (tmp_path / "a" / "train.jsonl").read_text() != (tmp_path / "b" / "train.jsonl").read_text()
