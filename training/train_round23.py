"""Rounds 2 and 3 of training-only material (pattern syntax: phrasing.py).

Split out of train_patterns.py, which appends ROUND2 and then ROUND3 to TRAIN_ONLY in that
order (the order fixes what datagen draws, so generated data is unchanged by the split).
"""
from __future__ import annotations

from .templates import DND_OFF, DND_ON, LOCK, OFF, ON, UNLOCK


# Round 2 (appended to TRAIN_ONLY by train_patterns): written from the KINDS of validation misses of
# two candidate models (never from test output, never copying a held-out wording). Each
# kind gets several new shapes that teach the same skill:
# * WRAPPED: a value introduced by a word that is not part of it ("an entry titled X",
#   "a timer tagged X", "jot down that X", "if I forget to X ... remind me"), or followed by
#   a filler ("for me", "when you get a chance", a day word) that must stay outside it;
# * VERBS: unusual verbs and nouns that still name a tool ("fetch articles on X",
#   "what's the best way to reach X", "where am I supposed to be today");
# * NO_OPTIONAL: requests for weather / news with no location or topic whose filler words
#   ("check", "miss", "caught") look like one, so an optional argument is only set when said;
# * EXTREMES: all-the-way / as loud as it goes / needs more light, both directions.
ROUND2: dict[str, list] = {
    "set_alarm": [
        "(a|an) <alarm> with the (note|title) {label}, (at|for) {time}", "{label} <alarm>, {time}[ for me]",
        "(wake|get) me [up ]at {time}, (the|my) (label|reason) is {label}",
        "(I|we) (have|start) {label} (at dawn|at sunrise|really early), so (a|an) <alarm> at {time} (please|thanks)",
        "(need|want) to be up at {time} (for|because of) {label}", "(rouse|wake) me at {time}, not a minute later",
        "{time} wake-up (for|before) {label}, (please|thanks)", "(drag|have) me out of bed (by|at) {time}, (please|no snoozing)",
    ],
    "set_timer": [
        "{dur}, (on|for) a <timer> (tagged|marked) {label}", "(the|my) {label} (needs|gets) a {dur} <timer>",
        "(start|run) a <timer> (tagged|marked) {label} (for|lasting) {dur}",
        "{dur} <timer>, (tag|mark|name) it {label}", "(tag|mark) a {dur} <timer> as {label}",
        "<timer> with the (label|name|title) {label}, {dur} (long|total)",
        "(ping|buzz) me (after|once) {dur} (have|has) passed", "{dur} and [then ](ping|buzz) me, (that's|it's) for the {label}",
    ],
    "create_reminder": [
        "I (don't|do not) want to forget to {task} {day}, (set|make) a reminder",
        "(missing|forgetting) (this|it) would be bad: {task} {day}, (remind|nudge) me",
        "(keep|stop) me from forgetting to {task} {day}", "(make|set) a reminder to {task}, (day|when): {day}",
        "(nudge|ping) me (about this|with this): {task} {day}",
        "I (need|could use) a (memory aid|heads-up) at {time}: {task}",
        "(I keep forgetting|I always forget) to {task}, (nudge|ping) me about it {day}",
        "(remind|nudge) me to {task} {day} (for me|when you can|if you can)",
        "(something|a thing) to remember {day}: {task}", "(mind reminding|would you remind) me at {time} that I (must|have to) {task}",
        "(I must not|I can't) forget to {task} {day}, (a reminder|remind me) (please|thanks)",
        "(it's|it is) on me to {task} {day}, (remind|nudge) me (then|that day)",
    ],
    "send_message": [
        "{msg} (needs to go|should go|has to go) to {who} (by text|as a text)",
        "(okay|so) (this|here) goes to {who}: {msg}",
        "the (text|message) (to|for) {who} (should|must) (say|read) {msg}",
        "(send|text) {who} (these|the) words: {msg}", "(write to|text) {who}: {msg} (when you get a chance|if you can)",
        "(inform|notify) {who} (by|over) text that {msg}", "(pass|send) (this|a note) along to {who} by text: {msg}",
    ],
    "make_call": [
        "[please ](get|put) me through to {who} (now|on the phone)", "(could|can) I get {who} on the (phone|line)",
        "(is it|would it be) possible to (call|ring) {who} (right now|today|this minute)",
        "(I'd appreciate|it'd help) (a call|you calling) to {who}",
        "(phone|ring|call) {who} [up ](when you get a chance|as soon as you can)",
        "(patch|hook) me [up ](to|with) {who} (by phone|on a call)", "(place|make) a [phone ]call (to|for) {who} (please|now|for me)",
        "(set up|open) a (voice|phone) call with {who} (now|please)",
    ],
    "create_event": [
        "{day} at {time}, (an|one) (event|entry) titled {title}",
        "(log|enter) something (titled|named|called) {title} (for|at) {time} {day}",
        "the (event|entry) is (titled|named|called) {title}; (put|add) it in for {time} {day}",
        "(I've|I have) a (thing|meeting) (titled|named|called) {title} {day} at {time}, (add|log) it",
        "{title} happens {day} at {time}, (log|enter) (that|it) (in|on) my <calendar>[ for me]",
        "(my|the) <calendar> (needs|should have) {title} {day} at {time}",
        "(keep|save) {time} {day} free (for|because of) {title}",
        "(schedule|slot in) {title} at {place} {day} at {time} (for me|if you can)",
        "(write|mark) {title} down (in|on) (my|the) <calendar> for {time} {day}, (thanks|cheers)",
    ],
    "get_calendar": [
        "(tell|show) me where I'm (supposed|meant) to be {day}", "where am I (expected|due) {day}",
        "(what|which) places (do I have to|must I) (go to|be at) {day}", "what am I (committed to|signed up for) {day}",
        "(who|what) (am I meeting|have I got planned) {day}, (if anything|anything at all)",
        "(is|will) my <calendar> [be ](empty|full|packed) {day} or not",
        "(any|got any) plans {day}[ for me]", "what's (lined up|in store) for me {day}",
        "(is there|have I got) anything scheduled for me {day}", "(run|walk) me through (my|the) day {day}",
    ],
    "get_weather": [
        "(quick|a) (look|glance) at the <weather>[ please]", "(give me|read me) (a|the) (weather|forecast) (report|rundown)",
        "what's it doing outside", "(how's|what's) the sky looking",
        "(about to|just about to) (leave the house|step out), what's the <weather> doing",
        "(rain|a downpour) would ruin my (walk|picnic|run) {day}, (will it|is it going to) rain",
        "(should I|do I) (wear|take) (a jacket|a coat|boots) {day}", "(is it|will it be) (cold|warm|hot|sunny) out {day}",
        "(umbrella|coat|jacket) weather in {city} {day}?",
        "(have a look at|peek at) today's <weather> for me", "<weather>, (please|now|thanks)",
        "(what's|how's) the <weather> (where I am|here|around here)", "(any|expecting) (rain|snow|storms) {day}",
        "(forecast|weather) in {city} (for me|when you can)", "(hot|cold|wet) (day|one) {day}?",
    ],
    "play_music": [
        "(I'd|we'd) (love|like) to hear {song} by {artist}", "(time for|give me a spin of) {song} by {artist}",
        "(how about|what about) (some|a little) {song} by {artist}", "(I'm|we're) in the mood for {song} by {artist}",
        "(I'd enjoy|I could go for) (some|a bit of) {artist} (now|right now|tonight)",
        "(spin|stream) {song} (by|from) {artist}", "(spin|stream) (something|some tracks) by {artist}",
        "(find|cue) the (song|track) {song} and (start|play) it",
    ],
    "set_lights": [
        ("the {room} (is lacking|is short on) light", ON), ("I (can barely|can hardly) see in the {room}", ON),
        ("(it's|it is) (too dim|gloomy|way too dark) in the {room} (for me|right now)", ON),
        ("the {room} is (too dim|gloomy|dark)", ON), ("(brighten|light) up the {room} (a lot|for me|when you can)", ON),
        ("(more|some) light (in|for) the {room}", ON), ("(give|get) the {room} some light", ON),
        ("the {room} (doesn't need|can do without) [any ]light (now|anymore|tonight)", OFF),
        ("(darken|make dark) the {room} (for me|now|for the night)", OFF), ("(no|zero) light in the {room} (now|tonight|please)", OFF),
        ("(plunge|put) the {room} (into|in) darkness", OFF),
    ],
    "set_thermostat": [
        "[please ](make|get) it {temp} in here (for me|tonight)", "(heat|warm) things (up|back up) until it's {temp}",
        "{temp} would be (nice|better|perfect) in here", "(so|really) (chilly|stuffy) in here, (aim|go) for {temp} (please|instead)",
        "(I'm|we're) (cold|roasting|sweating), (bump|take) it to {temp}", "(change|move) it to {temp}, (it's|it is) (too warm|too chilly)",
        "(raise|lower) the (heat|temperature) (until|till) it reads {temp}",
    ],
    "web_search": [
        "(fetch|grab) [some ](web pages|links) (regarding|covering) {q}",
        "(show|open) [me ]what (articles|web pages) (exist|there are) (about|on) {q}",
        "(load|surface) (whatever|anything) (the web|the internet) has (on|about) {q}",
        "(I'd like|I want) (to read|to see) (articles|pages|stuff) (on|about) {q}",
        "(look for|hunt down) (articles|pages) (about|on) {q} (when you get a chance|if you can)",
        "(research|read up on) {q} (when you get a chance|if you can|on the web)",
        "(check|see) what the (internet|web) says about {q}",
        "(information|info) (on|about) {q}, (please|from the web)", "(do|run) a (search|google) on {q} (for me|quickly)",
        "(anything|something) online about {q}?", "(info|facts) (for|on) {q}, (from|off) the (web|internet)",
        "(browse|trawl) the (web|internet) and (bring|get) me (pages|links) on {q}",
    ],
    "create_note": [
        "(put|get) it in writing that {note}", "(make a|take) <note> of the fact that {note}",
        "(save|keep) a <note> that {note}", "(make|add) a <note>: {note} (for me|please)",
        "(a|my) <note> (should|must) read: {note}", "(save|store) this (in|as) a <note>: {note}",
        "(my|a) (memo|note) (here|now): {note}", "(log|capture) (this|a thought) in my notes: {note}",
    ],
    "get_directions": [
        "what's the (best|easiest|quickest) way to reach {dest}", "(I need|I want) to reach {dest} {mode}, (which way|how)",
        "reaching {dest}, how do I (do it|manage that)", "(help|get) me (reach|get to) {dest} {mode}",
        "(which|what) way (is|to) {dest} from here", "(chart|work out) (a|the) (course|path) to {dest} {mode}",
        "(steer|point) me (towards|toward) {dest}, (which way|what direction)",
        "(my|the) (destination|goal) is {dest}, (lead|guide) the way",
        "(whereabouts|where exactly) is {dest}? (show|walk) me (there|over)",
        "(how far|how long) (to|until) {dest}? (show|give) me the route",
        "(I'm|we're) trying to (reach|find) {dest}, (directions|route) (please|now)",
        "(I'd like|we need) (a route|the way) [over ]to {dest} {mode}",
    ],
    "set_volume": [
        ("(pump|push) (it|the <volume>) up as far as it goes", {"level": 100}),
        ("(as loud as (it goes|possible)|the loudest it goes) (please|for me|now)", {"level": 100}),
        ("(I want|make) (it|the <volume>) as loud as (it gets|you can)", {"level": 100}),
        ("(<volume>|sound) at (maximum|its highest) (please|now)", {"level": 100}),
        ("(drop|take) the <volume> as low as it (goes|can go)", {"level": 0}),
        ("(silence|mute) (the|my) (phone|speaker|tv) (completely|fully)", {"level": 0}),
        ("(as quiet as (it goes|possible)|no sound whatsoever) (please|for me|now)", {"level": 0}),
        "(make|have) the <volume> {pct} (for me|when you can)", "(go|switch) to {pct} [percent ]<volume>",
        "(bump|nudge) it (up|down) to {pct}, (it's|it is) too (loud|quiet|soft)",
    ],
    "set_do_not_disturb": [
        ("(I need|I want) [some ](peace and quiet|quiet time|no interruptions) (for a while|this afternoon|until dinner)", DND_ON),
        ("(no|zero) (disturbances|interruptions) (for the next while|until I say so|for a bit)", DND_ON),
        ("(going|off) to sleep now, (no|zero) (alerts|pings) until morning", DND_ON),
        ("(I'd rather|I prefer) not [to ]be (bothered|interrupted) (now|for a while)", DND_ON),
        ("(start|begin) [my ](quiet|silent) (time|hours) (now|please)", DND_ON),
        ("(I'm|I am) (back|around) now, notifications on", DND_OFF),
        ("(people|anyone) can (reach|bother) me again", DND_OFF),
        ("(block|stop) [all ](calls|alerts) (while I|so I can) (sleep|focus|work)", DND_ON),
    ],
    "add_to_shopping_list": [
        "{items} (ran|has run|have run) out (again|at home), (list|add) (it|them)",
        "(stick|throw) {items} on the <shopping> (for me|when you can|too)",
        "(shopping|groceries) (to do|to get): {items}, (note|add) (it|them) on the list",
        "(the|our) list (should|must) (have|include) {items}",
    ],
    "get_news": [
        "(catch|fill) me up on (the|today's) <news>", "(anything|something) (big|important) happen (today|overnight)",
        "what's [been ]going on in the world (today|lately|this week)",
        "(I've been|I was) (offline|away) all day, what (happened|went on) in the <news>",
        "(brief|summary|rundown) of the (headlines|<news>)[ please]", "<news> (rundown|roundup|briefing)[ please]",
        "{topic} - (any|got any) (updates|news)", "(updates|news) re {topic}[ please]",
        "(read|tell) me today's (stories|reports) (about|on) {topic}[ when you can]",
        "what's the (word|buzz) (on|about) {topic} (today|lately|this week)",
        "{topic}, (anything happening|any updates)", "(give me|play) (the|a) (daily|morning) (briefing|news)",
    ],
    "translate_text": [
        "(turn|change) this into {lang} for me: {phrase}", "{phrase} (turned|changed) into {lang}[ please]",
        "(switch|flip) the (words|sentence) {phrase} over to {lang}", "(how|what)'s {phrase} (in|into) {lang} (for me|please)",
    ],
    "lock_door": [
        ("(make sure|see that) the {door} is (bolted|secure)", LOCK), ("(unlatch|release) the {door} (for me|please)", UNLOCK),
        ("(secure|seal) the {door} (for me|when you get a chance)", LOCK),
    ],
}



# Round 3 (appended to TRAIN_ONLY by train_patterns): from the kinds of the remaining validation misses
# of two candidates (never test output, never a held-out wording or a one-word swap of one):
# * LABEL-FREE TIMERS: verbs and gerunds around the duration ("count", "run a clock",
#   "keep time") with no label, and labels only where a word marks them;
# * POLARITY: negative-worded do-not-disturb requests that mean ON ("being bothered is the
#   last thing I want", "mute all alerts") and OFF; light with "let"/"fill" meaning ON;
#   "all the way up / down" volume;
# * SPANS: openers and idioms before a recipient ("send a line to X"), a phrase after
#   "convert" / "what ... is", verb-first notes, "unless I X / if I didn't X" reminders;
# * INTENTS: "have X on the line", "bring me up to speed on X", "recent articles" for news,
#   "listening to S by A", "if you have S, play it", recipes that need shopping items.
ROUND3: dict[str, list] = {
    "set_timer": [
        "(count|clock) {dur} (for me|starting now|from now)", "(run|keep) a clock (for|of) {dur}",
        "(can|could) you keep time for {dur}", "(kick off|get going) a clock for {dur}",
        "{dur}, (counting|timing) from (now|this second)", "(get|have) a clock running for {dur}[ please]",
        "(measure|track) {dur} (for me|from now on|starting now)", "(count|tick) down {dur} (and|then) (beep|ring|tell me)",
        "(I'm|we're) (timing|counting) {dur}, (go|start now)", "just {dur}, no (label|name) needed",
        "(a|one) <timer> of {dur}, (labelled|named|titled) \"{label}\"", "{dur} on a <timer> whose (name|label) is {label}",
        "(label|title): {label}. (length|duration): {dur}",
        "(a|one) {dur} <timer>; (the|its) (label|name) (is|should be) {label}",
    ],
    "set_do_not_disturb": [
        ("being (bothered|interrupted|pinged) is the last thing I (want|need) (right now|today|tonight)", DND_ON),
        ("(I'd hate|I would hate) to be (interrupted|bothered|disturbed) (right now|for the next hour|tonight)", DND_ON),
        ("(please|just) (don't|do not) let me be (bothered|interrupted|pestered) (for a while|tonight|this afternoon)", DND_ON),
        ("(I|we) (don't|do not) want (any|a single) (interruption|disturbance) (for now|tonight|this morning)", DND_ON),
        ("(keep|hold) (calls|alerts|pings) (away|at bay) (for now|until lunch|for a while)", DND_ON),
        ("(mute|suppress|pause) (all|every|incoming) (alerts|pings|calls) (for now|for a while|until I say so)", DND_ON),
        ("(pause|hold off on) (all|every one of) my (alerts|notifications) (for now|for an hour|until dinner)", DND_ON),
        ("(no|not a single) (notification|ping|buzz) (should|may) get through (for now|until dinner|tonight)", DND_ON),
        ("(put|send) my phone (into|in) (silent|quiet) mode (for now|for the night|for the meeting)", DND_ON),
        ("(I'm|I am) not to be (disturbed|bothered|interrupted) (until|before) (noon|five|dinner)", DND_ON),
        ("(nobody|no one) gets through to me (for now|until I say so|this afternoon)", DND_ON),
        ("(enter|activate) <dnd> (right now|for a while|until morning)", DND_ON),
        ("(I|we) (don't|do not) need (quiet|the silence) (anymore|any longer)", DND_OFF),
        ("(don't|do not) (block|mute|hold back) my (calls|alerts) (anymore|any longer)", DND_OFF),
        ("(there's|there is) no need to (silence|mute) my phone (now|anymore)", DND_OFF),
        ("(unpause|resume) (all|every one of) my (alerts|notifications)", DND_OFF),
        ("(I'm|I am) not (sleeping|working|busy) (now|anymore), (allow|accept) (calls|alerts) (again|now)", DND_OFF),
        ("(quit|stop) holding back my (calls|notifications|alerts)", DND_OFF),
    ],
    "set_lights": [
        ("(fill|flood) the {room} with light", ON), ("let (some|the) light into the {room}", ON),
        ("let the {room} have (some|a bit of) light", ON), ("let the {room} <lights> (come|go) on", ON),
        ("(make|get) the {room} (bright|lit|lit up) (again|please|for me)", ON),
        ("(I want|we need) (brightness|light) in the {room} (now|tonight|please)", ON),
        ("(illuminate|brighten) the {room} (please|for me|now)", ON),
        ("let the {room} go dark (now|for the night|please)", OFF),
        ("(enough|that's enough) light in the {room}, (turn|switch) it off", OFF),
        ("(no|we need no) more brightness in the {room}", OFF),
    ],
    "set_volume": [
        ("(all the way up|up to the very top) with the <volume>[ please]", {"level": 100}),
        ("the <volume> (should|needs to) go all the way (up|to the top)", {"level": 100}),
        ("the <volume> (should|needs to) go all the way down", {"level": 0}),
        ("(crank|boost) (it|the <volume>) (to the top|as high as it goes)", {"level": 100}),
        ("(jack|crank) up the <volume> (fully|completely)[ please]", {"level": 100}),
        ("(lower|drop) (it|the <volume>) all the way (down|to nothing)", {"level": 0}),
        ("(max out|maximise|maximize) the <volume>[ (please|now)]", {"level": 100}),
        ("(everything|the <volume>) at (full|maximum) (power|level) (please|now)", {"level": 100}),
    ],
    "send_message": [
        "(send|shoot) a (line|quick line) to {who}: {msg}", "(ping|buzz) {who} (with|a text with) (this|these words): {msg}",
        "(give|pass) {who} a [quick ](heads-up|shout) by text: {msg}", "(let|have) {who} hear from me by text: {msg}",
        "(a|one) (quick|short) (text|message) for {who}, (reading|which says) {msg}",
        "(be a star|help me out) and (text|message) {who}: {msg}",
        "(you know what|right then), (text|message) {who} [for me ](now|quickly): {msg}",
        "(a|one) favour: (text|message) {who} (that|saying) {msg}",
    ],
    "make_call": [
        "(put|have) {who} on the (phone|line) (for me|now|please)", "(get|bring) {who} on the phone for me",
        "(I'd like|I need) a (phone|voice) (conversation|chat) with {who}", "{who} on the phone, (please|now|quickly)",
        "(start|open) a (phone|voice) (line|connection) to {who}",
    ],
    "get_news": [
        "(fetch|pull up) the (newest|freshest) (reports|coverage|stories) (on|about) {topic}",
        "(bring|get) me up to speed on {topic}[ (please|today)]", "(brief|fill) me in on {topic} (please|today|quickly)",
        "(any|what are the) (fresh|recent) developments (on|in|with) {topic}",
        "(read out|play) (recent|the newest) (coverage|reporting) (of|on) {topic}",
        "(recent|this week's|today's) (articles|pieces) (on|about) {topic} in the news, (read them|please)",
        "(what's|what is) the newest (on|about|with) {topic}", "(catch|bring) me up on the latest (regarding|around|with) {topic}",
        "(I'd love|I'm after) (the|some) news (regarding|concerning) {topic}",
    ],
    "play_music": [
        "(I'm up for|I'd be up for) listening to {song} by {artist}", "(time to|we need to) listen to {song} (by|from) {artist}",
        "listening to {song} by {artist} (sounds good|would be nice) (right now|now)",
        "(if|in case) you have {song}, (play|start) it", "(search for|look for) {song} and play it (if you find it|if it's there)",
        "(we|I) (should|could) listen to {artist} (now|tonight|for a while)",
    ],
    "add_to_shopping_list": [
        "(cooking|baking) (something|a stew|pancakes) (later|this weekend), (so|and) (I|we) need {items} on the list",
        "for (the|a) (party|picnic|barbecue) (we'll need|I need) {items}, (add|put) (it|them) on the <shopping>",
        "(the|my) <shopping> (is missing|doesn't have|lacks) {items}, (fix that|add (it|them))",
        "(write|note) {items} (onto|on) (the|my) <shopping>[ (for me|please)]",
    ],
    "create_note": [
        "(jot|scribble) (this|it) down in my notes: {note}", "(jot|write) (a quick|a) note down: {note}",
        "(record|remember) in my notes that {note}", "(write|put) it down (somewhere|for later) that {note}",
        "(I|we) should (write|note) down that {note}", "(before I forget|so I don't forget), (add|put) (this|a line) (to|in) my notes: {note}",
        "(new|quick) (entry|line) for my notes: {note}",
    ],
    "create_reminder": [
        "(I'll be|I'm) in (trouble|hot water) (unless|if I don't make sure) I {task} {day}, (remind|nudge) me",
        "(it'd|it would) be bad if I didn't {task} {day}, (remind|ping) me",
        "if I (fail|forget) to {task} {day}, (I'm|I'll be) (toast|done for), so (remind|nudge) me",
        "unless I {task} {day} (things will go|it all goes) wrong, (remind|ping) me",
        "(a|one) reminder (at|for) {time}, (the|its) text is: {task}",
    ],
    "translate_text": [
        "(find out|look up) how (to say|you say) {phrase} in {lang}", "(tell me|say) the {lang} words for {phrase}",
        "convert {phrase} from English (to|into) {lang}", "(can|could) {phrase} be converted (to|into) {lang}",
        "(get|have) {phrase} converted (to|into) {lang}[ (for me|please)]",
        "in {lang}, (what's|what is) the (way|right way) to say {phrase}",
        "(do a|run a) {lang} (conversion|translation) (of|on) {phrase}",
    ],
    "set_alarm": [
        "{label} (is|starts) early[ tomorrow], [so ](set|make) (a|an) <alarm> for {time}",
        "(my|the) {label} (is|starts) (early|at dawn), (wake|get) me up at {time}",
    ],
}
