"""Kinds of misses of a tool-calling answer, for error analysis (training.engine_eval).

``classify(row)`` takes {"category", "want": [calls], "got": [calls], "ok"} (calls as
{"name", "arguments"}) and names what went wrong: one kind per answer, the first that applies:

* ``ok``; ``spurious_call`` (a call where none was right: oos, missing, chat);
* ``no_call`` (no call where one or more were wanted); ``wrong_tool``; ``call_count`` (too
  many or too few calls, multi: a wanted call absent or an extra one);
* for calls with the right name, the first wrong argument's kind (``arg_kind``):
  ``missing_arg`` / ``extra_arg`` (an optional slot left out or invented), ``boolean``,
  ``number``, ``time`` (HH:MM), ``enum`` (day, state, unit, mode), and for free strings the
  edge at fault: ``extra_start`` / ``cut_start`` (words too many / too few at the value's
  start, the rest the same), ``extra_end`` / ``cut_end``, ``both_edges``, ``other_string``
  (a different word inside), and ``list`` (shopping items).
"""
from __future__ import annotations

import json
import re
from collections import Counter

ENUMS = {"day", "state", "unit", "mode"}
TIME = re.compile(r"^\d{1,2}:\d{2}$")


def _words(s: str) -> list[str]:
    return str(s).split()


def string_kind(want: str, got: str) -> str:
    w, g = _words(want), _words(got)
    if w == g:  # whitespace or case only
        return "other_string"
    if g[-len(w):] == w and len(g) > len(w):
        return "extra_start"
    if w[-len(g):] == g and len(w) > len(g) and g:
        return "cut_start"
    if g[:len(w)] == w and len(g) > len(w):
        return "extra_end"
    if w[:len(g)] == g and len(w) > len(g) and g:
        return "cut_end"
    gs, ws = " ".join(g), " ".join(w)
    if ws and ws in gs:
        return "both_edges"
    if gs and gs in ws:
        return "both_edges"
    # one edge right, the other wrong by more than a whole-word shift
    if g and w and g[0] == w[0]:
        return "end_wrong"
    if g and w and g[-1] == w[-1]:
        return "start_wrong"
    return "other_string"


def arg_kind(key: str, want, got) -> str:
    if isinstance(want, bool) or isinstance(got, bool):
        return "boolean"
    if isinstance(want, (int, float)):
        return "number"
    if isinstance(want, list):
        return "list"
    if key in ENUMS:
        return "enum"
    if isinstance(want, str) and TIME.match(want):
        return "time"
    if isinstance(want, str) and isinstance(got, str):
        return string_kind(want, got)
    return "other_string"


def call_kinds(want: dict, got: dict) -> list[tuple[str, str]]:
    """(argument, kind) for every argument where two calls of the same tool differ."""
    wa, ga = want.get("arguments", {}), got.get("arguments", {})
    out = []
    for k in sorted(set(wa) | set(ga)):
        if k not in ga:
            out.append((k, "missing_arg"))
        elif k not in wa:
            out.append((k, "extra_arg"))
        elif json.dumps(wa[k], sort_keys=True) != json.dumps(ga[k], sort_keys=True):
            out.append((k, arg_kind(k, wa[k], ga[k])))
    return out


def _key(c: dict) -> str:
    return json.dumps({"name": c["name"], "arguments": c.get("arguments", {})}, sort_keys=True)


def classify(row: dict) -> str:
    cat, want, got = row["category"], row["want"], row["got"]
    if row.get("ok"):
        return "ok"
    if not want:
        return "spurious_call" if got else "other"
    if not got:
        return "no_call"
    if cat == "single" or len(want) == 1:
        if len(got) != 1:
            return "call_count" if any(g["name"] == want[0]["name"] for g in got) else "wrong_tool"
        if got[0]["name"] != want[0]["name"]:
            return "wrong_tool"
        ks = call_kinds(want[0], got[0])
        return ks[0][1] if ks else "other"
    # multi: pair the calls not matched exactly by name, in order
    left_w = [w for w in want if _key(w) not in {_key(g) for g in got}]
    left_g = [g for g in got if _key(g) not in {_key(w) for w in want}]
    names_w, names_g = Counter(w["name"] for w in left_w), Counter(g["name"] for g in left_g)
    if names_w != names_g:
        if sum(names_g.values()) < sum(names_w.values()) and not (names_g - names_w):
            return "call_missing"
        if sum(names_g.values()) > sum(names_w.values()) and not (names_w - names_g):
            return "call_extra"
        return "wrong_tool"
    for w in left_w:
        g = next(g for g in left_g if g["name"] == w["name"])
        left_g.remove(g)
        ks = call_kinds(w, g)
        if ks:
            return ks[0][1]
    return "other"


def arg_details(row: dict) -> list[tuple[str, str, str]]:
    """(tool, argument, kind) for every wrong argument of a same-name call (all of them, not only the first)."""
    want, got = row["want"], list(row["got"])
    out = []
    for w in want:
        if any(_key(w) == _key(g) for g in got):
            continue
        g = next((g for g in got if g["name"] == w["name"] and _key(g) not in {_key(x) for x in want}), None)
        if g is None:
            continue
        got.remove(g)
        out += [(w["name"], k, kind) for k, kind in call_kinds(w, g)]
    return out


def summarize(rows: list[dict]) -> dict:
    s: dict = {}
    for r in rows:
        c = s.setdefault(r["category"], {"n": 0, "exact": 0, "kinds": Counter(), "args": Counter()})
        c["n"] += 1
        c["exact"] += int(bool(r["ok"]))
        if not r["ok"]:
            c["kinds"][r["kind"]] += 1
            for tool, arg, kind in arg_details(r):
                c["args"][f"{tool}.{arg}:{kind}"] += 1
    for c in s.values():
        c["kinds"] = dict(c["kinds"].most_common())
        c["args"] = dict(c["args"].most_common())
    s["all"] = {"n": len(rows), "exact": sum(int(bool(r["ok"])) for r in rows)}
    return s
