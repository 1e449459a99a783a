"""Phrasing patterns: one pattern stands for many surface templates.

A pattern is a template string with choices in it:

    "(set|put) [me] an alarm (for|at) {time}"

`(a|b|c)` picks one alternative, `[x]` keeps x half of the time, and both nest.
`<name>` is a shared word class from WORDS (expanded before parsing), so the same
synonyms reach every pattern of every split. A pattern is the unit dealt to
train / val / test: the test split only sees *structures* never trained on, while
the words inside them are spread across all splits through the shared classes.
"""
from __future__ import annotations

import random
import re

# Shared word classes. Closed-class vocabulary a phone assistant must know; every
# split draws from all of it, so no split owns a synonym.
WORDS = {
    "set": "(set|put|make|create|add|schedule|start)",
    "turn_on": "(turn on|switch on|put on|power on)",
    "turn_off": "(turn off|switch off|shut off|power off|kill)",
    "alarm": "(alarm|wake-up alarm|wake up call|alarm clock)",
    "timer": "(timer|countdown|count down)",
    "remind": "(remind me|give me a reminder|set a reminder|make a reminder|nudge me|ping me|alert me)",
    "message": "(message|text|text message|sms|note)",
    "send": "(send|shoot|write|drop|fire off)",
    "call": "(call|phone|ring|dial)",
    "calendar": "(calendar|schedule|agenda|diary|planner)",
    "event": "(event|meeting|appointment|entry)",
    "weather": "(weather|forecast|weather forecast)",
    "play": "(play|put on|start|queue up|blast|throw on)",
    "music": "(music|songs|tunes|tracks)",
    "lights": "(lights|light|lamps|lighting)",
    "thermostat": "(thermostat|heating|temperature|heat|ac|air conditioning|temp)",
    "search": "(search|look up|google|search the web for|find|look online for)",
    "note": "(note|memo)",
    "directions": "(directions|a route|the way|navigation)",
    "convert": "(convert|change|turn|translate)",
    "volume": "(volume|sound|media volume|speaker volume|audio)",
    "dnd": "(do not disturb|dnd|do-not-disturb|focus mode|silent mode)",
    "shopping": "(shopping list|grocery list|shopping|groceries list|list for the store)",
    "news": "(news|headlines|top stories|latest news|news stories)",
    "translate": "(translate|say|put)",
    "lock": "(lock|bolt|secure)",
    "unlock": "(unlock|unbolt|open)",
    "want": "(I want|I'd like|I need|I wanna|let's have)",
    "please": "[please ]",
}

_TOKEN = re.compile(r"\(|\)|\[|\]|\|")


def _expand_words(pattern: str) -> str:
    return re.sub(r"<(\w+)>", lambda m: WORDS[m.group(1)], pattern)


def _parse(s: str, i: int, closer: str | None) -> tuple[list, int]:
    """Parse into a sequence of str / ('alt', [seqs]) / ('opt', seq) until `closer`."""
    seq: list = []
    alts: list[list] = []
    while i < len(s):
        c = s[i]
        if c == "(":
            inner, i = _parse(s, i + 1, ")")
            seq.append(("alt", inner))
        elif c == "[":
            inner, i = _parse(s, i + 1, "]")
            seq.append(("opt", inner))
        elif c == "|" and closer == ")":
            alts.append(seq)
            seq = []
            i += 1
        elif c in ")]":
            if c != closer:
                raise ValueError(f"unbalanced {c!r} in pattern {s!r}")
            alts.append(seq)
            return (alts if closer == ")" else alts[0]), i + 1
        else:
            m = _TOKEN.search(s, i)
            j = m.start() if m else len(s)
            seq.append(s[i:j])
            i = j
    if closer:
        raise ValueError(f"unclosed group in pattern {s!r}")
    return seq, i


def _render(seq: list, rng: random.Random) -> str:
    out = []
    for part in seq:
        if isinstance(part, str):
            out.append(part)
        elif part[0] == "alt":
            out.append(_render(rng.choice(part[1]), rng))
        elif rng.random() < 0.5:
            out.append(_render(part[1], rng))
    return "".join(out)


_CACHE: dict[str, list] = {}


def realize(pattern: str, rng: random.Random, strip: bool = True) -> str:
    """One surface template drawn from a pattern (inner whitespace normalised; outer
    whitespace kept when strip is false, for prefixes and suffixes)."""
    tree = _CACHE.get(pattern)
    if tree is None:
        tree = _CACHE[pattern] = _parse(_expand_words(pattern), 0, None)[0]
    raw = _render(tree, rng)
    text = " ".join(raw.split())
    if not strip and text:
        text = (" " if raw[0].isspace() else "") + text + (" " if raw[-1].isspace() else "")
    return _articles(text)


def _articles(text: str) -> str:
    return _ARTICLE.sub(lambda m: _article(m.group(1), m.group(2)) + " " + m.group(2), text)


_ARTICLE = re.compile(r"\b(a|an|A|An) ([A-Za-z])")


def _article(word: str, nxt: str) -> str:
    """'a' / 'an' agreeing with the next word's first letter, keeping the capital."""
    art = "an" if nxt.lower() in "aeiou" else "a"
    return art.capitalize() if word[0] == "A" else art


def count(pattern: str) -> int:
    """How many surface templates a pattern stands for (upper bound: duplicates counted)."""
    def n(seq: list) -> int:
        total = 1
        for part in seq:
            if isinstance(part, str):
                continue
            if part[0] == "alt":
                total *= sum(n(a) for a in part[1])
            else:
                total *= 1 + n(part[1])
        return total
    return n(_parse(_expand_words(pattern), 0, None)[0])


def expand(pattern: str) -> set[str]:
    """Every surface template a pattern stands for, as realize() would return it (for
    checking that two sets of patterns never produce the same sentence)."""
    def options(seq: list) -> list[str]:
        outs = [""]
        for part in seq:
            if isinstance(part, str):
                opts = [part]
            elif part[0] == "alt":
                opts = [o for alt in part[1] for o in options(alt)]
            else:
                opts = [""] + options(part[1])
            outs = [a + b for a in outs for b in opts]
        return outs
    return {_articles(" ".join(raw.split())) for raw in options(_parse(_expand_words(pattern), 0, None)[0])}


# A trailing adjunct that may move to the front: "wake me up at {time}" ->
# "at {time}, wake me up". Only slots whose phrase reads the same in both places.
_FRONTABLE = re.compile(r"^(?P<head>.+?),? (?P<adj>(?:(?:at|for|in|on|by|from) (?:the )?)?\{(?:time|day|dur|city|room)\})$")


def front_adjunct(template: str) -> str | None:
    """The template with its trailing time/day/duration/place adjunct moved to the front,
    or None when it has none (a new word order for every pattern, in every split)."""
    m = _FRONTABLE.match(template)
    if not m or "{" not in m.group("adj") or m.group("head").endswith((" the", " a", " my")):
        return None
    return f"{m.group('adj')}, {m.group('head')}"
