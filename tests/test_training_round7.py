"""Round-7 training-only structures (training/train_round7.py), drawn only at datagen's
``round7`` share, from the requests rounds 5 and 6 left: many per tool, new against rounds
1-6, never a validation, test or held-out-guide surface (even with fillers stripped or an
adjunct fronted), rendered into valid calls whose copied values stand whole in the request
(checked with rounds 2-6 in test_training_round2.py), on/off right both ways; and the share
itself: 0 draws nothing, so every split is byte-identical (with rounds 5 and 6 on or off), 1
gives every training single- and multi-call request a round-7 structure while validation and
test stay the same, and rounds 5 and 6 keep their shares when all three are on."""
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
from training.train_round7 import ROUND7  # noqa: E402

from opt_in_rounds import (ON_OFF, OPTIONAL, assert_both_ways, assert_labelled_polarity,  # noqa: E402
                           assert_many_new, assert_never_held_out, assert_not_merged, assert_not_rewordings,
                           assert_optional_only_when_said, assert_share_half_gives_about_half,
                           assert_share_one_takes_all, assert_share_zero_changes_no_byte,
                           assert_slots_and_constants_own, recorded)


def _earlier(tool: str) -> list:
    return intents.TEMPLATES[tool] + TRAIN_ONLY[tool] + ROUND5[tool] + ROUND6[tool]


def test_many_new_distinct_structures_for_every_tool():
    assert set(ROUND7) == set(ROUND6)
    assert_many_new(ROUND7, {t: _earlier(t) for t in ROUND7}, per_tool=24, total=520)


def test_not_merged_into_any_split():
    """Opt-in: no split's own structures hold a round-7 one, so the data that rounds 1-6
    and every existing command produce stays as it was."""
    assert_not_merged(ROUND7)


def test_structures_are_new_not_rewordings_of_training_ones():
    """With fillers stripped, most surfaces of each round-7 structure are neither training
    surfaces nor round-5 or round-6 ones already."""
    assert_not_rewordings(ROUND7, {t: intents.templates_for(t, "train") + ROUND5[t] + ROUND6[t] for t in ROUND7})


def test_never_equals_a_held_out_or_guide_surface():
    assert_never_held_out(ROUND7)


def test_slots_and_constants_are_the_tools_own():
    assert_slots_and_constants_own(ROUND7)


def test_optional_arguments_only_when_said(monkeypatch):
    assert_optional_only_when_said(ROUND7, OPTIONAL + (("create_reminder", "day", "{day}"),
                                                       ("set_lights", "brightness", "{pct}")), monkeypatch)


# Hand-labelled from the rendered sentences, without the patterns' constants in view: the value
# each round-7 wording must carry. Idioms count ("kill it" ends do-not-disturb, "black out" is
# off, "unlatch" unlocks), as do complaints about the current state ("why is the den light
# still on? switch it off") and negated keeps ("do not keep the phone on silent").
_POLARITY = {
    "set_do_not_disturb": {
        "I don't want to be disturbed for now": DND_ON, "hold all calls for now - do not disturb please": DND_ON,
        "see that no calls come through for a while": DND_ON, "why does my phone keep ringing? turn on dnd": DND_ON,
        "hush the phone for now": DND_ON, "do not let anyone call me for a while": DND_ON,
        "this do-not-disturb thing is annoying - kill it": DND_OFF, "make sure calls can get to me now": DND_OFF,
        "knock it off with the do not disturb already": DND_OFF, "why is silent mode still on? switch it off": DND_OFF,
        "do not keep the phone on silent any longer": DND_OFF, "Kindly make me reachable by phone again.": DND_OFF,
        "I do want to be bothered now, switch do-not-disturb off": DND_OFF,
    },
    "set_lights": {
        "make the den brighter": ON, "why is it so dark in the den? lights on": ON, "don't leave the den dark for me": ON,
        "I keep walking into things in the den, put the light on": ON, "please you make light in the den": ON,
        "light out in the den for the night": OFF, "why is the den light still on? switch it off": OFF,
        "black the den out completely": OFF, "do not keep the light on in the den any longer": OFF,
        "put the den in darkness for us": OFF, "please you put off the light of the den": OFF,
    },
    "lock_door": {
        "latch the side door for the night": LOCK, "why is the side door unlocked? bolt it": LOCK,
        "do not leave the side door unlocked tonight": LOCK, "my neighbour told me the side door was open, lock it": LOCK,
        "unlatch the side door for me": UNLOCK, "draw back the bolt on the side door for us": UNLOCK,
        "why is the side door still locked? open it": UNLOCK, "don't keep the side door locked anymore": UNLOCK,
        "someone said she's at the side door, let them in": UNLOCK, "undo the lock on the side door for me": UNLOCK,
    },
}


def test_polarity_cases():
    assert_labelled_polarity(ROUND7, _POLARITY)


def test_on_off_tools_are_covered_both_ways():
    assert_both_ways(ROUND7, ON_OFF, at_least=10)


# --- the datagen share ---

def test_share_zero_draws_nothing_and_changes_no_byte(tmp_path, monkeypatch):
    """Round 7's draw at share 0 draws nothing, with rounds 5 and 6 off or on: every split is byte-identical."""
    assert_share_zero_changes_no_byte(tmp_path, monkeypatch, 7, {"round5": 0.4, "round6": 0.3})


def test_share_one_uses_only_round7_structures_for_training_requests(tmp_path, monkeypatch):
    assert_share_one_takes_all(tmp_path, monkeypatch, ROUND7, "round7")


def test_a_share_between_gives_about_that_share(tmp_path, monkeypatch):
    assert_share_half_gives_about_half(tmp_path, monkeypatch, "round7")


def test_with_rounds_5_and_6_on_round7_takes_only_what_they_leave(tmp_path, monkeypatch):
    """Rounds 5 and 6 draw first and keep their shares; round 7 at 1 takes every request left."""
    _, drawn, _ = recorded(tmp_path, monkeypatch, round5=0.5, round6=0.4, round7=1.0, mix=(0.5, 0.5, 0, 0, 0))
    r5 = sum(p is ROUND5[it] for it, p in drawn)
    r6 = sum(p is ROUND6[it] for it, p in drawn)
    r7 = sum(p is ROUND7[it] for it, p in drawn)
    assert r5 + r6 + r7 == len(drawn) > 300
    assert 0.4 < r5 / len(drawn) < 0.6, r5 / len(drawn)
    assert 0.12 < r6 / len(drawn) < 0.28, r6 / len(drawn)  # 0.4 of the half round 5 left
