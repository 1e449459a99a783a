"""Request templates per tool, and how a filled template becomes a tool call.

A template names slots ({time}, {who}...); the call's arguments are exactly the
slots the template uses (plus constant arguments the wording fixes, like
state="off"). Templates are dealt to train/test by position, so the test split only
ever sees phrasings the model was not trained on; validation has its own (val_fresh.py).
"""
from __future__ import annotations

import random
import string

from . import surfaces as S
from .doc_values import with_doc_values
from .heldout_patterns import HELDOUT_PATTERNS
from .phrasing import front_adjunct, realize
from .templates import PATTERNS
from .train_entities import stress_values
from .train_patterns import TRAIN_ONLY
from .val_fresh import VAL_PATTERNS
from .verb_swap import swap_verb

T = str | tuple[str, dict]
TEMPLATES: dict[str, list[T]] = PATTERNS

# Offsets 0-4 of every 6 train, offset 5 is test. Sessions 1-7 chose models on offset 4,
# and data rounds 2-3 were written from its misses, so it stopped measuring generalisation:
# from session 8 it trains too, and validation has material of its own (val_fresh.py).
SPLIT_OF_INDEX = {0: "train", 1: "train", 2: "train", 3: "train", 4: "train", 5: "test"}
RETIRED_VAL = 4  # the offset that was validation until session 7


def dealt(options: list, split: str, val: list | None = None) -> list:
    """What a split draws from: training and test take their offsets of ``options``
    (SPLIT_OF_INDEX); validation takes only ``val``, its fresh list from val_fresh.py.
    Split "heldout" (heldout.py) draws exactly what validation draws here: only its
    request patterns are its own (templates_for)."""
    if split in ("val", "heldout"):
        if val is None:  # no silent fallback onto options that now train
            raise ValueError("validation draws from a fresh list (val_fresh.py), not from dealt options")
        return list(val)
    return [o for i, o in enumerate(options) if SPLIT_OF_INDEX[i % 6] == split]


def templates_for(intent: str, split: str) -> list[T]:
    """Templates of one split (see dealt); training also gets the tool's train-only
    patterns (train_patterns.py); split "heldout" gets heldout_patterns.py's, never trained."""
    if split == "heldout":
        return list(HELDOUT_PATTERNS[intent])
    own = dealt(TEMPLATES[intent], split, VAL_PATTERNS[intent])
    return own + TRAIN_ONLY.get(intent, []) if split == "train" else own


def _slots(text: str) -> list[str]:
    return [f for _, f, _, _ in string.Formatter().parse(text) if f]


def _person(rng: random.Random, L: dict) -> tuple[str, str]:
    """A contact as said, and as passed: relations drop 'my'/'the' ("my boss" -> "boss")."""
    if rng.random() < 0.3:
        rel = rng.choice(L["relations"])
        return rel, rel.split(" ", 1)[1] if rel.startswith(("my ", "the ")) else rel
    name = rng.choice(L["first_names"])
    if rng.random() < 0.15:
        name += " " + rng.choice(L["surnames"])
    return name, name


def _title(words: str) -> str:
    return " ".join(w.capitalize() for w in words.split())


def _artist(rng: random.Random, L: dict) -> str:
    if rng.random() < 0.5:
        return f"{rng.choice(L['first_names'])} {rng.choice(L['surnames'])}"
    return f"The {_title(rng.choice(L['adjectives']))} {_title(rng.choice(L['band_nouns']))}"


def _items(rng: random.Random, L: dict) -> tuple[str, list[str]]:
    items = rng.sample(L["items"], rng.choice([1, 1, 2, 2, 3, 4]))
    if len(items) == 1:
        return items[0], items
    return ", ".join(items[:-1]) + rng.choice([" and ", ", and ", " and "]) + items[-1], items


def _dest(rng: random.Random, L: dict) -> str:
    r = rng.random()
    if r < 0.35:
        return rng.choice(L["cities"])
    if r < 0.7:
        return rng.choice(L["places"])
    return f"{rng.randint(1, 999)} {rng.choice(L['streets'])} {rng.choice(['Street', 'Avenue', 'Road', 'Lane', 'Drive'])}"


_MODES = {"driving": ["by car", "driving"], "walking": ["on foot", "walking"],
          "transit": ["by bus", "by train", "using public transit"], "cycling": ["by bike", "cycling"]}


_SYL_A = "ba be bi bo da de di do fa fe ka ke ki ko la le li lo ma me mi mo na ne ni no ra re ri ro sa se si so ta te ti to va ve vi za zo".split()
_SYL_B = "n r l s th nd rk st m v x sh ll rt".split()


def _pseudo_name(rng: random.Random) -> str:
    """An invented name (train/val only): teaches copying names never seen before."""
    word = "".join(rng.choice(_SYL_A) for _ in range(rng.randint(1, 3))) + rng.choice(_SYL_B + [""] * 6)
    return word.capitalize()


def _word(rng: random.Random, L: dict) -> str:
    """A real word from this split's lists, an invented one, or (copy drill) 1-3 random
    tokenizer pieces glued together, so every vocabulary piece is seen being copied."""
    if L.get("_tokens"):
        r = rng.random()
        if r < 0.5:
            return "".join(rng.choice(L["_tokens"]) for _ in range(rng.randint(1, 3)))
        return rng.choice(L["_vocab"]) if r < 0.75 else _pseudo_name(rng).lower()
    # without the drill: exactly the draws of the stage-1 run (keeps it reproducible)
    return rng.choice(L["_vocab"]) if rng.random() < 0.5 else _pseudo_name(rng).lower()


def _word_salad(rng: random.Random, L: dict, lo: int = 2, hi: int = 7) -> str:
    """A phrase of arbitrary words: text the model can only get right by copying it."""
    return " ".join(_word(rng, L) for _ in range(rng.randint(lo, hi)))


def _maybe_synth(L: dict, rng: random.Random) -> dict:
    """With probability L['_synth'], replace every open-class list by invented values.

    Without this the model memorises the (small) training lists and picks the nearest
    known value instead of copying the unseen one from the request.
    """
    p = L.get("_synth", 0.0)
    if not p or rng.random() >= p:
        return L
    L2 = dict(L)
    def names(n: int = 4) -> list[str]:
        return [(_word(rng, L) if L.get("_tokens") and rng.random() < 0.5 else _pseudo_name(rng)).capitalize()
                for _ in range(n)]

    L2["first_names"], L2["surnames"] = names(), names()
    L2["cities"] = [c + rng.choice(["", "", " City", "ville", "burg", " Bay", "ton"]) for c in names()]
    L2["rooms"] = [_word_salad(rng, L, 1, 2) for _ in range(4)]
    L2["doors"] = [_word_salad(rng, L, 1, 2) + rng.choice([" door", " gate", ""]) for _ in range(4)]
    L2["event_places"] = ["the " + _word_salad(rng, L, 1, 2) for _ in range(4)]
    L2["places"] = ["the " + _word_salad(rng, L, 1, 3) for _ in range(4)]
    L2["streets"] = names()
    L2["adjectives"] = [_word(rng, L) for _ in range(4)]
    L2["nouns"] = [_word(rng, L) for _ in range(4)]
    L2["band_nouns"] = [_word(rng, L) for _ in range(4)]
    for k in ("messages", "notes", "queries", "reminders", "phrases", "event_titles", "news", "items"):
        short = k in ("items", "news")
        L2[k] = [_word_salad(rng, L, 1 if short else 2, 2 if short else 7) for _ in range(4)]
    if L.get("_phrase") and rng.random() < L["_phrase"]:  # training split only (datagen)
        for k in ("messages", "notes", "queries", "reminders", "phrases"):
            L2[k] = [_phrase(rng, L) for _ in range(4)]
    return L2


# Free-text shapes for the function-word drill. Word salad holds no "at", "to" or "is it",
# so the model learned that a value ends at the first such word: session 3's test misses
# cut "turn left at the corner" to "turn left" and "what time is it" to "what time". Here
# the value itself carries them, and only the template's structure says where it ends.
# No shape puts a number after "at" (that would read as a time).
_PHRASE_SHAPES = (
    "{a} {b} at the {c}", "{a} to {N}", "what {a} is it", "{a} me when you {b}", "the {a} was {b}",
    "{a} the {b} on {n}th street", "{a} {b} for the {c}", "{a} with {N}", "{a} in the {c}", "{a} and {b} {c}",
    "is it {a}", "{a} {b} from {N}", "{a} by the {c}", "{a} it to {N}", "the {a} is {b}", "{a} at {N}'s place",
    "{a} me at the {c}", "{a} {b} to the {c}", "{a} on the {c} {d}", "how {a} is the {b}", "{a} for {n} {b}",
    "{a} is at the {c}", "{a} up the {b} in {N}", "{a} my {b} to the {c}", "where is the {a}", "{a} off at {N}",
)


def _phrase(rng: random.Random, L: dict) -> str:
    """An invented free-text value with function words inside it (see _PHRASE_SHAPES)."""
    w = [_word(rng, L) for _ in range(4)]
    return rng.choice(_PHRASE_SHAPES).format(a=w[0], b=w[1], c=w[2], d=w[3], N=_pseudo_name(rng),
                                             n=rng.randint(2, 99))


# Clauses said before a request that carry no argument ("the cleaner is here, unlock the
# office door"): session 3's model took the clause's noun as the door. Their nouns are
# drawn from the split's lists, so they look like values the model must learn to skip.
_CONTEXT = (
    "the {n} is here", "{P} is coming over", "I'm heading out", "it's getting late", "I just got home",
    "{P} just called", "the {n} is broken", "we're leaving soon", "my {n} is ready", "the kids are asleep",
    "I'm at work", "I'm in a rush", "{P} asked me to", "the {n} starts soon", "so the {n} came",
    "the {n} is back", "long day", "okay so", "before I forget", "while I think of it", "{P} is asleep",
    "the {a} {n} arrived", "{P} and I are busy", "the {n} just left", "I forgot the {n} again",
)


def context_clause(rng: random.Random, L: dict) -> str:
    """A clause to put before a request (training-only drill, see _CONTEXT)."""
    return rng.choice(_CONTEXT).format(n=rng.choice(L["nouns"]), a=rng.choice(L["adjectives"]),
                                       P=rng.choice(L["first_names"]))


def slot_values(rng: random.Random, L: dict) -> dict[str, tuple[str, dict]]:
    """Draw a value for every slot: surface text and the arguments it contributes."""
    if L.get("_doc_values") and rng.random() < L["_doc_values"]:  # training split only (datagen)
        L = with_doc_values(L, rng)
    L = _maybe_synth(L, rng)
    time_s, time_v = S.time_of_day(rng)
    day_s, day_v = S.day(rng)
    dur_s, dur_v = S.duration(rng)
    temp_s, temp_v = S.temperature(rng)
    who_s, who_v = _person(rng, L)
    if rng.random() < 0.08:  # sometimes a number instead of a name
        who_s = who_v = f"{rng.randint(200, 999)} {rng.randint(100, 999)} {rng.randint(1000, 9999)}"
    items_s, items_v = _items(rng, L)
    qty_s, to_s, src, dst, value = S.unit_pair(rng)
    mode = rng.choice(list(_MODES))
    pct = rng.choice([10, 20, 25, 30, 40, 50, 60, 70, 75, 80, 90, rng.randint(1, 100)])
    song = _title(f"{rng.choice(L['adjectives'])} {rng.choice(L['nouns'])}")
    if rng.random() < 0.2:
        song = "The " + _title(rng.choice(L["nouns"]))
    playlist = rng.choice([f"{rng.choice(L['adjectives'])} {rng.choice(L['nouns'])}",
                           f"{rng.choice(L['nouns'])} mix", f"{rng.choice(L['adjectives'])} vibes"])
    title = rng.choice(L["event_titles"])
    if rng.random() < 0.2:
        title = f"lunch with {rng.choice(L['first_names'])}"
    artist = _artist(rng, L)
    vals = {
        "time": (time_s, {"time": time_v}), "day": (day_s, {"day": day_v}), "dur": (dur_s, dur_v),
        "label": (rng.choice(L["event_titles"] if rng.random() < 0.5 else L["items"]), {}),
        "task": (rng.choice(L["reminders"]), {}), "who": (who_s, {}), "msg": (rng.choice(L["messages"]), {}),
        "title": (title, {"title": title}), "place": (rng.choice(L["event_places"]), {"location": None}),
        "city": (rng.choice(L["cities"]), {}), "song": (song, {"song": song}),
        "artist": (artist, {"artist": artist}), "playlist": (playlist, {"playlist": playlist}),
        "room": (rng.choice(L["rooms"]), {"room": None}), "pct": (str(pct), {}), "temp": (temp_s, temp_v),
        "q": (rng.choice(L["queries"]), {"query": None}), "note": (rng.choice(L["notes"]), {"content": None}),
        "dest": (_dest(rng, L), {"destination": None}), "mode": (rng.choice(_MODES[mode]), {"mode": mode}),
        "qty": (qty_s, {"value": value, "from_unit": src}), "to": (to_s, {"to_unit": dst}),
        "items": (items_s, {"items": items_v}), "topic": (rng.choice(L["news"]), {"topic": None}),
        "phrase": (rng.choice(L["phrases"]), {"text": None}), "lang": (rng.choice(L["languages"]), {}),
        "door": (rng.choice(L["doors"]), {"door": None}),
        "_who_v": (who_v, {}),
    }
    if L.get("_stress"):  # training split only (datagen): no extra draws for val / test
        vals = stress_values(vals, rng, L["_stress"])
    return vals


# Per intent, which argument a slot fills when slot_values left it open (None / {}).
_ARG_OF = {
    ("set_alarm", "label"): "label", ("set_timer", "label"): "label", ("create_reminder", "task"): "text",
    ("send_message", "who"): "recipient", ("send_message", "msg"): "message", ("make_call", "who"): "contact",
    ("get_weather", "city"): "location", ("set_lights", "pct"): "brightness", ("set_volume", "pct"): "level",
    ("translate_text", "lang"): "target_language",
}
_INT_ARGS = {"brightness", "level"}


# Words that carry no request meaning, for insertions by the word-noise drill.
_NEUTRAL = ("just", "maybe", "actually", "kindly", "like", "uh", "um", "really", "quickly", "basically", "please",
            "now", "so", "you know", "sort of", "ok", "hmm", "quick")
_VOCAB_CACHE: dict[str, list[str]] = {}


def _tool_words(intent: str) -> list[str]:
    """The literal words of an intent's *training* patterns (never val/test ones)."""
    words = _VOCAB_CACHE.get(intent)
    if words is None:
        rng, seen = random.Random(0), set()
        for tpl in templates_for(intent, "train"):
            pattern = tpl if isinstance(tpl, str) else tpl[0]
            for _ in range(30):
                seen.update(w for w in realize(pattern, rng).split() if "{" not in w and w.isalpha())
        words = _VOCAB_CACHE[intent] = sorted(seen)
    return words


def _is_cue(word: str) -> bool:
    """A word found in the training phrasings of at most two tools ("alarm", "directions"):
    it may be what names the tool, so the drill never removes or replaces it."""
    if not _CUE_COUNT:
        for intent in TEMPLATES:
            for w in _tool_words(intent):
                _CUE_COUNT[w.lower()] = _CUE_COUNT.get(w.lower(), 0) + 1
    return _CUE_COUNT.get(word.lower(), 0) <= 2


_CUE_COUNT: dict[str, int] = {}


def word_noise(text: str, intent: str, rng: random.Random, keep_words: bool) -> str:
    """Drop, swap or insert one or two literal words of a template before it is filled.

    A training-only drill against learning each structure by heart: the request must
    still be recognised with a word missing, with another word of the same tool's
    phrasings in its place, or with a filler word inserted. Only common words go or get
    replaced, never a tool's cue words, slots, or the word right before a slot (it marks
    where the value starts); insertions never touch a slot either. Templates
    whose wording fixes a constant argument (off, unlock, mute) and templates without
    slots only get insertions.
    """
    for _ in range(8):  # two edits can cancel out (an insertion, then its deletion): draw again
        out = _noised(text, intent, rng, keep_words)
        if out != text:
            return out
    return out


def _noised(text: str, intent: str, rng: random.Random, keep_words: bool) -> str:
    words = text.split(" ")
    for _ in range(rng.choice((1, 1, 2))):
        free = [i for i, w in enumerate(words) if "{" not in w and w.isalpha() and not _is_cue(w)
                and not (i + 1 < len(words) and "{" in words[i + 1])]
        op = rng.random()
        if keep_words or len(free) < 2 or op < 0.34:
            # never right before or after a slot: the value's edges stay where they were
            spots = [j for j in range(len(words) + 1) if (j == len(words) or "{" not in words[j])
                     and (j == 0 or "{" not in words[j - 1])]
            if spots:
                words.insert(rng.choice(spots), rng.choice(_NEUTRAL))
        elif op < 0.67 and len(words) > 2:
            del words[rng.choice(free)]
        else:
            i = rng.choice(free)
            words[i] = rng.choice([w for w in _tool_words(intent) if w != words[i]])
    return " ".join(words)


def fill(intent: str, rng: random.Random, L: dict, split: str, patterns: list | None = None) -> tuple[str, dict]:
    """One request for `intent` from the split's templates, or from ``patterns`` when
    given (datagen's round-5 and round-6 shares): (user text, arguments)."""
    if patterns is not None:  # no fold-val draw, so the share stays exactly datagen's
        tpl = rng.choice(patterns)
    elif L.get("_fold_val") and rng.random() < L["_fold_val"]:  # training split only (datagen)
        tpl = rng.choice(VAL_PATTERNS[intent])  # validation's structures; such runs are judged on heldout.py
    else:
        tpl = rng.choice(templates_for(intent, split))
    pattern, const = (tpl, {}) if isinstance(tpl, str) else tpl
    text = realize(pattern, rng)
    if L.get("_noise") and rng.random() < L["_noise"]:  # training split only (datagen)
        text = word_noise(text, intent, rng, keep_words=bool(const) or "{" not in text)
    if L.get("_swap") and not const and rng.random() < L["_swap"]:  # training split only (datagen)
        text = swap_verb(text, intent, rng)
    if L.get("_front") and rng.random() < L["_front"]:  # training split only (datagen)
        text = front_adjunct(text) or text
    if L.get("_context") and rng.random() < L["_context"]:  # training split only (datagen)
        text = context_clause(rng, L) + rng.choice((", ", ". ", ", so ", " so ", "; ")) + text
    return fill_slots(intent, text, const, rng, L)


def fill_slots(intent: str, text: str, const: dict, rng: random.Random, L: dict) -> tuple[str, dict]:
    """Fill a template's slots with drawn values: (user text, arguments). Shared by fill and
    compose.fill, so both draw plain, invented and stress values the same way."""
    vals = slot_values(rng, L)
    args: dict = dict(const)
    surf = {}
    for slot in _slots(text):
        s, contrib = vals[slot]
        surf[slot] = s
        value = vals["_who_v"][0] if slot == "who" else s
        if (intent, slot) in _ARG_OF:
            key = _ARG_OF[(intent, slot)]
            args[key] = int(value) if key in _INT_ARGS else value
        for k, v in contrib.items():
            args[k] = s if v is None else v
    return text.format(**surf), args
