"""Request templates per tool, and how a filled template becomes a tool call.

A template names slots ({time}, {who}...); the call's arguments are exactly the
slots the template uses (plus constant arguments the wording fixes, like
state="off"). Templates are dealt to train/val/test by position, so the test split
only ever sees phrasings the model was not trained on.
"""
from __future__ import annotations

import random
import string

from . import surfaces as S

T = str | tuple[str, dict]

TEMPLATES: dict[str, list[T]] = {
    "set_alarm": [
        "set an alarm for {time}", "wake me up at {time}", "set an alarm for {time} labeled {label}",
        "I need an alarm for {time}", "alarm at {time} please", "make an alarm for {time} called {label}",
        "can you set an alarm at {time}", "put an alarm on for {time}", "get me up at {time}",
        "set my alarm to {time}", "new alarm at {time} named {label}", "I want to wake up at {time}",
        "create an alarm at {time} with the label {label}", "schedule an alarm for {time}",
        "alarm for {time}, call it {label}", "wake me at {time} for {label}", "I have to be up at {time}, set an alarm",
        "add an alarm at {time}",
    ],
    "set_timer": [
        "set a timer for {dur}", "timer for {dur}", "start a timer for {dur} for the {label}",
        "count down {dur}", "put a timer on for {dur}", "start a countdown of {dur}",
        "set a timer for {dur} called {label}", "can you time {dur} for me", "give me a timer of {dur}",
        "I need a timer for {dur}", "begin a timer for {dur}", "time the {label} for {dur}",
        "run a timer for {dur}", "please start a {dur} countdown", "make a timer for {dur} named {label}",
        "set the kitchen timer to {dur}", "start timing {dur}", "countdown for {dur}",
    ],
    "create_reminder": [
        "remind me to {task}", "remind me to {task} at {time}", "remind me {day} to {task}",
        "set a reminder to {task}", "remind me to {task} {day} at {time}", "don't let me forget to {task} {day}",
        "create a reminder to {task}", "can you remind me at {time} to {task}", "I need a reminder to {task} {day}",
        "add a reminder {day} at {time} to {task}", "reminder to {task} at {time}", "make sure I remember to {task}",
        "ping me at {time} to {task}", "please remind me {day} at {time} to {task}", "new reminder: {task}",
        "nudge me {day} to {task}", "set a reminder for {time} to {task}", "I must {task} {day}, remind me",
    ],
    "send_message": [
        "text {who} that {msg}", "send a message to {who} saying {msg}", "message {who}: {msg}",
        "let {who} know that {msg}", "send {who} a text: {msg}", "tell {who} that {msg}",
        "shoot {who} a message saying {msg}", "can you text {who} {msg}", "write to {who}: {msg}",
        "send a text to {who} that says {msg}", "drop {who} a line saying {msg}", "sms {who}: {msg}",
        "message {who} saying {msg}", "send {who} a message that {msg}", "text {who}: {msg}",
        "notify {who} that {msg}", "send this to {who}: {msg}", "send {who} a quick text saying {msg}",
    ],
    "make_call": [
        "call {who}", "phone {who}", "give {who} a call", "ring {who}", "dial {who}", "can you call {who}",
        "place a call to {who}", "get {who} on the phone", "call {who} for me", "start a call with {who}",
        "please ring {who} now", "I need to talk to {who}, call them", "make a call to {who}",
        "connect me with {who}", "phone up {who}", "call up {who}", "I want to call {who}", "try calling {who}",
    ],
    "create_event": [
        "add {title} to my calendar {day} at {time}", "schedule {title} {day} at {time}",
        "put {title} on my calendar {day} at {time} at {place}", "create an event called {title} {day} at {time}",
        "book {title} {day} at {time}", "I have {title} {day} at {time}, add it",
        "new calendar event: {title}, {day} at {time}", "schedule {title} at {place} {day} at {time}",
        "add an event {title} at {time} {day} in {place}", "make a calendar entry for {title} at {time} {day}",
        "block time {day} at {time} for {title}", "calendar: {title} {day} {time}",
        "set up {title} {day} at {time} at {place}", "add {title} at {time} {day}",
        "save {title} {day} at {time} in my calendar", "please add {title} to the calendar {day} at {time}",
        "pencil in {title} {day} at {time}", "enter {title} {day} at {time} at {place} in my calendar",
    ],
    "get_calendar": [
        "what's on my calendar {day}", "what do I have {day}", "any meetings {day}", "check my calendar {day}",
        "read me my agenda {day}", "am I free {day}", "list my events {day}", "what's my schedule like {day}",
        "do I have anything planned {day}", "tell me my appointments {day}", "how busy am I {day}",
        "show my calendar {day}", "what's happening {day} on my calendar", "anything on the calendar {day}",
        "open my agenda {day}", "what are my plans {day}", "give me my schedule {day}", "what's booked {day}",
    ],
    "get_weather": [
        "what's the weather in {city}", "weather {day}", "will it rain in {city} {day}", "how hot is it in {city}",
        "do I need an umbrella {day}", "forecast for {city}", "what's the forecast {day}",
        "is it going to snow in {city} {day}", "how's the weather", "tell me the weather in {city} {day}",
        "what's the temperature outside", "check the weather in {city}", "should I bring a jacket {day}",
        "weather report for {city} {day}", "is it sunny in {city}", "how cold will it be {day}",
        "what's it like outside in {city}", "give me the forecast for {city} {day}", "will it be windy {day}",
        "what's the weather going to be like in {city} {day}",
    ],
    "play_music": [
        "play {song} by {artist}", "put on some {artist}", "play my {playlist} playlist", "I want to hear {song}",
        "play music by {artist}", "play the song {song}", "shuffle the playlist {playlist}",
        "can you play {song} by {artist}", "start the {playlist} playlist", "play something by {artist}",
        "queue up {song}", "listen to {artist}", "play the track {song} from {artist}", "put on {playlist}, the playlist",
        "I'm in the mood for {artist}", "play {song}", "let's hear some {artist}", "play the {playlist} playlist",
    ],
    "set_lights": [
        ("turn on the {room} lights", {"state": "on"}), ("turn off the lights in the {room}", {"state": "off"}),
        ("dim the {room} lights to {pct} percent", {"state": "on"}), ("switch the {room} lights off", {"state": "off"}),
        ("lights on in the {room}", {"state": "on"}), ("set the {room} lights to {pct}%", {"state": "on"}),
        ("kill the lights in the {room}", {"state": "off"}), ("{room} lights off", {"state": "off"}),
        ("can you turn the {room} light on", {"state": "on"}), ("brighten the {room} to {pct} percent", {"state": "on"}),
        ("shut off the {room} lights", {"state": "off"}), ("power on the lights in the {room}", {"state": "on"}),
        ("make the {room} lights {pct} percent", {"state": "on"}), ("turn the {room} lights out", {"state": "off"}),
        ("I need light in the {room}", {"state": "on"}), ("put the {room} lights at {pct}%", {"state": "on"}),
        ("lights off in the {room} please", {"state": "off"}), ("switch on the {room} light", {"state": "on"}),
    ],
    "set_thermostat": [
        "set the thermostat to {temp}", "make it {temp} in here", "heat the house to {temp}",
        "change the temperature to {temp}", "I want it at {temp}", "cool it down to {temp}",
        "thermostat to {temp}", "set the heating to {temp}", "adjust the thermostat to {temp}",
        "put the ac on {temp}", "warm the place up to {temp}", "can you set the temperature to {temp}",
        "bring the temperature to {temp}", "turn the heat up to {temp}", "lower the thermostat to {temp}",
        "keep the house at {temp}", "set the temp to {temp}", "I'd like it to be {temp} inside",
    ],
    "web_search": [
        "search for {q}", "look up {q}", "google {q}", "search the web for {q}", "find information about {q}",
        "can you search {q}", "do a web search on {q}", "search online for {q}", "look online for {q}",
        "browse the web for {q}", "find me results for {q}", "web search: {q}", "please look up {q}",
        "run a search for {q}", "check the internet for {q}", "find out {q}", "query the web for {q}",
        "I want to search {q}",
    ],
    "create_note": [
        "take a note: {note}", "make a note saying {note}", "save a note: {note}", "write down {note}",
        "jot down {note}", "add a note that says {note}", "create a note with {note}", "new note: {note}",
        "put this in my notes: {note}", "can you note down {note}", "note: {note}", "save this note: {note}",
        "write a note saying {note}", "add to my notes: {note}", "please jot this down: {note}",
        "make a new note: {note}", "store a note that says {note}", "record a note: {note}",
    ],
    "get_directions": [
        "directions to {dest}", "how do I get to {dest}", "navigate to {dest}", "take me to {dest}",
        "show me the way to {dest} {mode}", "walk me to {dest}", "what's the fastest way to {dest}",
        "guide me to {dest} {mode}", "start navigation to {dest}", "route to {dest} {mode}",
        "how do I get to {dest} {mode}", "give me directions to {dest}", "find a route to {dest}",
        "I need to go to {dest} {mode}", "get me to {dest}", "navigate me to {dest} {mode}",
        "how can I reach {dest}", "lead me to {dest} {mode}",
    ],
    "convert_units": [
        "convert {qty} to {to}", "how many {to} is {qty}", "what is {qty} in {to}", "{qty} in {to}",
        "change {qty} into {to}", "how much is {qty} in {to}", "what's {qty} converted to {to}",
        "express {qty} in {to}", "{qty} to {to}", "can you convert {qty} into {to}", "turn {qty} into {to}",
        "how many {to} are in {qty}", "please convert {qty} to {to}", "what does {qty} come to in {to}",
        "I need {qty} in {to}", "convert {qty} into {to} for me", "{qty} equals how many {to}",
        "give me {qty} in {to}",
    ],
    "set_volume": [
        "set the volume to {pct}", "volume {pct} percent", "turn the volume to {pct}%", "change volume to {pct}",
        ("mute the sound", {"level": 0}), "put the sound at {pct}", "adjust volume to {pct} percent",
        ("max volume", {"level": 100}), "make the volume {pct}", "volume to {pct}", "set media volume to {pct}%",
        ("turn the volume all the way up", {"level": 100}), "bring the volume to {pct} percent",
        "can you set the volume at {pct}", ("silence the speaker", {"level": 0}), "I want the volume at {pct}",
        "volume level {pct}", "lower the volume to {pct}",
    ],
    "set_do_not_disturb": [
        ("turn on do not disturb", {"enabled": True}), ("turn off do not disturb", {"enabled": False}),
        ("enable dnd", {"enabled": True}), ("disable do not disturb", {"enabled": False}),
        ("silence my notifications", {"enabled": True}), ("I want notifications again", {"enabled": False}),
        ("put my phone on do not disturb", {"enabled": True}), ("switch dnd off", {"enabled": False}),
        ("activate do not disturb mode", {"enabled": True}), ("stop do not disturb", {"enabled": False}),
        ("I don't want to be disturbed", {"enabled": True}), ("end do not disturb mode", {"enabled": False}),
        ("dnd on", {"enabled": True}), ("dnd off", {"enabled": False}),
        ("start do not disturb", {"enabled": True}), ("deactivate do not disturb", {"enabled": False}),
        ("go into do not disturb", {"enabled": True}), ("take me out of do not disturb", {"enabled": False}),
    ],
    "add_to_shopping_list": [
        "add {items} to my shopping list", "put {items} on the list", "shopping list: {items}",
        "we're out of {items}, add them to the shopping list", "add {items} to the grocery list",
        "can you put {items} on my shopping list", "stick {items} on the shopping list",
        "include {items} in my shopping list", "I need to buy {items}, add it to the list",
        "add {items} please", "put {items} on my grocery list", "grocery list add {items}",
        "we need {items}, put that on the shopping list", "add {items} to shopping",
        "please add {items} to my list", "throw {items} on the shopping list", "my shopping list needs {items}",
        "add {items} to the list for the store",
    ],
    "get_news": [
        "what's the news", "latest news on {topic}", "any news about {topic}", "give me the {topic} headlines",
        "read me the headlines", "what's happening in {topic}", "catch me up on {topic} news", "news update",
        "top stories about {topic}", "brief me on the news", "what are today's headlines", "show me {topic} news",
        "what's new in {topic}", "tell me the news", "headlines for {topic}", "get me the latest news",
        "anything new about {topic}", "news on {topic} please",
    ],
    "translate_text": [
        "translate {phrase} to {lang}", "how do you say {phrase} in {lang}", "what is {phrase} in {lang}",
        "say {phrase} in {lang}", "translate \"{phrase}\" into {lang}", "can you translate {phrase} into {lang}",
        "I need {phrase} in {lang}", "give me the {lang} translation of {phrase}", "{phrase} in {lang} please",
        "how would I say {phrase} in {lang}", "translate this to {lang}: {phrase}", "put {phrase} into {lang}",
        "what's the {lang} for {phrase}", "render {phrase} in {lang}", "translate into {lang}: {phrase}",
        "help me say {phrase} in {lang}", "convert {phrase} to {lang}", "{lang} translation of {phrase}",
    ],
    "lock_door": [
        ("lock the {door}", {"locked": True}), ("unlock the {door}", {"locked": False}),
        ("secure the {door}", {"locked": True}), ("open the {door} lock", {"locked": False}),
        ("lock up the {door}", {"locked": True}), ("let me in, unlock the {door}", {"locked": False}),
        ("make sure the {door} is locked", {"locked": True}), ("unbolt the {door}", {"locked": False}),
        ("can you lock the {door}", {"locked": True}), ("release the {door} lock", {"locked": False}),
        ("bolt the {door}", {"locked": True}), ("please unlock the {door}", {"locked": False}),
        ("lock the {door} now", {"locked": True}), ("disengage the lock on the {door}", {"locked": False}),
        ("engage the lock on the {door}", {"locked": True}), ("can you open the {door}", {"locked": False}),
        ("is the {door} locked? lock it", {"locked": True}), ("unlock {door}", {"locked": False}),
    ],
}

SPLIT_OF_INDEX = {0: "train", 1: "train", 2: "train", 3: "train", 4: "val", 5: "test"}


def templates_for(intent: str, split: str) -> list[T]:
    """Templates of one split: every 6th from offset 4 is val, from offset 5 test, the rest train."""
    return [t for i, t in enumerate(TEMPLATES[intent]) if SPLIT_OF_INDEX[i % 6] == split]


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
    return L2


def slot_values(rng: random.Random, L: dict) -> dict[str, tuple[str, dict]]:
    """Draw a value for every slot: surface text and the arguments it contributes."""
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
    return {
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


# Per intent, which argument a slot fills when slot_values left it open (None / {}).
_ARG_OF = {
    ("set_alarm", "label"): "label", ("set_timer", "label"): "label", ("create_reminder", "task"): "text",
    ("send_message", "who"): "recipient", ("send_message", "msg"): "message", ("make_call", "who"): "contact",
    ("get_weather", "city"): "location", ("set_lights", "pct"): "brightness", ("set_volume", "pct"): "level",
    ("translate_text", "lang"): "target_language",
}
_INT_ARGS = {"brightness", "level"}


def fill(intent: str, rng: random.Random, L: dict, split: str) -> tuple[str, dict]:
    """One request for `intent` from the split's templates: (user text, arguments)."""
    tpl = rng.choice(templates_for(intent, split))
    text, const = (tpl, {}) if isinstance(tpl, str) else tpl
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
