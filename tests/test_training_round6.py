"""Round-6 training-only structures (training/train_round6.py), drawn only at datagen's
``round6`` share, from the requests round 5 left: many per tool, new against rounds 1-5,
never a validation, test or held-out-guide surface (even with fillers stripped or an
adjunct fronted), rendered into valid calls whose copied values stand whole in the request
(checked with rounds 2-5 in test_training_round2.py), on/off right both ways; and the share
itself: 0 draws nothing, so every split is byte-identical (with round 5 on or off), 1 gives
every training single- and multi-call request a round-6 structure while validation and test
stay the same, and round 5 keeps its share when both are on."""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training import intents  # noqa: E402
from training.templates import DND_OFF, DND_ON, LOCK, OFF, ON, UNLOCK  # noqa: E402
from training.train_patterns import TRAIN_ONLY  # noqa: E402
from training.train_round5 import ROUND5  # noqa: E402
from training.train_round6 import ROUND6  # noqa: E402

from opt_in_rounds import (ON_OFF, OPTIONAL, assert_both_ways, assert_labelled_polarity,  # noqa: E402
                           assert_many_new, assert_never_held_out, assert_not_merged, assert_not_rewordings,
                           assert_optional_only_when_said, assert_share_half_gives_about_half,
                           assert_share_one_takes_all, assert_share_zero_changes_no_byte,
                           assert_slots_and_constants_own, recorded)


def test_many_new_distinct_structures_for_every_tool():
    assert set(ROUND6) == set(ROUND5)
    assert_many_new(ROUND6, {t: intents.TEMPLATES[t] + TRAIN_ONLY[t] + ROUND5[t] for t in ROUND6},
                    per_tool=36, total=756)


def test_not_merged_into_any_split():
    """Opt-in: no split's own structures hold a round-6 one, so the data that rounds 1-5
    and every existing command produce stays as it was."""
    assert_not_merged(ROUND6)


def test_structures_are_new_not_rewordings_of_training_ones():
    """With fillers stripped, most surfaces of each round-6 structure are neither training
    surfaces nor round-5 ones already (a pattern that only re-said old sentences would add
    nothing)."""
    assert_not_rewordings(ROUND6, {t: intents.templates_for(t, "train") + ROUND5[t] for t in ROUND6})


def test_never_equals_a_held_out_or_guide_surface():
    assert_never_held_out(ROUND6)


def test_slots_and_constants_are_the_tools_own():
    assert_slots_and_constants_own(ROUND6)


def test_optional_arguments_only_when_said(monkeypatch):
    assert_optional_only_when_said(ROUND6, OPTIONAL + (("create_reminder", "day", "{day}"),
                                                       ("set_lights", "brightness", "{pct}")), monkeypatch)


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
    assert_labelled_polarity(ROUND6, _POLARITY)


def test_on_off_tools_are_covered_both_ways():
    assert_both_ways(ROUND6, ON_OFF, at_least=15)


# --- the datagen share ---

def test_share_zero_draws_nothing_and_changes_no_byte(tmp_path, monkeypatch):
    """Round 6's draw at share 0 draws nothing, with round 5 off or on: every split is byte-identical."""
    assert_share_zero_changes_no_byte(tmp_path, monkeypatch, 6, {"round5": 0.4})


def test_share_one_uses_only_round6_structures_for_training_requests(tmp_path, monkeypatch):
    assert_share_one_takes_all(tmp_path, monkeypatch, ROUND6, "round6")


def test_a_share_between_gives_about_that_share(tmp_path, monkeypatch):
    assert_share_half_gives_about_half(tmp_path, monkeypatch, "round6")


def test_with_round5_on_round6_takes_only_what_round5_leaves(tmp_path, monkeypatch):
    """Round 5 draws first and keeps its share; round 6 at 1 takes every request left."""
    _, drawn, _ = recorded(tmp_path, monkeypatch, round5=0.5, round6=1.0, mix=(0.5, 0.5, 0, 0, 0))
    r5 = sum(p is ROUND5[it] for it, p in drawn)
    r6 = sum(p is ROUND6[it] for it, p in drawn)
    assert r5 + r6 == len(drawn) > 300
    assert 0.4 < r5 / len(drawn) < 0.6, r5 / len(drawn)
