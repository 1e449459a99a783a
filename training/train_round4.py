"""Round 4 of training-only material (pattern syntax: phrasing.py).

Written from the KINDS of the 246 misses of the stage-17 model on two own draws of the
fresh validation split (1600 requests, seeds 5 and 6; never test output), in new
wordings: no surface equals a validation or test surface, even with fillers stripped
(tests/test_training_round4.py). Merged like round 3: ROUND4 into train_patterns.TRAIN_ONLY,
STRESS4 / STRESS4_ITEMS into train_entities, the openers / connectors into datagen's
TRAIN_PREFIXES / TRAIN_CONNECTORS and the chat phrasings into replies' TRAIN_* lists.
The kinds, with their share of the misses:
* SPANS (~134: 107 with the right tools but a wrong value, 27 an argument too many or
  too few): a word of the wording glued onto a copied value ("bung soda", "lemme get" as
  a timer label, "here jordan kizobith", "The Entrance stuck", "the economy only", "the
  photos is locked"), or the value's first letter changed on unfamiliar words. Here:
  slang verbs and openers right before a value ("chuck", "hit up", "whack", "lemme have"),
  words right after one ("only", "there", "is locked", "for the night", "on loop"),
  values after " - " and "as", and label-free timers / alarms behind odd verbs;
* TOOLS (~47: 28 wrong tools, 19 no call at all): unfamiliar verbs and indirect wordings
  ("see what comes up for", "direct me to", "let's try if X picks up", "on the blower",
  a weather adjective taken for a place). Here: more verbs for search, directions, calls,
  conversions, the thermostat and the shopping list, and weather adjectives with no place;
* POLARITY (17): "buzz in" / "needs to get in" is unlock, "calls come through" and
  "ditch" are do-not-disturb OFF, "douse" / "shut down" lamps are off, "shut the sound
  off" is level 0. Here: more of each, both ways;
* MULTI (8 requests short of a call, and connectors glued into the next value, "sorted
  lunch with Laura"): fresh connectors and openers, and values that hold a joining word.
Refusals (21 out-of-scope, 10 missing-tool) and chat (9) get a few chat phrasings only.
"""
from __future__ import annotations

from .templates import DND_OFF, DND_ON, LOCK, OFF, ON, UNLOCK

ROUND4: dict[str, list] = {
    "set_timer": [
        "(gimme|give me) a {dur} <timer>[ (right now|real quick)]", "(lemme|let me) have {dur} on a <timer>",
        "(hook|set) me up with {dur} on the clock", "(I'm|we're) (stretching|resting|steeping tea), (run|give me) {dur}",
        "(rustle up|sort me out) a <timer>: {dur}", "{dur} and then a beep, (ta|thanks)",
        "(pop|stick) {dur} on the <timer>", "(mind|watch) {dur} for me, no (label|name)",
        "(the|my) {label} needs {dur} - <timer> (please|for it)", "<timer> (tagged|badged) as {label}: {dur}",
    ],
    "set_alarm": [
        "(rig|fix) up (a|an) <alarm> for {time}", "(lemme|let me) have (a|an) <alarm> at {time}",
        "(I've got|there's) an early (flight|shift|train), I (need|have) to be up at {time}",
        "(gimme|give me) a (buzz|ring) at {time} to wake me", "<alarm> at {time}; (tag|badge) it as {label}",
        "{time} is when I (need|want) to (get up|be awake)", "(slot|wedge) (a|an) <alarm> in at {time}",
    ],
    "create_reminder": [
        "{task} - (don't let me forget|make sure I remember) {day}", "(lemme|let me) have a reminder {day}: {task}",
        "(gotta|got to) {task} {day}, (don't let me forget|keep me on it)",
        "(chuck|stick|pop) a reminder in for {time}: {task}", "{task} by {time} - (shout|holler) at me",
        "the thing is, I (must|have to) {task} {day}, (nudge|poke) me",
        "{day} I (absolutely|really) (must|have to) {task}, (ping|nudge) me",
        "(set|fix) up a nudge for {time} (that says|reading) {task}",
    ],
    "send_message": [
        "hit up {who} (over|by) text: {msg}", "(fling|ping) {who} a (quick |short )(text|message) - {msg}",
        "(nudge|poke) {who} with a (text|message) that (goes|reads) {msg}",
        "(holler at|give a shout to) {who} by text, (tell them|say) {msg}",
        "(text|message) for {who} - {msg}[, send it]", "(relay|pass on) these words to {who} by text: {msg}",
        "(here's|this is) what (my|the) text to {who} (should say|says): {msg}", "(get|send) word to {who} by text that {msg}",
    ],
    "make_call": [
        "(fancy giving|could we give) {who} a (bell|tinkle)", "(check|find out) whether {who} (answers|is free to talk) on the phone",
        "(have a go at|attempt) (ringing|calling|phoning) {who}", "(get hold of|reach) {who} on the phone (for me|now)",
        "hop on a call with {who}", "(hook|patch) me through to {who}[ on the phone]",
        "{who} - (dial|ring) (them|that number) (now|for me)", "(let's|we should) (buzz|ring) {who} (up|back)",
    ],
    "create_event": [
        "(pencil|ink) {title} in {day} at {time}", "{title} - {day} at {time} - (on|in) the <calendar> (please|it goes)",
        "(pop|chalk) me down for {title} {day} at {time}",
        "(there's|we have) {title} {day} at {time}, (save|enter) it (in|on) my <calendar>",
        "{day} at {time} I've got {title}, (log|enter) that", "(squeeze|fit) {title} in {day} at {time}[ at {place}]",
        "(an|new) entry (named|titled) {title}, {day} at {time}",
        "(block out|reserve) time {day} at {time} in my <calendar> for {title}",
    ],
    "web_search": [
        "(rummage|poke) around on the (web|net) (for|about) {q}", "what's the (internet|net) got to say about {q}",
        "{q}: (run|put) (that|it) through a search engine", "(trawl|comb) the (web|internet) for {q}",
        "(fire off|kick off) a (web search|lookup) on {q}", "(I'm|I've been) (wondering|curious) about {q}, (hit|check) the web",
        "(pull|get) me (results|info) on {q} from the web", "{q} - what (does|can) the web (say|tell me)",
        "(fish|scout) about online for {q}", "(see|check) what the web (has|turns up) on {q}",
    ],
    "get_directions": [
        "(steer|pilot) me [over ]to {dest}[ {mode}]", "(aim|orient) me toward {dest}",
        "what's the (quickest|easiest) path (to|over to) {dest}[ {mode}]", "(lead|usher) me to {dest}",
        "I (need|want) to (get|head) over to {dest}, which way (is it|do I go)",
        "(I'm|we're) lost, (get|take) me to {dest}[ {mode}]", "(map|chart) [out ](a route|the way) to {dest}",
        "(sort|work) out a way to {dest} {mode}",
    ],
    "translate_text": [
        "render {phrase} as {lang} (for me|please)", "{phrase} - in {lang}, (please|thanks)",
        "(gimme|lend me) a {lang} take on {phrase}", "(decode|interpret|translate) this into {lang} for me: {phrase}",
        "(in|into) {lang} please: {phrase}",
        "my (trip|holiday) is to a place where {lang} is spoken, so what's {phrase} in their language",
        "my {lang}-speaking (neighbour|pen pal) needs to hear {phrase}, (translate|render) it",
        "{lang} (version|wording) of {phrase}[ please]",
    ],
    "play_music": [
        "{song} has been on loop in my head, (play|put on) that", "the song is {song} and the (artist|band) is {artist}",
        "(dig out|find me) {song} (by|from) {artist} and play it", "(crank|blare) out {song} (by|from) {artist}",
        "{artist} (did|has) a (song|track) called {song}, (play|put on) that",
        "(stick|whack) on (the|my) {playlist} playlist", "(in the mood for|fancy) some {artist}, (play|stick) (them|it) on",
        "(the|a) (track|song) named {song}, (put it on|play it) (now|please)",
    ],
    "get_news": [
        "just {topic} (stories|news) (please|and nothing else)", "(news|updates) on {topic} from (the past week|the last few days|today)",
        "(stories|news) (to do with|involving) {topic}", "(serve|bring) up (the|today's) <news> (for me|please)",
        "(while|as) I (eat breakfast|get dressed), (read|play) (the|some) <news>",
        "(I've got|I have) (ten minutes|a moment) to spare, (play|read) the <news>",
        "(run|read) through the <news> (for me|with me)", "{topic} (stories|news) (only|and nothing else) (please|today)",
    ],
    "set_lights": [
        ("(nobody's|no one is) in the {room} (anymore|now), the <lights> can go off", OFF),
        ("(it's|it is) (pitch black|too dark) in the {room}, (sort|fix) the <lights>", ON),
        ("snuff out the {room} <lights>", OFF), ("the {room} <lights> (can|should) (go|be) off (now|for the night)", OFF),
        ("(wasting|burning) (money|energy) on the {room} <lights>, (cut|kill) them", OFF),
        ("(give|get) me {pct} percent (light|brightness) in the {room}", ON),
        ("(dim|bring) the {room} (down|up) to {pct} percent", ON),
        ("(lights|lamps) (up|on) in the {room} (please|for me)", ON),
    ],
    "lock_door": [
        ("(let|get) (my friend|the plumber|the cleaner|grandma) in (through|at) the {door}", UNLOCK),
        ("(the plumber|a courier|my neighbour) is here at the {door}, let (them|him|her) in", UNLOCK),
        ("(open up|pop open) the {door} for (the guests|my visitor|mum)", UNLOCK),
        ("(confirm|make certain) the {door} (is|has been) locked (for the night|before bed)", LOCK),
        ("{door} - (lock|bolt) (it|that) (before bed|for the night)", LOCK),
        ("nobody should get in through the {door}, lock it", LOCK),
        ("(I'm|we're) expecting (a delivery|guests) at the {door}, (unlock|open) it", UNLOCK),
        ("(has|have) the {door} been locked? if not, (lock|bolt) it", LOCK),
    ],
    "set_do_not_disturb": [
        ("(let|allow) (my|all) (calls|notifications|texts) (through|to reach me) again", DND_OFF),
        ("(I'm|I am) (free|done|back) now, (people|folks) can (reach|call) me again", DND_OFF),
        ("(I'd love|I want) my (calls|notifications) to (reach|find) me again", DND_OFF),
        ("(scrap|get rid of) <dnd>, I'm (available|reachable) again", DND_OFF),
        ("(un-silence|un-hush) my (phone|notifications)", DND_OFF),
        ("(hush|silence) my phone (for the film|during the exam|through the talk)", DND_ON),
        ("(I'm|we're) (in a lecture|at a funeral|in the library), (no|zero) (noise|buzzing) from my phone", DND_ON),
        ("(keep|hold) my phone (quiet|hushed) (till|until) I'm out of (the meeting|class|the cinema)", DND_ON),
    ],
    "set_volume": [
        ("zero out the (speaker|sound|audio) (entirely|totally)", {"level": 0}),
        ("(knock|turn) the <volume> (right|all the way) down to zero", {"level": 0}),
        ("(whack|push) the <volume> (right|all the way) up", {"level": 100}),
        ("(loudest|highest) (setting|level) on the speaker[ please]", {"level": 100}),
        "(put|set) the <volume> knob (at|on) {pct}", "(gimme|give me) {pct} percent <volume>",
        "(make|have) the <volume> {pct} on a scale of (100|a hundred)",
    ],
    "set_thermostat": [
        "(indoor|room|home) (temp|temperature) to {temp}[ please]", "(make|get) it {temp} (indoors|inside the house)",
        "(warm|heat) the flat (up|through) to {temp}", "(chill|cool) the (flat|place) down to {temp}",
        "{temp} (inside|indoors), (please|ta)",
    ],
    "convert_units": [
        "(rework|restate) {qty} (in|as) {to}", "what do I get if I turn {qty} into {to}",
        "(sum|work) out {qty} in {to}", "{qty} would be how many {to} (exactly|then)", "{qty} (in|to) {to}, (roughly|approximately)",
    ],
    "add_to_shopping_list": [
        "(whack|toss|lob) {items} (onto|into) (our|the family) <shopping>", "(we're|I'm) (short on|low on|clean out of) {items}",
        "(on|for) the next (supermarket|store) run: {items}", "(we|I) still (need|have) to (buy|pick up) {items}, (list|note) (it|them)",
        "[the ](cupboard|pantry)'s (bare|empty), (we need|grab) {items}", "(put|pop) {items} down for the (weekly|next) shop",
    ],
    "create_note": [
        "(add|log) to my notes - {note}", "(scribble|pop) this in the (notes app|notebook): {note}",
        "{note} - (put|save) that in my notes", "(keep|hang on to) this thought for me: {note}",
    ],
    "get_weather": [
        "(will it be|is it going to be) (grim|gloomy|horrible|lovely|glorious|muggy) (out|outside) {day}",
        "{city} - how's the <weather> looking {day}", "(will {city} be|is {city} going to be) (sunny|wet|freezing|stormy) {day}",
        "(weather|forecast) (check|update) for {city}",
    ],
    "get_calendar": [
        "(how|what) (does|will) (the|my) <calendar> (shape up|look) {day}", "(am I|are we) tied up {day}",
    ],
}

# Boundary-stress values (merged into train_entities.STRESS like STRESS3; training only,
# same share). Tasks that open with a tool verb ("call", "text", "play", "lock"), titles
# and queries that open with function words (of / as / when / the) or hold "mark" / "name",
# phrases that open with here / there / do, messages and notes that end on a time word or
# hold a joining word ("and", "then"), and rooms, doors and places with odd edges.
def _split(text: str) -> list[str]:
    return [w.strip() for w in text.strip().split("|") if w.strip()]


STRESS4: dict[str, list[str]] = {
    "task": _split("""
text Jo the new address|play the lottery numbers for Dad|lock up the shed at the allotment|
do the school run for Lou|name the new puppy|mark the exam papers|remind Jo about the spare key|
call the garage about the brakes
"""),
    "title": _split("""
of mice and men book club|as you like it rehearsal|when harry met sally screening|name day lunch for Grandma|
the big quiz night|show and tell at school|lock-in at the Crown
"""),
    "label": _split("""
the second batch|of the rice|for the kids' bath|lemon tart
"""),
    "msg": _split("""
the plumber is due at noon|see you at the gate tomorrow morning|got your text|pick me up at half six|
dinner is at eight, not seven|I'm outside and then we can go
"""),
    "note": _split("""
the gate code is 2291 and the alarm code is 8080|parking: level 3, then follow the lift signs|
the vet opens at nine on Saturday
"""),
    "q": _split("""
of mice and men summary|the tallest tree in the world|when the next eclipse is|name ideas for a tortoise|
tomorrow's tide times in Dover
"""),
    "topic": _split("""
the cost of living|the housing market|the transfer window
"""),
    "phrase": _split("""
here is my passport|there is no hot water|do you have a table for two|please speak slowly
"""),
    "who": _split("""
Uncle Theo|Dr. Reyes
"""),
    "room": _split("""
kids' room|room over the garage|downstairs loo
"""),
    "door": _split("""
side door by the bins|gate to the allotment|door to the cellar
"""),
    "city": _split("""
Isle of Skye|Le Havre|Stoke-on-Trent
"""),
}
STRESS4_ITEMS = _split("""
kitchen roll|ice lollies|a tub of hummus|spring onions|rocket for the salad
""")

# Train-only openers and connectors (multi kind): the model glued fresh connectors into
# the next value and dropped calls after them. None is a dealt or validation one.
ROUND4_PREFIXES = ["<hi>, got a sec? ", "<name>, any chance you could ", "okay, here's the thing: ",
                   "right, listen: ", "<hi>, can I ask you to ", "so basically, "]
ROUND4_CONNECTORS = [" and once you've done that ", ". With that out of the way, ", ", then when you're through ",
                     "; next thing, ", " and after that's finished ", ", and straight after ", ". Oh, before I forget, ",
                     ". Also, while I think of it, ", ", and once that's finished ", ". Moving on, ",
                     " and when you're finished ", "; item two, "]

# Train-only chat phrasings (keyed like replies.TRAIN_SMALLTALK / TRAIN_ARITH): greetings
# and thanks that were taken for a destination or a contact, sums with "if I".
ROUND4_SMALLTALK = {
    "Hello! How can I help you today?": ["hello? is this thing on", "hiya, you there?", "anyone home?"],
    "You're welcome! Anything else?": ["superb, thanks a lot", "great stuff, thank you", "fantastic, ta"],
}
ROUND4_ARITH = {
    "+": ["suppose I add {a} to {b}, what's the answer", "{a} and {b} together come to what"],
    "-": ["suppose I take {b} away from {a}, what's the answer"],
    "*": ["suppose I multiply {a} by {b}, what's the answer"],
}
