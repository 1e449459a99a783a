"""The validation split's own material, new in session 8 (pattern syntax: phrasing.py).

Until session 7 validation was offset 4 of every dealt list (request patterns, prefixes,
suffixes, connectors, chat phrasings). Seven sessions chose models on it, and data rounds
2 and 3 were written from the kinds of its misses, so a model could do well there without
generalising; those structures now train (intents.RETIRED_VAL). What follows was written
for session 8 without looking at any model output, and nothing has been aimed at it: new
request structures per tool (questions, indirect needs, slot-first and terse forms, long
polite forms, a short reason first, slang), new openers, endings, connectors and chat
phrasings. None of it renders a training or test sentence, even with fillers and
punctuation stripped (tests/test_training_val_fresh.py). Validation draws only from
here (intents.dealt); the test split is untouched.
"""
from __future__ import annotations

from .templates import DND_OFF, DND_ON, LOCK, OFF, ON, UNLOCK

VAL_PATTERNS: dict[str, list] = {
    "set_alarm": [
        "(could|would) you (program|arrange) (a|an) <alarm> for me at {time}",
        "early start in the morning, I need (a|an) <alarm> (at|for) {time}",
        "{time} wake-up, (mark|title) it {label}", "yo, chuck (a|an) <alarm> on for {time}",
        "I'm hoping to be up by {time}, (can|could) you (sort out|arrange) (a|an) <alarm>",
        "would it be too much trouble to (set|arrange) (a|an) <alarm> for {time} (called|titled) {label}",
        "see to it that my <alarm> goes off at {time}", "<alarm> needed for {time}[, it's for {label}]",
    ],
    "set_timer": [
        "(could|would) you (watch|mind) the clock for {dur}[ for me]", "something's in the oven, [so ]<timer> for {dur}",
        "countdown {dur}, (label|tag) {label}", "lemme get a <timer> (for|of) {dur}",
        "when you have a moment, start a <timer> for {dur} and (label|call) it {label}",
        "the {label} (has to|should) (rest|bake|steep|simmer) for {dur}, (keep track|watch the clock) for me",
        "I'm (doing planks|meditating|going for a run), (track|measure) {dur} for me",
        "(can|could) I (get|have) {dur} on the clock",
    ],
    "create_reminder": [
        "(could|would) you (set|put) up a reminder {day} at {time} about (needing|having) to {task}",
        "I'm (terrible|hopeless|bad) at remembering things, [so ]remind me {day} to {task}",
        "{task} - (remind|ping) me about it {day}", "gimme a (shout|nudge) at {time} to {task}",
        "I'd be grateful if you could remind me {day} at {time} to {task}",
        "there's something I can't forget {day}: I (need|have) to {task}",
        "(can|could) you make sure I {task} at {time}", "when {day} comes around, remind me to {task}",
    ],
    "send_message": [
        "(could|would) you get a (text|message) over to {who} (saying|that says) {msg}",
        "I'm (running late|stuck in traffic|in a meeting), (text|message) {who} for me (that|saying) {msg}",
        "to {who}, (text|message): {msg}", "(bug|poke) {who} over text (with|and say) {msg}",
        "would you kindly (send|write) {who} a (text|message) (that reads|reading) {msg}",
        "{who} is waiting to hear from me, (text|message) (them|her|him) (that|saying) {msg}",
        "(put together|type out) a (text|message) to {who}: {msg}",
        "(is there any way|any way) you (could|can) (text|message) {who} (that|saying) {msg}",
    ],
    "make_call": [
        "(could|would) you (get|put) a call through to {who}",
        "I (need|have) to (sort something out|ask something|check something) with {who}, (call|ring) (them|her|him)",
        "(voice|phone) call to {who}", "(get|ring) {who} on the blower",
        "would you be so kind as to (call|phone|ring) {who}[ for me]",
        "(patch|put) a call in to {who}, I'm (running late|lost|stuck outside)",
        "(let's|let me) (see|try) if {who} picks up", "(can|could) I (speak|talk) to {who} (real quick|for a sec)",
    ],
    "create_event": [
        "(could|would) you (log|note) {title} {day} at {time} (in|on) my <calendar>",
        "(add|log) this: {title}, {day}, {time}",
        "(we|I) finally (settled on|agreed on) a date: {title} {day} at {time}, (add|put) it (in|on) my <calendar>",
        "(lock in|slot in) {title} {day} at {time}",
        "it would be great to have {title} at {place} on my <calendar>, {day} at {time}",
        "{title} is happening {day} at {time}, (make a note of it|mark it) (in|on) my <calendar>",
        "(can|could) you fit {title} into my <calendar> {day} at {time}", "mark {day} at {time} as {title}[ at {place}]",
    ],
    "get_calendar": [
        "(could|would) you check what I've got (on|going on) {day}",
        "before I (say yes|agree) to anything, what does {day} look like for me",
        "<calendar> check, {day}", "what am I up to {day}",
        "I'd appreciate a [quick ](rundown|summary) of my <calendar> {day}", "is {day} (packed|busy|full) for me",
        "I'm trying to plan {day}, what (commitments|meetings) do I already have",
        "(read|list) off whatever's (scheduled|booked) {day}",
    ],
    "get_weather": [
        "(could|would) you (check|find out) what the <weather> (is doing|is like) in {city}",
        "I'm (hanging the washing out|biking to work|walking the dog) {day}, any rain (coming|on the way)",
        "rain or shine in {city} {day}", "is it gonna be (chilly|scorching|miserable) {day}",
        "I'd like to hear what the <weather> will be in {city} {day}", "(does|will) {city} get [any ](rain|sun|snow) {day}",
        "trying to decide what to pack for {city}, what's the <weather> like there",
        "tell me (how hot|how cold|how warm) it'll get {day}",
    ],
    "play_music": [
        "(could|would) you put on something from {artist}",
        "I need [some ]background music (for studying|while I work), (try|put on) my {playlist} playlist",
        "(track|tune) {song}, (singer|band) {artist}", "[let's ]bump some {artist}",
        "I'd love it if you could play {song} by {artist}", "(do you think you|think you) could (play|find) {song}",
        "I've had {song} stuck in my head all day, (play|put on) (it|that one)",
        "(open|resume) (the|my) {playlist} playlist (from the beginning|on random)",
    ],
    "set_lights": [
        ("(could|would) you (brighten|light) up the {room} a (bit|little)", ON),
        ("I'm (about to read|trying to read|doing homework) in the {room}, (get|put) the <lights> on", ON),
        ("{room} <lights>, {pct} percent (brightness|power)", ON),
        ("the {room} is empty (now|at last), (shut down|power down) the <lights>", OFF),
        ("yo, (douse|knock out) the {room} <lights>", OFF),
        ("it would be lovely to have the {room} <lights> at {pct} percent", ON),
        ("is there a way to (switch|turn) the {room} <lights> off (from here|remotely)", OFF),
        ("we're wasting (power|electricity) in the {room}, (switch|turn) the <lights> off", OFF),
    ],
    "set_thermostat": [
        "(could|would) you (get|put) the (house|place) (at|to) {temp}",
        "the kids are (shivering|sweating), (take|bring) the <thermostat> to {temp}",
        "house temp: {temp}", "(jack|ramp) up the (heat|heating) to {temp}",
        "when it's convenient, (adjust|change) the indoor temperature to {temp}",
        "(any chance|is there any chance) you could (set|put) the <thermostat> (to|at|on) {temp}",
        "it's (stuffy|chilly|a bit nippy) in here, {temp} would be (nicer|more comfortable|better)",
        "(park|leave) the <thermostat> on {temp} (overnight|for the night)",
    ],
    "web_search": [
        "(could|would) you see what (comes up|you can find) (for|on) {q}",
        "I'm (writing a report|planning a trip|doing homework), (find|dig up) [some ](sources|facts|material) on {q}",
        "{q} - (look it up|find out)", "scope out {q} online", "I'd be grateful for (some|a few) search results on {q}",
        "(can|could) you find out anything about {q}",
        "I (don't know the first thing|know nothing) about {q}, (help me out|find me something)",
        "(open|start) a search (for|on) {q}",
    ],
    "create_note": [
        "(could|would) you file this away (as a <note>|in my notes): {note}",
        "I'll need this later, [so ](save|store) it (as a <note>|in my notes): {note}",
        "notepad: {note}", "(lemme|let me) (dump|drop) a thought in my notes: {note}",
        "would you please (write|put) (the following|this) into a <note>: {note}",
        "(can|could) you hold onto this (for later|as a <note>): {note}",
        "I just thought of something: {note}, (save|keep) it (somewhere|in my notes)",
        "(stick|pin) this in my notes: {note}",
    ],
    "get_directions": [
        "(could|would) you (route|direct) me to {dest}[ {mode}]",
        "(I've got to|I have to) (drop something off|pick someone up) at {dest}, (show me|give me) the route",
        "route (check|plan): {dest}, {mode}", "how do I roll up to {dest}[ {mode}]",
        "would you kindly (show|guide) me the (way|route) to {dest}",
        "(can|could) you (work out|figure out) how I get to {dest} {mode}",
        "I've never been to {dest} [before ]and (don't|do not) know how to get there",
        "(plot|set) a course (for|to) {dest}",
    ],
    "convert_units": [
        "(could|would) you (express|put) {qty} in terms of {to}",
        "I'm (following a recipe|filling in a form) that wants {to}, [so ]how much is {qty}",
        "{qty} (becomes|turns into) how many {to}", "ballpark {qty} in {to} for me",
        "I'd like to know what {qty} (comes to|works out to) in {to}",
        "[roughly ]how much (would|does) {qty} (work out to|come out as) in {to}",
        "my (scale|measuring jug|ruler) only does {to}, (what's|how much is) {qty}",
        "recalculate {qty} (in|as) {to}",
    ],
    "set_volume": [
        "(could|would) you (take|put) the <volume> (to|at) {pct} percent",
        "(my headphones are in|I'm wearing earbuds|it's late), (bring|set) the <volume> [down ]to {pct}",
        "{pct} on the dial", ("(pump|juice) it up to the max", {"level": 100}),
        "if it's not a bother, (put|set) the <volume> (at|to) {pct} percent",
        ("(can|could) you (shut|turn) the (sound|audio) off completely", {"level": 0}),
        "I can (barely|hardly) hear (this|the music|anything), (take|bump) it up to {pct}",
        ("(drop|take) the <volume> [down ]to nothing", {"level": 0}),
    ],
    "set_do_not_disturb": [
        ("(could|would) you (put|switch) me on <dnd>", DND_ON),
        ("I'm (about to give a talk|sitting an exam|at the cinema), (shush|quiet) my phone", DND_ON),
        ("<dnd> until I say otherwise", DND_ON), ("no (pings|buzzing) for a (bit|while), yeah", DND_ON),
        ("would you kindly (switch|turn) <dnd> back off", DND_OFF),
        ("(can|could) my (calls|notifications) come through (again|now)", DND_OFF),
        ("(class|the movie|the meeting) (just ended|is over), (bring|put) my (notifications|alerts) back", DND_OFF),
        ("(ditch|drop) the <dnd>", DND_OFF),
    ],
    "add_to_shopping_list": [
        "(could|would) you (slip|pop) {items} onto the <shopping>",
        "(I'm|we're) having (guests|friends) over (this weekend|on saturday), [so ](get|add) {items} on the <shopping>",
        "to buy: {items}", "(bung|slap) {items} on the list",
        "would it be possible to (add|put) {items} (on|to) the <shopping>",
        "(can|could) we (get|add) {items} for the next (shop|trip to the store)",
        "the fridge is (looking|pretty) empty, we (need|could use) {items}",
        "(add|include) {items} (in|on) this week's (shop|grocery order)",
    ],
    "get_news": [
        "(could|would) you (pull up|find) the (latest|newest) headlines (on|about) {topic}",
        "I've got (a few minutes|five minutes) (before work|on the train), (run|read) me (the|some) <news>",
        "headlines, {topic} only", "(spill|dish) the latest on {topic}",
        "I'd like a (short|brief) (summary|overview) of today's <news>",
        "has anything (happened|come up) with {topic} (recently|this week)",
        "I haven't (checked|looked at) the <news> (all week|in days), what's (new|going on) with {topic}",
        "(bring|show) me (coverage|reporting) (on|of) {topic}",
    ],
    "translate_text": [
        "(could|would) you help me (phrase|word) {phrase} in {lang}",
        "I'm (travelling|going) somewhere they speak {lang}, how (do|would) I say {phrase} (there|over there)",
        "quick translation, {lang}: {phrase}", "{phrase}, but (make it|say it) {lang}",
        "I'd be grateful for a {lang} translation of {phrase}",
        "what's the (proper|correct) {lang} (wording|phrasing) for {phrase}",
        "I want to write {phrase} to my {lang}-speaking (friend|colleague), how (would|does) that go",
        "interpret {phrase} [for me ]in {lang}",
    ],
    "lock_door": [
        ("(could|would) you double-check [that ]the {door} is locked", LOCK),
        ("(the delivery guy|my sister|the babysitter) [just ]arrived, buzz (him|her|them) in at the {door}", UNLOCK),
        ("{door}, (lock|bolt) (it|up)", LOCK), ("(lock|seal) the {door} up tight", LOCK),
        ("would you kindly unlock the {door}", UNLOCK),
        ("is the {door} [still ]locked? (I need|I want) it open", UNLOCK),
        ("(someone|a guest) (is|will be) (waiting|coming) (at|to) the {door}, they (need|will need) to get in", UNLOCK),
        ("(it's|it is) (late|getting dark), (secure|bolt) the {door} for the night", LOCK),
    ],
}

# Openers, endings and connectors (datagen.FILLER classes, as PREFIXES / SUFFIXES /
# CONNECTORS); offset 4 of those lists held 4, 4 and 6.
VAL_PREFIXES = ["<hi>, do you think you could ", "<hi> <name>, I was wondering if you could ",
                "sorry to bother you, but ", "<name>, would it be possible to ", "<hi>, when you get a moment, ",
                "okay <name>, here's what I need: "]
VAL_SUFFIXES = [" when you've got a minute", ", no rush", ", that'd be great", " if that's alright <thanks>",
                ", I'd appreciate it"]
VAL_CONNECTORS = [" and when that's done ", ". After you do that, ", ", then once that's sorted ", "; second thing, ",
                  " and following that ", ", and after you're done ", ". Oh, and while I remember, "]

# Chat phrasings, in the formats of replies.ARITH_TEMPLATES, SMALLTALK (keyed by reply)
# and FACTS (one phrasing per reply).
VAL_ARITH = {
    "+": ["if I add {a} to {b}, what do I get", "could you add {a} and {b} for me", "{a} plus {b} makes how much",
          "what's the total when you add {a} and {b}"],
    "-": ["if I subtract {b} from {a}, what's left", "could you take {b} from {a} for me",
          "{a} take off {b} makes how much", "how much is left when {b} is taken from {a}"],
    "*": ["if I multiply {a} by {b}, what do I get", "could you multiply {a} and {b} for me",
          "{a} lots of {b} makes how much", "what do {a} times {b} make"],
}
VAL_SMALLTALK = {
    "Hello! How can I help you today?": ["heya", "hello, anybody there?", "oh hi"],
    "You're welcome! Anything else?": ["thanks so much for that", "lovely, cheers", "brilliant, thank you"],
    "I'm doing well, thanks for asking. What can I do for you?": ["you keeping well?", "how's everything on your end",
                                                                  "how are you getting on"],
    "I'm a small on-device assistant. I can use tools on your phone and home, and answer simple questions.":
        ["are you a bot or a person", "what do people call you", "so who's this"],
    "I can set alarms, timers and reminders, send messages, control lights and more, using the tools I'm given. "
    "I can also do simple math.": ["what sort of things can you help with", "what are my options with you",
                                   "give me an idea of what you can do"],
    "Goodbye! Have a great day.": ["that's it from me, bye", "take care, bye", "until next time"],
}
VAL_FACTS = {
    "There are 7 days in a week.": "a week is how many days long",
    "There are 24 hours in a day.": "how long is a day in hours",
    "An hour has 60 minutes.": "how long is an hour in minutes",
    "There are 12 months in a year.": "a year is made of how many months",
    "Water boils at 100 degrees Celsius at sea level.": "at how many degrees does water start to boil",
    "Water freezes at 0 degrees Celsius.": "at how many degrees does water turn to ice",
    "Jupiter is the largest planet in the solar system.": "out of all the planets, which is biggest",
    "There are seven continents.": "the world has how many continents",
    "On a clear day the sky looks blue, because air scatters blue light the most.": "what colour is the sky normally",
    "A spider has eight legs.": "a spider walks on how many legs",
    "The Sun is the closest star to Earth.": "which star are we nearest to",
    "A minute has 60 seconds.": "how long is a minute in seconds",
}
