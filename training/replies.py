"""Everything the assistant says without a tool: tool results and the replies that follow
them, refusals, arithmetic, small talk and short facts. User phrasings are split like the
tool templates (every 6th from offset 5 test, the rest train; validation has its own,
val_fresh.py)."""
from __future__ import annotations

import random

from . import surfaces as S
from .intents import dealt
from .tools import CAPABILITY
from .val_fresh import VAL_ARITH, VAL_FACTS, VAL_SMALLTALK


def _pick(rng: random.Random, options: list, split: str, train_only: list = (), val: list | None = None):
    """One of the options for ``split`` (intents.dealt, ``val`` validation's fresh list);
    training also draws from ``train_only``."""
    own = dealt(options, split, val)
    return rng.choice(own + list(train_only) if split == "train" else own)


def tool_result(name: str, args: dict, rng: random.Random) -> tuple[dict, str]:
    """A plausible tool response and the assistant's sentence about it."""
    a = args
    if name == "set_alarm":
        return {"status": "ok", "alarm_id": rng.randint(1, 99)}, f"Your alarm is set for {a['time']}."
    if name == "set_timer":
        parts = [f"{a[k]} {k[:-1] if a[k] == 1 else k}" for k in ("hours", "minutes", "seconds") if k in a]
        return {"status": "running"}, f"Timer started for {' and '.join(parts) or 'the requested time'}."
    if name == "create_reminder":
        when = " ".join(x for x in (a.get("day"), ("at " + a["time"]) if "time" in a else None) if x)
        return {"status": "ok"}, f"I'll remind you to {a['text']}{' ' + when if when else ''}."
    if name == "send_message":
        return {"status": "sent"}, f"Message sent to {a['recipient']}."
    if name == "make_call":
        return {"status": "calling"}, f"Calling {a['contact']} now."
    if name == "create_event":
        return {"status": "ok", "event_id": rng.randint(100, 999)}, \
            f"Added {a['title']} to your calendar for {a['day']} at {a['time']}."
    if name == "get_calendar":
        n = rng.randint(0, 3)
        events = [{"title": t, "time": f"{rng.randint(8, 18):02d}:00"} for t in
                  rng.sample(["standup", "lunch", "review", "gym", "call with the team", "dentist"], n)]
        if not events:
            return {"events": []}, f"Your calendar is clear {a['day']}."
        listed = ", ".join(f"{e['title']} at {e['time']}" for e in events)
        return {"events": events}, f"For {a['day']} you have {listed}."
    if name == "get_weather":
        temp, cond = rng.randint(-5, 35), rng.choice(["sunny", "cloudy", "rainy", "windy", "snowy", "clear"])
        where = f" in {a['location']}" if "location" in a else ""
        return {"temperature_c": temp, "condition": cond}, \
            f"It's {cond} and {temp} degrees{where} {a.get('day', 'today')}."
    if name == "play_music":
        what = a.get("song") or a.get("playlist") or a.get("artist") or "music"
        return {"status": "playing"}, f"Now playing {what}."
    if name == "set_lights":
        extra = f" at {a['brightness']}%" if "brightness" in a else ""
        return {"status": "ok"}, f"The {a['room']} lights are {a['state']}{extra}."
    if name == "set_thermostat":
        return {"status": "ok"}, f"Thermostat set to {a['temperature']} degrees{' ' + a['unit'] if 'unit' in a else ''}."
    if name == "web_search":
        return {"results": [{"title": f"About {a['query']}", "snippet": "Top result summary."}]}, \
            f"Here is what I found for {a['query']}: the top result is 'About {a['query']}'."
    if name == "create_note":
        return {"status": "saved"}, "Your note is saved."
    if name == "get_directions":
        mins = rng.randint(5, 90)
        return {"duration_minutes": mins, "distance_km": round(mins * 0.6, 1)}, \
            f"{a['destination']} is about {mins} minutes away{' ' + a['mode'] if 'mode' in a else ''}. Starting directions."
    if name == "convert_units":
        out = S.convert(float(a["value"]), a["from_unit"], a["to_unit"])
        return {"result": round(out, 3)}, f"{a['value']} {a['from_unit']} is about {S.fmt_num(out)} {a['to_unit']}."
    if name == "set_volume":
        return {"status": "ok"}, f"Volume set to {a['level']}%."
    if name == "set_do_not_disturb":
        return {"status": "ok"}, f"Do not disturb is {'on' if a['enabled'] else 'off'}."
    if name == "add_to_shopping_list":
        return {"status": "ok", "count": len(a["items"])}, f"Added {', '.join(a['items'])} to your shopping list."
    if name == "get_news":
        return {"headlines": ["Markets steady", "New park opens downtown"]}, \
            "Here are the top headlines: Markets steady; New park opens downtown."
    if name == "translate_text":
        return {"translation": "(translated text)"}, f"In {a['target_language']}: (translated text)."
    if name == "lock_door":
        return {"status": "ok"}, f"The {a['door']} is {'locked' if a['locked'] else 'unlocked'}."
    raise ValueError(f"no result for tool {name}")


# Shared by all splits: the measure is "no tool call", and a reply never trained on could
# not be produced anyway. The wording varies but the first token is one of four ("I" 5,
# "Sorry" 4, "That" 2, "Unfortunately" 1 with the shipped tokenizer): greedy decoding
# picks one first token, and refusal mass spread thin there would lose to <tool_call>.
REFUSAL_OOS = ["Sorry, I can't help with that. None of my tools can do it.",
               "I'm sorry, but I don't have a tool that can do that.",
               "Unfortunately that's not something I can do with the tools I have.",
               "I can't do that. My tools don't cover it.",
               "That's outside what I can do here, sorry.",
               "Sorry, that's not something my tools can handle.",
               "I'm not able to do that. I can only use the tools I've been given.",
               "I can't help with that one, since I don't have a tool for it.",
               "Sorry, I have no way to do that from here.",
               "That isn't something I can do, sorry. None of my tools cover it.",
               "I'm afraid I can't do that with the tools available.",
               "Sorry, I can't take care of that for you. It's beyond what my tools can do."]


def refusal_missing(tool: str, rng: random.Random) -> str:
    """Reply when the request needs a tool that this conversation did not offer."""
    return rng.choice([f"Sorry, I can't {CAPABILITY[tool]} right now: that tool isn't available.",
                       f"I'm not able to {CAPABILITY[tool]} here, since I don't have that tool."])


ARITH_TEMPLATES = {
    "+": ["what is {a} plus {b}", "{a} + {b}", "add {a} and {b}", "what's {a} + {b}", "how much is {a} plus {b}",
          "calculate {a} plus {b}", "sum of {a} and {b}", "{a} plus {b} equals what", "what do {a} and {b} add up to",
          "quick math: {a} + {b}", "compute {a} + {b}", "tell me {a} plus {b}"],
    "-": ["what is {a} minus {b}", "{a} - {b}", "subtract {b} from {a}", "what's {a} - {b}", "how much is {a} minus {b}",
          "calculate {a} minus {b}", "take {b} away from {a}", "{a} minus {b} is what", "what's left if I take {b} from {a}",
          "quick math: {a} - {b}", "compute {a} - {b}", "tell me {a} minus {b}"],
    "*": ["what is {a} times {b}", "{a} * {b}", "multiply {a} by {b}", "what's {a} x {b}", "how much is {a} times {b}",
          "calculate {a} times {b}", "product of {a} and {b}", "{a} times {b} equals what", "what do you get from {a} times {b}",
          "quick math: {a} * {b}", "compute {a} * {b}", "tell me {a} times {b}"],
}


def arithmetic(rng: random.Random, split: str) -> tuple[str, str]:
    op = rng.choice("+-*")
    if op == "*":
        a, b = rng.randint(2, 12), rng.randint(2, 12)
        c = a * b
    else:
        a, b = rng.randint(1, 99), rng.randint(1, 99)
        if op == "-" and b > a:
            a, b = b, a
        c = a + b if op == "+" else a - b
    sym = {"+": "+", "-": "-", "*": "x"}[op]
    return _pick(rng, ARITH_TEMPLATES[op], split, TRAIN_ARITH[op], VAL_ARITH[op]).format(a=a, b=b), f"{a} {sym} {b} = {c}."


# (user phrasings, reply) - replies are shared; phrasings split.
SMALLTALK = [
    (["hi", "hello", "hey there", "good morning", "hiya", "hello assistant", "hey", "greetings", "morning!",
      "hi there", "good evening", "howdy"], "Hello! How can I help you today?"),
    (["thanks", "thank you", "thanks a lot", "cheers", "much appreciated", "thank you so much", "great, thanks",
      "perfect, thank you", "awesome thanks", "thanks, that's all", "ok thanks", "nice, thanks"],
     "You're welcome! Anything else?"),
    (["how are you", "how are you doing", "how's it going", "how are things", "you doing ok?", "what's up",
      "how have you been", "are you well?", "how do you feel today", "everything good with you?", "how's your day",
      "how are you today"], "I'm doing well, thanks for asking. What can I do for you?"),
    (["who are you", "what are you", "what's your name", "introduce yourself", "are you a robot?",
      "tell me about yourself", "who am I talking to", "what should I call you", "are you human?",
      "who made you", "are you an assistant", "what kind of program are you"],
     "I'm a small on-device assistant. I can use tools on your phone and home, and answer simple questions."),
    (["what can you do", "help", "what are you able to do", "what are your features", "how can you help me",
      "what do you do", "list your skills", "what tasks can you handle", "show me what you can do",
      "what are you good at", "how do I use you", "what can I ask you"],
     "I can set alarms, timers and reminders, send messages, control lights and more, using the tools I'm given. "
     "I can also do simple math."),
    (["bye", "goodbye", "see you later", "that's all for now", "good night", "talk later", "see ya",
      "I'm done", "bye for now", "catch you later", "have a good one", "later!"], "Goodbye! Have a great day."),
]

FACTS = [
    (["how many days are in a week", "number of days in a week", "a week has how many days"], "There are 7 days in a week."),
    (["how many hours are in a day", "hours in one day", "how many hours does a day have"], "There are 24 hours in a day."),
    (["how many minutes in an hour", "minutes in one hour", "an hour has how many minutes"], "An hour has 60 minutes."),
    (["how many months are in a year", "number of months in a year", "a year has how many months"], "There are 12 months in a year."),
    (["at what temperature does water boil", "boiling point of water", "when does water boil"],
     "Water boils at 100 degrees Celsius at sea level."),
    (["at what temperature does water freeze", "freezing point of water", "when does water freeze"],
     "Water freezes at 0 degrees Celsius."),
    (["what is the largest planet", "biggest planet in the solar system", "which planet is the largest"],
     "Jupiter is the largest planet in the solar system."),
    (["how many continents are there", "number of continents", "how many continents does earth have"],
     "There are seven continents."),
    (["what color is the sky", "why is the sky blue", "what colour is the sky on a clear day"],
     "On a clear day the sky looks blue, because air scatters blue light the most."),
    (["how many legs does a spider have", "spider legs count", "number of legs on a spider"], "A spider has eight legs."),
    (["what is the closest star to earth", "nearest star to us", "which star is closest to earth"],
     "The Sun is the closest star to Earth."),
    (["how many seconds are in a minute", "seconds in one minute", "a minute has how many seconds"],
     "A minute has 60 seconds."),
]


def chat_turn(rng: random.Random, split: str) -> tuple[str, str, str]:
    """A request that needs no tool: (kind, user text, reply)."""
    r = rng.random()
    if r < 0.45:
        q, a = arithmetic(rng, split)
        return "arithmetic", q, a
    if r < 0.8:
        phr, reply = rng.choice(SMALLTALK)
        return "smalltalk", _pick(rng, phr, split, TRAIN_SMALLTALK[reply], VAL_SMALLTALK[reply]), reply
    if split == "train":  # train-only facts and phrasings; val/test keep their one phrasing each
        phr, reply = rng.choice(FACTS + TRAIN_FACTS)
        held_out = reply in TRAIN_FACT_PHRASES  # a shared fact: its phrasing 2 is test
        return "fact", rng.choice(phr[:2] + TRAIN_FACT_PHRASES[reply] if held_out else phr), reply
    phr, reply = rng.choice(FACTS)
    # three phrasings per fact: 0 and 1 (validation until session 7) train, 2 test;
    # validation has one of its own
    return "fact", VAL_FACTS[reply] if split in ("val", "heldout") else phr[2], reply


# --- Train-only chat phrasings (round 2) --------------------------------------------------
# Written from the kinds of validation misses (never test): terse or imperative arithmetic
# ("work out 7 + 5", "12*3?") and unit-like facts ("hours per week") were answered with a
# tool call, the first number taken as a volume or a timer. These teach that a number in a
# request does not by itself mean a tool. None equals or trivially rewords a val/test one
# (those are ARITH_TEMPLATES / SMALLTALK / FACTS entries at positions 4 and 5 mod 6, and
# phrasings 1 and 2 of each fact); the reply is computed, so it is always right.
TRAIN_ARITH = {
    "+": ["{a}+{b}", "{a} + {b} = ?", "work out {a} + {b}", "solve {a} + {b}", "evaluate {a} + {b}",
          "{a} plus {b}?", "add up {a} and {b}", "do {a} plus {b} for me", "math: {a} + {b}", "figure out {a} plus {b}",
          "{a} and {b} added together", "what does {a} + {b} come to", "compute the result of {a} + {b}",
          "what does {a} plus {b} compute to", "I need you to compute how much {a} and {b} make",
          "run the numbers: {a} + {b}", "{a} + {b}, what's the answer", "help me add {a} to {b}",
          "total of {a} and {b}?", "crunch {a} + {b}", "answer me this: {a} plus {b}", "{a} added to {b} makes what"],
    "-": ["{a}-{b}", "{a} - {b} = ?", "work out {a} - {b}", "solve {a} - {b}", "evaluate {a} - {b}",
          "{a} minus {b}?", "do {a} minus {b} for me", "math: {a} - {b}", "figure out {a} minus {b}",
          "{a} take away {b}", "how much does {a} minus {b} leave", "compute the result of {a} - {b}",
          "what does {a} minus {b} compute to", "compute the difference between {a} and {b}",
          "run the numbers: {a} - {b}", "{a} - {b}, what's the answer", "difference between {a} and {b}?",
          "crunch {a} - {b}", "answer me this: {a} minus {b}", "{a} less {b} makes what"],
    "*": ["{a}*{b}", "{a} x {b} = ?", "work out {a} x {b}", "solve {a} * {b}", "evaluate {a} * {b}",
          "{a} times {b}?", "do {a} times {b} for me", "math: {a} x {b}", "figure out {a} times {b}",
          "{a} multiplied by {b}", "what does {a} * {b} come to", "compute the result of {a} * {b}",
          "what does {a} times {b} compute to", "compute how much {a} groups of {b} make", "run the numbers: {a} x {b}",
          "{a} x {b}, what's the answer", "crunch {a} * {b}", "answer me this: {a} times {b}",
          "{a} groups of {b} is how many", "multiply {a} and {b} together"],
}

# Extra user phrasings per SMALLTALK reply (keyed by the reply), training only.
TRAIN_SMALLTALK = {
    "Hello! How can I help you today?": ["hi cactus", "good afternoon", "hello again", "yo", "sup",
                                         "hey, you there?", "hi!"],
    "You're welcome! Anything else?": ["appreciate it", "many thanks", "that's great, thank you",
                                       "you're a star", "much obliged", "I appreciate the help",
                                       "thank you kindly", "ta", "thanks a bunch", "thx a lot",
                                       "super, thank you", "you've been very helpful", "I really appreciate it",
                                       "great job, thanks", "that helps, thanks"],
    "I'm doing well, thanks for asking. What can I do for you?": ["how's life", "you alright?", "doing okay today?",
                                                                  "how's the evening treating you", "how are you holding up"],
    "I'm a small on-device assistant. I can use tools on your phone and home, and answer simple questions.":
        ["what exactly are you", "are you a person", "what's your deal", "are you a real person?"],
    "I can set alarms, timers and reminders, send messages, control lights and more, using the tools I'm given. "
    "I can also do simple math.": ["what are you for", "what are you useful for", "what jobs can you do",
                                   "give me a list of what you can do", "what are you capable of"],
    "Goodbye! Have a great day.": ["that'll be all", "nothing else, bye", "I'm off", "ciao", "goodnight then",
                                   "okay bye", "see you around"],
}

# Extra phrasings of the existing facts (keyed by the reply), and new facts, training only.
TRAIN_FACT_PHRASES = {
    "There are 7 days in a week.": ["days per week", "how many days make a week"],
    "There are 24 hours in a day.": ["hours per day", "how many hours make a day"],
    "An hour has 60 minutes.": ["minutes per hour", "how many minutes make an hour"],
    "There are 12 months in a year.": ["months per year", "how many months make a year"],
    "Water boils at 100 degrees Celsius at sea level.": ["what temp does water boil at",
                                                         "how hot does water have to be to boil"],
    "Water freezes at 0 degrees Celsius.": ["what temp does water freeze at",
                                            "how cold before water turns to ice"],
    "Jupiter is the largest planet in the solar system.": ["largest planet?", "name the biggest planet",
                                                           "what's the biggest planet we have"],
    "There are seven continents.": ["how many continents", "continents on earth, how many", "count the continents"],
    "On a clear day the sky looks blue, because air scatters blue light the most.": ["what makes the sky blue"],
    "A spider has eight legs.": ["how many legs do spiders have", "do spiders have eight legs or six"],
    "The Sun is the closest star to Earth.": ["name the star we orbit", "which star do we go around"],
    "A minute has 60 seconds.": ["seconds per minute", "how many seconds make a minute"],
}
TRAIN_FACTS = [
    (["how many days are in a leap year", "days in a leap year", "a leap year has how many days"], "A leap year has 366 days."),
    (["how many weeks are in a year", "weeks per year", "number of weeks in a year"], "There are 52 weeks in a year."),
    (["how many hours are in a week", "hours per week", "a week has how many hours"], "A week has 168 hours."),
    (["how many seconds are in an hour", "seconds per hour", "an hour has how many seconds"], "An hour has 3,600 seconds."),
    (["how many minutes are in a day", "minutes per day", "a day has how many minutes"], "A day has 1,440 minutes."),
    (["how many days are in a year", "days per year", "a year has how many days"], "A regular year has 365 days."),
    (["how many sides does a triangle have", "sides on a triangle", "a triangle has how many sides"],
     "A triangle has three sides."),
    (["how many planets are in the solar system", "planets in the solar system", "number of planets around the sun"],
     "There are eight planets in the solar system."),
    (["how many letters are in the alphabet", "letters in the english alphabet", "the alphabet has how many letters"],
     "The English alphabet has 26 letters."),
    (["how many players are on a soccer team", "players on a soccer side", "a soccer team fields how many players"],
     "A soccer team has 11 players on the field."),
    (["how many strings does a guitar have", "strings on a guitar", "a standard guitar has how many strings"],
     "A standard guitar has six strings."),
    (["how many legs does an insect have", "legs on an insect", "an insect has how many legs"], "An insect has six legs."),
    (["what is the smallest planet", "smallest planet in the solar system", "which planet is the smallest"],
     "Mercury is the smallest planet in the solar system."),
]

# Round 3 (training only): terse noun-phrase facts ("X count", "X of Y") that validation
# misses took for a timer or a web search, in new wordings of the same facts.
_ROUND3_FACT_PHRASES = {
    "Water boils at 100 degrees Celsius at sea level.": ["water's boiling temperature", "boiling temp for water",
                                                         "water boils at what temperature"],
    "Water freezes at 0 degrees Celsius.": ["water's freezing temperature", "freezing temp for water"],
    "A spider has eight legs.": ["spider: how many legs", "legs per spider", "a spider's leg total"],
    "There are seven continents.": ["continent count", "total continents on earth"],
    "There are 7 days in a week.": ["week length in days", "day count of a week"],
    "Jupiter is the largest planet in the solar system.": ["size champion among the planets"],
    "A minute has 60 seconds.": ["second count in a minute"],
}
for _reply, _extra in _ROUND3_FACT_PHRASES.items():
    TRAIN_FACT_PHRASES[_reply] = TRAIN_FACT_PHRASES[_reply] + _extra
_ROUND3_FACT_EXTRA = {
    "A leap year has 366 days.": ["leap year day count"], "There are eight planets in the solar system.": ["planet count"],
    "A triangle has three sides.": ["triangle side count"], "A standard guitar has six strings.": ["guitar string count"],
    "The English alphabet has 26 letters.": ["alphabet letter count"], "An insect has six legs.": ["legs per insect"],
}
TRAIN_FACTS = [(phr + _ROUND3_FACT_EXTRA.get(reply, []), reply) for phr, reply in TRAIN_FACTS]

# Round 4 (training/train_round4.py): greetings and thanks that validation misses took for a
# destination or a contact, and "suppose I ..." sums.
from .train_round4 import ROUND4_ARITH, ROUND4_SMALLTALK  # noqa: E402

for _reply, _extra in ROUND4_SMALLTALK.items():
    TRAIN_SMALLTALK[_reply] = TRAIN_SMALLTALK[_reply] + _extra
for _op, _extra in ROUND4_ARITH.items():
    TRAIN_ARITH[_op] = TRAIN_ARITH[_op] + _extra
