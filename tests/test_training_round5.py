"""Round-5 training-only structures (training/train_round5.py), drawn only at datagen's
``round5`` share: many per tool, new, never a validation, test or held-out-guide surface
(even with fillers stripped or an adjunct fronted), rendered into valid calls whose copied
values stand whole in the request (checked with rounds 2-4 in test_training_round2.py), on/off
right both ways; and the share itself: 0 draws nothing, so every split is byte-identical, and
1 gives every training single- and multi-call request a round-5 structure while validation
and test stay the same."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training import intents  # noqa: E402
from training.templates import DND_OFF, DND_ON, LOCK, OFF, ON, UNLOCK  # noqa: E402
from training.train_patterns import TRAIN_ONLY  # noqa: E402
from training.train_round5 import ROUND5  # noqa: E402

from opt_in_rounds import (ON_OFF, OPTIONAL, assert_both_ways, assert_labelled_polarity,  # noqa: E402
                           assert_many_new, assert_never_held_out, assert_not_merged, assert_not_rewordings,
                           assert_optional_only_when_said, assert_share_half_gives_about_half,
                           assert_share_one_takes_all, assert_share_zero_changes_no_byte,
                           assert_slots_and_constants_own)


def test_many_new_distinct_structures_for_every_tool():
    assert set(ROUND5) == set(TRAIN_ONLY)
    assert_many_new(ROUND5, {t: intents.TEMPLATES[t] + TRAIN_ONLY[t] for t in ROUND5}, per_tool=30, total=630)


def test_not_merged_into_any_split():
    """Opt-in: no split's own structures hold a round-5 one, so the data that rounds 1-4
    and every existing command produce stays as it was."""
    assert_not_merged(ROUND5)


def test_structures_are_new_not_rewordings_of_training_ones():
    """With fillers stripped, most surfaces of each round-5 structure are not training
    surfaces already (a pattern that only re-said old sentences would add nothing)."""
    assert_not_rewordings(ROUND5, {t: intents.templates_for(t, "train") for t in ROUND5})


def test_never_equals_a_held_out_or_guide_surface():
    assert_never_held_out(ROUND5)


def test_slots_and_constants_are_the_tools_own():
    assert_slots_and_constants_own(ROUND5)


def test_optional_arguments_only_when_said(monkeypatch):
    assert_optional_only_when_said(ROUND5, OPTIONAL, monkeypatch)


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
    assert_labelled_polarity(ROUND5, _POLARITY)


def test_on_off_tools_are_covered_both_ways():
    assert_both_ways(ROUND5, ON_OFF, at_least=12)


# --- the datagen share ---

def test_share_zero_draws_nothing_and_changes_no_byte(tmp_path, monkeypatch):
    """Round 5's draw at share 0 (the default) draws nothing: every split is byte-identical."""
    assert_share_zero_changes_no_byte(tmp_path, monkeypatch, 5)


def test_share_one_uses_only_round5_structures_for_training_requests(tmp_path, monkeypatch):
    assert_share_one_takes_all(tmp_path, monkeypatch, ROUND5, "round5")


def test_a_share_between_gives_about_that_share(tmp_path, monkeypatch):
    assert_share_half_gives_about_half(tmp_path, monkeypatch, "round5")
