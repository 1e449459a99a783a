"""The verb-swap drill: a request's verb replaced by an English verb no phrasing uses.

Stage 19's misses on validation phrasings (val-val, session 28) include a class no drill
reached: an unseen verb right before a value is taken into it ("slap sponges, coffee
filters and ice cream on the list" gives the item "slap sponges", "Bug William over
text" the recipient "Bug William"). The word-noise drill (intents.word_noise) never
touches the word next to a slot, on purpose, so the model has only ever seen a few dozen
verbs there and learnt them by heart. Here one such verb of a training request is
replaced by a verb from VERBS, a list of everyday English verbs written for this drill,
of which every word that any split's phrasings, fillers or held-out entities use is
dropped (so no validation or test word trains, and the new verb is new to the model too).
The request keeps its call: the rest of the sentence must say which tool it is.

Only verbs in SWAPPABLE are replaced, only where they open a clause and take an object
("add {items} ...", "could you get me ...", not "when you get a sec"), and only in
templates whose arguments the verb does not fix (no constant arguments: "turn off", "unlock") and whose other words still hold
one of the tool's cue words (intents._is_cue), so a swapped request still names its tool.
Training only (datagen's ``swap`` share).
"""
from __future__ import annotations

import ast
import random
import re
from functools import lru_cache
from pathlib import Path

# Verbs of training phrasings that may stand right before a value or its slot phrase.
SWAPPABLE = frozenset("""
set wake get put stick program schedule start run kick fire text message send tell pass give ring connect add
create make book pencil show read check pull play bring search look find jot write save navigate guide take
convert change translate throw pop catch fill remind call phone note hear enter insert reserve stream spin cue
research browse keep store route direct steer plot map plan express calculate compute include append brief update
render email drop shoot toss fetch grab pull
""".split())

# Everyday English verbs (base forms), written for this drill.
VERBS = """
accept admire advise allow annoy answer applaud approve argue arrange attach attack attend avoid bake balance ban bang
bathe battle beam beg behave belong bless blink boast boil bolt borrow bounce bow brake branch breathe brush bubble
bump burn bury buzz carve cause challenge charge chase cheat cheer chew chop claim clap clip coach coil collect colour
comb command compare compete complain concentrate confess confuse consider contain continue copy correct cough count
cover crack crash crawl cross crush cure curl cycle damage dance decorate delay delight deliver depend describe deserve
destroy detect develop disagree discover dislike divide double doubt drag drain dream dress drip drown dry dust earn
educate employ empty encourage enjoy entertain escape examine excite excuse exercise expand expect explain explode
extend face fade fancy fasten fear fence film fit fix flap flash float flood fold follow fool force frame frighten fry
gather gaze glow glue grate grease greet grin grip groan guarantee guard guess hammer hand handle hang harm hate haunt
heal heap heat hook hop hover hug hum hunt hurry identify ignore imagine impress improve increase influence inject
injure instruct intend interrupt introduce invent invite irritate juggle jump kiss kneel knit knock knot label land
laugh launch learn lick lighten load love manage march mark marry match measure melt memorise mend milk mix moan
mourn move muddle multiply nail nest nod notice number obey object observe obtain offend offer order overflow owe own
pack paddle paint park paste pat pause peck pedal peel peep perform permit pick pinch place plant plug poke polish
possess post pour practise pray preach prefer prepare present preserve press pretend prevent print produce promise
protect provide pump punch punish push question queue race radiate reach realise receive recognise reduce reflect
refuse regret reject rejoice relax rely remain remove repair repeat replace reply report request rescue retire
rhyme rinse risk rob rock roll rub ruin rule rush sack sail satisfy scare scatter scold scorch scrape scratch scream
screw scrub seal separate serve settle shade share shave shelter shiver shock shop shrug sigh sign sip ski skip slap
slip smash smell smile sneeze sniff snore soak soothe spare spark sparkle spell spill spoil spot spray sprout squash
squeak squeeze stain stamp stare steer stir stitch strap strengthen stretch strip stroke stuff subtract succeed suck
suffer suggest supply support suppose surprise surround suspect suspend tame tap taste tease tempt terrify test thank
thaw tick tickle tie tip tire touch tow trace trade train transport trap travel treat tremble trick trot trouble
trust tug tumble twist undress unfasten unite unpack vanish visit wail wander warn wash waste water wave weigh
welcome whine whip whirl whisper whistle wink wipe wobble wonder worry wrap wreck wrestle wriggle yawn yell zip zoom
""".split()

# Words after which a clause's verb may come, and words that may follow the verb.
_BEFORE = frozenset("please just kindly and then to so also now pls".split())
_AFTER = frozenset("me the a an my some up down on out off in this it them him her us our that".split())
_ASK = frozenset("can could would will".split())

_WORD = re.compile(r"[a-z']+")


def _words(texts) -> set[str]:
    return {w for t in texts for w in _WORD.findall(t.lower())}


# The modules whose string literals hold every phrasing, filler, reply and entity of every split.
_DATA_MODULES = ("compose", "datagen", "intents", "lexicon", "out_of_scope", "phrasing", "replies", "surfaces",
                 "templates", "tools", "train_entities", "train_patterns", "train_round23", "train_round4", "val_fresh")


@lru_cache(maxsize=1)
def used_words() -> frozenset[str]:
    """Every word of every string literal (f-strings' too) in the data modules: all that a
    phrasing, filler, reply or entity of any split can say, and some more."""
    here = Path(__file__).parent
    texts = [node.value for name in _DATA_MODULES
             for node in ast.walk(ast.parse((here / f"{name}.py").read_text()))
             if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    return frozenset(_words(texts))


@lru_cache(maxsize=1)
def pool() -> tuple[str, ...]:
    """The verbs the drill puts in: VERBS less every word any split uses."""
    used = used_words()
    return tuple(v for v in VERBS if v not in used)


def swap_verb(text: str, intent: str, rng: random.Random) -> str:
    """``text`` (a template, slots unfilled) with one SWAPPABLE verb replaced, or as it was
    when no verb may go (see the module's docstring)."""
    from .intents import _is_cue, _tool_words

    words = text.split(" ")
    bare = [w.strip(",.!?:;").lower() for w in words]
    spots = [i for i, w in enumerate(bare) if w in SWAPPABLE and _opens_clause(words, bare, i)
             and (i + 1 == len(words) or bare[i + 1] in _AFTER or words[i + 1].startswith("{"))]
    if not spots:
        return text
    cues = {w.lower() for w in _tool_words(intent) if _is_cue(w)}
    i = rng.choice(spots)
    if not any(w in cues for j, w in enumerate(bare) if j != i):
        return text  # the verb may be what names the tool
    w = words[i]
    lead = len(w) - len(w.lstrip(",.!?:;"))
    core = w[lead:].rstrip(",.!?:;")
    new = rng.choice(pool())
    if core[:1].isupper():
        new = new.capitalize()
    words[i] = w[:lead] + new + w[lead + len(core):]
    return " ".join(words)


def _opens_clause(words: list[str], bare: list[str], i: int) -> bool:
    if i == 0 or words[i - 1][-1:] in ",:.!?" or bare[i - 1] in _BEFORE:
        return True
    return bare[i - 1] == "you" and i >= 2 and bare[i - 2] in _ASK
