"""Build the synthetic multi-turn tool-use conversations, per split.

    python -m training.datagen --out DIR [--seed 0] [--train 120000]

writes DIR/{train,val,test}.jsonl; each line {"messages", "tools", "category"}. The
category names what the *last* user request needs: single, multi, oos (no tool could
do it), missing (the right tool is not offered), or chat (arithmetic, small talk,
facts). Evaluation regenerates the final assistant turn of test conversations.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
from pathlib import Path

from . import compose as composer  # not "compose": prepared_lists() has a share of that name
from .intents import dealt, fill
from .phrasing import realize
from .lexicon import LANGUAGES, legacy_oos_draws, split_lists
from .replies import REFUSAL_OOS, chat_turn, refusal_missing, tool_result
from .tools import TOOLS, canonical
from .train_entities import STRESS_SHARE
from .train_round4 import ROUND4_CONNECTORS, ROUND4_PREFIXES
from .train_round5 import ROUND5
from .train_round6 import ROUND6
from .train_round7 import ROUND7
from .val_fresh import VAL_CONNECTORS, VAL_PREFIXES, VAL_SUFFIXES

SYSTEM_PROMPTS = ["You are a helpful assistant.", "You are a voice assistant on a phone. Keep answers short.",
                  "You are Cactus, an on-device assistant.", "You help the user with their phone and smart home."]
# Prefix and suffix patterns (phrasing.py syntax), dealt to splits like the request
# patterns. Their words come from shared classes, so a test-only suffix is a new
# arrangement of known filler, and the model learns that filler is never part of a value.
FILLER = {
    "hi": "(hey|hi|hello|yo|ok|okay|so|right|alright|um|uh|listen|excuse me|morning|good evening|hey there)",
    "ask": "(can you|could you|would you|will you|please|can you please|could you please|would you please)",
    "name": "(assistant|cactus|phone)",
    "thanks": "(please|thanks|thank you|thanks a lot|cheers|ty|thx|pls|thank u|much appreciated|thanks!)",
    "now": "(now|right now|right away|straight away|asap|immediately|quickly|real quick|rn|at once)",
    "cond": "(if possible|if you can|if you don't mind|when you get a chance|when you can|for me)",
    "tag": "(okay|ok|alright|would you|will you|yeah|got it)",
}
PREFIXES = ["", "<hi>, ", "<ask> ", "<hi> <name>, ", "<hi>, <ask> ", "quick one: ", "I'd like you to ",
            "<name>, ", "<hi>! ", "I need you to ", "do me a favor and ", "go ahead and ", "if you could ",
            "<hi>, <name>, <ask> ", "just ", "<hi>, just ", "<name>, <ask> ", "<hi>, I need you to ",
            "<ask> go ahead and ", "<hi>, quick one: ", "real quick, ", "<hi>, if you could ", "<name>: ",
            "<hi>. "]
SUFFIXES = ["", " <thanks>", ", <thanks>", " <now>", "!", " <cond>", ", <tag>?", " <now> <thanks>",
            " <cond>, <thanks>", ", <now>", " <cond> <now>", ", <cond>", " <now>, <tag>", ", <tag>",
            " <thanks>!", " <now>!", " <cond>, <tag>?", ", <now> <thanks>", " <cond> <thanks>", " <thanks>, <tag>",
            " <now> <cond>", ", <thanks> <now>", " <thanks> <thanks>", "!!"]
CONNECTORS = [". ", " and ", ", then ", ". Also ", ", and ", " and then ", ". After that ", "; also ", " and also ",
              ". Then ", ", plus ", " as well as ", ". And ", ", also ", " then ", " & ", ". Next ",
              ", after that ", " and after that ", ". Oh and ", " plus ", ". Plus ", ", and then ",
              " and please ", ". Please also ", ", and also ", " and could you ", ". Could you also ", " along with that ",
              "; then ", ". Afterwards ", ", next ", " and additionally ", ". Additionally ", ", as well as ",
              ". Finally ", ", and then also "]
# Train-only connectors (round 2): validation multi-call misses dropped a second or third
# call or copied an unseen connector into a value ("the garden gate along with"); more
# connector shapes, none of them a dealt one, teach that any joining phrase ends a span.
TRAIN_CONNECTORS = [" together with that ", ", on top of that ", ". On top of that, ", ", besides that ",
                    " and while you're at it ", ". While you're at it, ", ", oh and also ", ". Also, ",
                    " and one more thing, ", ". One more thing: ", ", in addition ", ", then also ", " and next ",
                    ". Second, ", ". Lastly, ", ", and as well ", ". Besides that, ", " and once that's done ",
                    ". Once that's done, ", ", after which ", " + ", ", and with that done ", " and, ",
                    ". Oh, and ", "... also ", " - also ", ", and right after ", ". Right after that, ",
                    ", followed by ", " and lastly ", "; and "]
# Round 3: validation multi-call misses still copied an unseen connector into the first
# value ("the hallway along", "spanish class along with that update..."); more shapes.
TRAIN_CONNECTORS = TRAIN_CONNECTORS + [
    " and in the meantime ", ", and separately ", ". Separately, ", " and at the same time ", "; meanwhile ",
    ", and another thing: ", " and beyond that ", ", in addition to that ", ". Next up: ", " and after this ",
    ", coupled with ", " and likewise ", ", and while we're at it ", ". Another thing: ", " also "]
# Round 4 (training/train_round4.py): validation multi-call misses glued a fresh connector
# into the next value ("sorted lunch with Laura") and dropped calls after one.
TRAIN_CONNECTORS = TRAIN_CONNECTORS + ROUND4_CONNECTORS
TRAIN_CONNECTOR_SHARE = 0.4  # of joins in training requests; the rest use the dealt training connectors
# Share of three-call requests among training multi requests (validation and test keep 0.2):
# validation misses most often lost the third call of three.
TRAIN_THREE_SHARE = 0.35
QUESTION_WORDS = {"what", "what's", "how", "how's", "will", "is", "do", "does", "should", "am", "any", "where",
                  "who", "when", "i", "i'm", "i'd", "can", "could", "please", "we", "we're", "tell", "my", "give"}
CATEGORIES = ("single", "multi", "oos", "missing", "chat")
MIX = (0.40, 0.22, 0.10, 0.10, 0.18)  # share of each category per exchange
TURNS = (0.6, 0.3, 0.1)  # share of conversations with 1, 2, 3 exchanges


def _split_choice(rng: random.Random, options: list[str], split: str, val: list[str] | None = None) -> str:
    """One option for ``split`` (intents.dealt; ``val`` is validation's fresh list)."""
    if split == "train_only":  # a train-only list: every option
        return rng.choice(options)
    return rng.choice(dealt(options, split, val))


def _filler(rng: random.Random, options: list[str], split: str, val: list[str] | None = None) -> str:
    """A prefix or suffix: a split's pattern with its filler words drawn from the shared classes."""
    pattern = _split_choice(rng, options, split, val)
    for k, v in FILLER.items():
        pattern = pattern.replace(f"<{k}>", v)
    return realize(pattern, rng, strip=False)


# Train-only openers (round 3): validation misses took a polite opener's first word for a
# value ("Do" as the recipient, "a favor" as an event title). New openers, none a dealt
# prefix, teach that whatever comes before the request is never part of a value.
TRAIN_PREFIXES = ["be a star and ", "help me out and ", "would you do something for me? ", "favour to ask: ",
                  "I need a hand: ", "be a dear and ", "if it's no trouble, ", "when you have a sec, ",
                  "<hi>, be a star and ", "one thing: ", "<hi>, help me out and ", "here's one for you: ",
                  "<name>, be a dear and ", "small favour: ", "if it isn't too much bother, ", "<hi>, a favour: ",
                  "mind helping me out? ", "I've got a job for you: "]
TRAIN_PREFIXES = TRAIN_PREFIXES + ROUND4_PREFIXES  # round 4 (train_round4.py)
TRAIN_PREFIX_SHARE = 0.3  # of prefixed training requests; no extra draw for val / test


#: Openers that a polite prefix turns ungrammatical ("could you don't ..."); training only,
#: so that the published validation and test sentences stay as they are.
_NO_PREFIX = {"don't", "do", "dont", "nobody", "no", "never", "not", "so", "um", "uh", "okay", "ok", "well"}


def style(core: str, rng: random.Random, split: str, polite: bool = True) -> str:
    """Dress a request: optional prefix/suffix (split-specific), casing, end punctuation."""
    text = core
    first = core.split(" ", 1)[0].lower().strip(",:")
    if polite and rng.random() < 0.35 and first not in QUESTION_WORDS \
            and not (split == "train" and first in _NO_PREFIX):
        if split == "train" and rng.random() < TRAIN_PREFIX_SHARE:  # no extra draw for val / test
            text = _filler(rng, TRAIN_PREFIXES, "train_only") + text
        else:
            text = _filler(rng, PREFIXES, split, VAL_PREFIXES) + text
    if polite and rng.random() < 0.3:
        text += _filler(rng, SUFFIXES, split, VAL_SUFFIXES)
    if rng.random() < 0.6:
        text = text[0].upper() + text[1:]
    if rng.random() < 0.5 and text[-1] not in "!?.":
        question = first in QUESTION_WORDS and first not in {"please", "tell", "give", "i", "i'd", "i'm", "we're", "my", "we"}
        text += "?" if question else rng.choice([".", "!"])
    return text


def _call(name: str, args: dict) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": canonical(args)}}


#: Arguments that are closed classes or normalised (not copied as said): the case-fold drill leaves them alone.
_CASEFOLD_SKIP = {"day", "state", "unit", "mode", "from_unit", "to_unit", "target_language", "time"}


def casefold_drill(user: str, calls: list[dict], rng: random.Random) -> str:
    """Capitalise the first letter of one copied lower-case value where the request says it.

    A request opening with its value is capitalised 60% of the time (``style``) while the call
    keeps the value's own form ("Workshop lights off" -> room "workshop"). Stage 19 got 1 of 7
    such values right on the seed-0 validation split against 7 of 7 lower-case ones at the
    same place (docs/training.md, session 19), because the training requests hold about 1%
    of them: the capitalised first piece of an invented value ("Venobe") has to be written as
    its lower-case piece, which it seldom sees. Training only: one value of the exchange,
    anywhere in the request, its first letter upper-cased; the calls are unchanged.
    """
    import re

    spots = []
    for c in calls:
        for k, v in c["function"]["arguments"].items():
            if k in _CASEFOLD_SKIP:
                continue
            for val in v if isinstance(v, list) else [v]:
                if isinstance(val, str) and val[:1].isalpha() and val[:1].islower():
                    m = re.search(r"(?<![\w'])" + re.escape(val) + r"(?![\w'])", user)
                    if m:
                        spots.append(m.start())
    if not spots:
        return user
    i = rng.choice(sorted(set(spots)))
    return user[:i] + user[i].upper() + user[i + 1:]


# Round 5's structures (train_round5.py) for one request at the --round5 share, else None. A
# function of its own so that a test can stand a draw-free stub in for it: with the share at 0
# it must draw nothing, or every later draw (and so the whole training split) would move.
def _round5(intent: str, rng: random.Random, L: dict) -> list | None:
    if L.get("_round5") and rng.random() < L["_round5"]:  # training only; no draw when off
        return ROUND5[intent]
    return None


# Round 6's structures (train_round6.py), drawn like round 5's and only for a request that
# round 5 left to the usual patterns: with both on, round 5 keeps exactly its share.
def _round6(intent: str, rng: random.Random, L: dict) -> list | None:
    if L.get("_round6") and rng.random() < L["_round6"]:  # training only; no draw when off
        return ROUND6[intent]
    return None


# Round 7's structures (train_round7.py), drawn like round 6's, from the requests rounds 5 and 6
# left: with all three on, rounds 5 and 6 keep exactly the shares they had.
def _round7(intent: str, rng: random.Random, L: dict) -> list | None:
    if L.get("_round7") and rng.random() < L["_round7"]:  # training only; no draw when off
        return ROUND7[intent]
    return None


def _tool_exchange(intents: list[str], rng: random.Random, L: dict, split: str) -> list[dict]:
    """user request -> assistant tool calls -> tool responses -> assistant summary."""
    cores, calls = [], []
    for i, it in enumerate(intents):
        own = _round5(it, rng, L)  # first, so its share is exactly the one asked for whatever --compose is
        if own is None:
            own = _round6(it, rng, L)
        if own is None:
            own = _round7(it, rng, L)
        if own is not None:
            text, args = fill(it, rng, L, split, patterns=own)
        elif L.get("_compose") and rng.random() < L["_compose"]:  # training only; no draw when off
            # a lead-in only before the first request, a trailing modifier only after the last
            text, args = composer.fill(it, rng, L, lead=i == 0, tail=i == len(intents) - 1,
                                       more=L.get("_compose_more", False))
        else:
            text, args = fill(it, rng, L, split)
        cores.append(text)
        calls.append(_call(it, args))
    user = cores[0]
    for c in cores[1:]:
        if split == "train" and rng.random() < TRAIN_CONNECTOR_SHARE:  # no extra draw for val / test
            conn = rng.choice(TRAIN_CONNECTORS)
        else:
            conn = _split_choice(rng, CONNECTORS, split, VAL_CONNECTORS)
        user += conn + (c[0].upper() + c[1:] if conn == ". " else c)
    user = style(user, rng, split)
    if L.get("_casefold") and rng.random() < L["_casefold"]:  # training only; no draw when off
        user = casefold_drill(user, calls, rng)
    msgs = [{"role": "user", "content": user},
            {"role": "assistant", "content": "", "tool_calls": calls}]
    answers = []
    for c in calls:
        result, answer = tool_result(c["function"]["name"], c["function"]["arguments"], rng)
        msgs.append({"role": "tool", "content": json.dumps(result, ensure_ascii=False)})
        answers.append(answer)
    msgs.append({"role": "assistant", "content": " ".join(answers)})
    return msgs


def _oos_exchange(rng: random.Random, L: dict, split: str) -> list[dict]:
    """An out-of-scope request and its refusal.

    The conversation's generator makes exactly the draws it made when the list had 41
    kinds and 3 replies (a kind index, a city, a name; a reply index after the request):
    the kind and the reply come from a generator seeded by those draws, so growing either
    list never moves a later draw of the published validation and test conversations.
    """
    index = rng.randrange(L["_oos_draws"])
    city, name = rng.choice(L["cities"]), rng.choice(L["first_names"])
    pick = random.Random(f"oos:{split}:{index}:{city}:{name}")
    request = pick.choice(L["out_of_scope"]).format(city=city, name=name)
    msgs = [{"role": "user", "content": style(request, rng, split)},
            {"role": "assistant", "content": pick.choice(REFUSAL_OOS)}]
    rng.randrange(3)  # the old reply draw
    return msgs


DRILL_STYLES = ("names", "none")


def drill_conversation(rng: random.Random, L: dict, split: str) -> dict:
    """A structure-only drill (``--drill``, training only): 1-3 single- or multi-call
    exchanges with no tool schemas in the prompt, so the step's tokens go to requests and
    the calls' argument spans instead of to re-reading schemas. With style "names" a short
    system line names the offered tools (the needed ones and distractors, shuffled); with
    "none" there is no system block at all. Requests, values and calls come from the same
    generators and lists as any training exchange (``_tool_exchange`` with the training
    lists), so a drill row is an ordinary training exchange with its schemas left out.
    """
    if split != "train":
        raise ValueError("drill rows are training data only")
    n = rng.choices([1, 2, 3], L.get("_turns") or TURNS)[0]
    mix = L.get("_mix") or MIX
    names = list(TOOLS)
    plan: list[tuple[str, list[str]]] = []
    for _ in range(n):
        if rng.choices(("single", "multi"), mix[:2])[0] == "single":
            plan.append(("single", [rng.choice(names)]))
        else:
            plan.append(("multi", rng.sample(names, rng.choices([2, 3], [1 - TRAIN_THREE_SHARE, TRAIN_THREE_SHARE])[0])))
    msgs: list[dict] = []
    if L.get("_drill_style", "names") == "names":
        needed = list(dict.fromkeys(t for _, p in plan for t in p))
        pool = [t for t in names if t not in needed]
        extra = max(0, rng.randint(min(max(len(needed), 2), 5), 5) - len(needed))
        offered = needed + rng.sample(pool, min(extra, len(pool)))
        rng.shuffle(offered)
        msgs.append({"role": "system", "content": "Tools: " + ", ".join(offered) + "."})
    for _, p in plan:
        msgs += _tool_exchange(p, rng, L, split)
    return {"messages": msgs, "tools": [], "category": plan[-1][0], "needs": plan[-1][1], "drill": True}


def conversation(rng: random.Random, L: dict, split: str, last: str | None = None) -> dict:
    """One conversation of 1-3 exchanges; `last` forces the category of the final one."""
    if L.get("_drill") and rng.random() < L["_drill"]:  # training only; no draw when off
        return drill_conversation(rng, L, split)
    n = rng.choices([1, 2, 3], L.get("_turns") or TURNS)[0]
    kinds = [rng.choices(CATEGORIES, L.get("_mix") or MIX)[0] for _ in range(n)]
    if last:
        kinds[-1] = last
    names = list(TOOLS)
    needed: list[str] = []
    missing: set[str] = set()
    plan = []
    for k in kinds:
        if k == "single":
            plan.append([rng.choice(names)])
        elif k == "multi":
            three = [1 - TRAIN_THREE_SHARE, TRAIN_THREE_SHARE] if split == "train" else [0.8, 0.2]
            plan.append(rng.sample(names, rng.choices([2, 3], three)[0]))
        elif k == "missing":
            plan.append([rng.choice(names)])
        else:
            plan.append([])
    for k, p in zip(kinds, plan):
        if k in ("single", "multi"):
            needed += [t for t in p if t not in needed]
    for k, p in zip(kinds, plan):
        if k == "missing" and p[0] in needed:  # cannot be both offered and missing; make it a fresh one
            p[0] = rng.choice([t for t in names if t not in needed])
        if k == "missing":
            missing.add(p[0])
    only_chat = all(k in ("chat", "oos") for k in kinds)
    tools: list[dict] = []
    if not (only_chat and rng.random() < 0.4):
        pool = [t for t in names if t not in needed and t not in missing]
        extra = max(0, rng.randint(min(max(len(needed), 2), 5), 5) - len(needed))
        chosen = needed + rng.sample(pool, min(extra, len(pool)))
        rng.shuffle(chosen)
        tools = [TOOLS[t] for t in chosen]
    msgs: list[dict] = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
    for k, p in zip(kinds, plan):
        if k in ("single", "multi"):
            msgs += _tool_exchange(p, rng, L, split)
        elif k == "missing":
            text, _ = fill(p[0], rng, L, split)
            msgs += [{"role": "user", "content": style(text, rng, split)},
                     {"role": "assistant", "content": refusal_missing(p[0], rng)}]
        elif k == "oos":
            msgs += _oos_exchange(rng, L, split)
        else:
            _, q, a = chat_turn(rng, split)
            msgs += [{"role": "user", "content": style(q, rng, split, polite=False)},
                     {"role": "assistant", "content": a}]
    # needs: the tools the final request asks for (for missing: the one not offered)
    return {"messages": msgs, "tools": tools, "category": kinds[-1], "needs": plan[-1]}


_CHUNK = 10_000


def _chunk(job: tuple[int, dict, int]) -> list[tuple[str, str, bool]]:
    """(jsonl line, category, drill) per conversation: a worker returns text, which crosses
    back to the parent an order of magnitude faster than the conversations' dicts."""
    seed, L, n = job
    rng = random.Random(seed)
    return [_entry(conversation(rng, L, "train")) for _ in range(n)]


def _entry(c: dict) -> tuple[str, str, bool]:
    return json.dumps(c, ensure_ascii=False) + "\n", c["category"], bool(c.get("drill"))


EVAL_COUNTS = {"single": 600, "multi": 200, "oos": 100, "missing": 100, "chat": 200}


def generate(out: Path, seed: int = 0, n_train: int = 120_000, n_val: int = 2_000, **options) -> dict:
    """Write train/val/test jsonl under `out`; returns counts per split and category.

    ``options`` are :func:`prepared_lists`'s drawing options (synth, front, noise, ...).
    """
    lists = prepared_lists(**options)
    out.mkdir(parents=True, exist_ok=True)
    stats = {}
    for si, split in enumerate(("train", "val", "test")):
        rng = random.Random(seed * 1000 + si)
        L = lists[split]
        if split == "test":
            rows = [_entry(conversation(rng, L, split, last=cat)) for cat, n in EVAL_COUNTS.items() for _ in range(n)]
        elif split == "train" and n_train > _CHUNK:
            # chunks with their own seeds, so generation spreads over the cores and stays reproducible
            jobs = [(seed * 1000 + 100 + k, L, min(_CHUNK, n_train - k * _CHUNK))
                    for k in range((n_train + _CHUNK - 1) // _CHUNK)]
            with multiprocessing.get_context("fork").Pool(min(len(jobs), os.cpu_count() or 1)) as pool:
                rows = [r for part in pool.map(_chunk, jobs) for r in part]
        else:
            rows = [_entry(conversation(rng, L, split)) for _ in range(n_train if split == "train" else n_val)]
        with open(out / f"{split}.jsonl", "w") as f:
            f.writelines(line for line, _, _ in rows)
        cats: dict[str, int] = {}
        for _, cat, _ in rows:
            cats[cat] = cats.get(cat, 0) + 1
        stats[split] = {"conversations": len(rows), "last_category": cats}
        if lists["train"]["_drill"] and split == "train":
            stats[split]["drill"] = sum(1 for _, _, d in rows if d)
    return stats


def prepared_lists(synth: float = 0.6, front: float = 0.0, noise: float = 0.0, mix: tuple | None = None,
                   turns: tuple | None = None, token_words: list[str] | None = None, phrase: float = 0.0,
                   context: float = 0.0, stress: float = STRESS_SHARE, val_synth: float = 0.6, compose: float = 0.0,
                   drill: float = 0.0, drill_style: str = "names", casefold: float = 0.0,
                   more_frames: bool = False, doc_values: float = 0.0, swap: float = 0.0,
                   fold_val: float = 0.0, round5: float = 0.0, round6: float = 0.0,
                   round7: float = 0.0) -> dict:
    """Each split's entity lists, carrying the options that say how :func:`generate` draws from them.

    token_words: alphabetic tokenizer pieces for the copy drill (invented values built
    from them); test data never uses invented values. front, noise, phrase, context, mix
    (category shares, see MIX) and turns (shares of 1-3 exchanges, see TURNS) change the
    training split only, so validation and test stay the published sentences. stress: share
    of slot draws swapped for a boundary-stress value (train_entities.py), training only; on
    by default, as the train-only patterns are. val_synth: share of invented values in
    validation (0.6, the published split; 0 draws validation like test, e.g. for a probe).
    compose: share of training single- and multi-call requests given a composed structure
    (compose.py) instead of a pattern; 0 (default) makes no draw, so all splits stay as before.
    more_frames: composed structures draw from compose.MORE's verb phrases too.
    drill: share of training conversations that are structure-only drills (drill_conversation:
    request -> call exchanges without the tool schemas; drill_style "names" or "none"); 0
    (default) makes no draw, and validation and test never get one.
    casefold: share of training tool exchanges whose request says one copied lower-case value
    with a capital first letter (casefold_drill); 0 (default) makes no draw.
    doc_values: share of training slot draws whose free-text lists are phrases of the standard
    library's docstrings (doc_values.py); 0 (default) makes no draw.
    swap: share of training tool requests (patterns and composed) whose verb is replaced by an
    English verb that no split uses (verb_swap.py); 0 (default) makes no draw.
    fold_val: share of training pattern requests drawn from validation's own request patterns
    (val_fresh.VAL_PATTERNS) instead of training's, for runs chosen on training.heldout's
    structures rather than on validation; 0 (default) makes no draw.
    round5: share of training single- and multi-call requests whose structure is drawn from
    train_round5.ROUND5 (before the compose draw); 0 (default) makes no draw.
    round6: share of the training single- and multi-call requests that round 5 did not take
    whose structure is drawn from train_round6.ROUND6 (so with both on, round 6 gets
    round6 * (1 - round5) of them); 0 (default) makes no draw.
    round7: share of the training single- and multi-call requests that rounds 5 and 6 left
    whose structure is drawn from train_round7.ROUND7; 0 (default) makes no draw.
    """
    if drill_style not in DRILL_STYLES:
        raise ValueError(f"drill_style must be one of {DRILL_STYLES}, got {drill_style!r}")
    lists = split_lists()
    if doc_values:  # built before the lists gain their shared classes: held-out values only
        from .doc_values import build_pools, held_out_values
        from .plaintext import stdlib_docs
        lists["train"]["_doc_pool"] = build_pools(stdlib_docs()["train"], held_out_values(lists))
    lists["train"]["_doc_values"] = doc_values
    draws = legacy_oos_draws()
    for s in lists:
        lists[s]["languages"] = LANGUAGES  # closed class: shared by all splits
        lists[s]["_oos_draws"] = draws[s]
        # invented names and word salad only where we train and tune, never in test
        # (validation keeps the default share, so runs with other --synth stay comparable on it)
        lists[s]["_synth"] = {"train": synth, "val": val_synth, "test": 0.0}[s]
        lists[s]["_tokens"] = token_words if s != "test" else None
        lists[s]["_front"] = front if s == "train" else 0.0  # fronted time/day/place adjuncts
        lists[s]["_noise"] = noise if s == "train" else 0.0  # word-noise drill: training only
        lists[s]["_phrase"] = phrase if s == "train" else 0.0  # function words inside invented values
        lists[s]["_context"] = context if s == "train" else 0.0  # a clause before the request
        lists[s]["_compose"] = compose if s == "train" else 0.0  # composed structures (compose.py)
        lists[s]["_compose_more"] = more_frames
        lists[s]["_stress"] = stress if s == "train" else 0.0  # boundary-stress values (train_entities.py)
        lists[s]["_drill"] = drill if s == "train" else 0.0  # schema-free request -> call drills
        lists[s]["_drill_style"] = drill_style
        lists[s]["_casefold"] = casefold if s == "train" else 0.0  # capitalised values in requests
        lists[s]["_swap"] = swap if s == "train" else 0.0  # unseen verbs before values (verb_swap.py)
        lists[s]["_fold_val"] = fold_val if s == "train" else 0.0  # validation's structures train
        lists[s]["_round5"] = round5 if s == "train" else 0.0  # opt-in structures (train_round5.py)
        lists[s]["_round6"] = round6 if s == "train" else 0.0  # opt-in structures (train_round6.py)
        lists[s]["_round7"] = round7 if s == "train" else 0.0  # opt-in structures (train_round7.py)
        lists[s]["_mix"] = mix if s == "train" else None
        lists[s]["_turns"] = turns if s == "train" else None
        lists[s]["_vocab"] = sorted({w for k, v in lists[s].items() if not k.startswith("_") and k != "out_of_scope"
                                     for x in v for w in x.lower().split() if w.isalpha()})
    return lists


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train", type=int, default=120_000)
    ap.add_argument("--val", type=int, default=2_000)
    ap.add_argument("--stress", type=float, default=STRESS_SHARE,
                    help="share of training slot draws given a boundary-stress value (0 turns it off)")
    a = ap.parse_args()
    print(json.dumps(generate(a.out, a.seed, a.train, a.val, stress=a.stress), indent=1))


if __name__ == "__main__":
    main()
