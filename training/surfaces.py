"""How values are said in a request, paired with how they are passed to a tool.

Every helper returns (surface text, argument value). Formats are shared by all splits:
the model must learn the conversions ("7 pm" -> "19:00"), which is the point.
"""
from __future__ import annotations

import random

_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
         "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"]
_TENS = {30: "thirty", 40: "forty", 45: "forty five", 50: "fifty", 60: "sixty", 90: "ninety"}
WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


def number_word(n: int, rng: random.Random, p_word: float = 0.25) -> str:
    """Digits usually, an English word sometimes (only for the numbers we spell)."""
    if rng.random() < p_word:
        if n <= 20:
            return _ONES[n]
        if n in _TENS:
            return _TENS[n]
    return str(n)


def time_of_day(rng: random.Random) -> tuple[str, str]:
    """A clock time as people say it, and its HH:MM value."""
    h = rng.randrange(24)
    m = rng.choice([0, 0, 0, 0, 15, 30, 30, 45, 5, 10, 20, 25, 40, 50, 55, rng.randrange(60)])
    value = f"{h:02d}:{m:02d}"
    h12 = h % 12 or 12
    ampm = "am" if h < 12 else "pm"
    style = rng.random()
    if h == 12 and m == 0 and style < 0.3:
        return "noon", value
    if h == 0 and m == 0 and style < 0.3:
        return "midnight", value
    if style < 0.25:
        return f"{h:02d}:{m:02d}", value
    if m == 0:
        form = rng.choice(["{h} {a}", "{h}{a}", "{h}:00 {a}", "{h} o'clock {dp}"])
    elif m == 30 and rng.random() < 0.3:
        form = "half past {h} {dp}"
    elif m == 15 and rng.random() < 0.3:
        form = "quarter past {h} {dp}"
    else:
        form = rng.choice(["{h}:{m:02d} {a}", "{h}:{m:02d}{a}", "{h}:{m:02d} {a}"])
    dp = "in the morning" if h < 12 else ("in the afternoon" if h < 18 else "in the evening")
    if form.endswith("{dp}") and h < 5:
        form = form.replace("{dp}", "{a}")
    text = form.format(h=h12, m=m, a=rng.choice([ampm, ampm.upper(), ampm[0] + "." + ampm[1] + "."]), dp=dp)
    return text, value


def day(rng: random.Random, adverbial: bool = True) -> tuple[str, str]:
    """A day word (today, tomorrow, a weekday) in adverbial form ("on Friday") or bare."""
    r = rng.random()
    if r < 0.25:
        return "today", "today"
    if r < 0.55:
        return "tomorrow", "tomorrow"
    wd = rng.choice(WEEKDAYS)
    name = wd.capitalize() if rng.random() < 0.7 else wd
    if not adverbial:
        return name, wd
    return rng.choice(["on " + name, "on " + name, "this " + name, "next " + name]), wd


def duration(rng: random.Random) -> tuple[str, dict]:
    """A timer length, and the hours/minutes/seconds arguments for exactly the units said."""
    r = rng.random()

    def unit(n: int, word: str) -> str:
        return f"{number_word(n, rng)} {word}{'' if n == 1 else 's'}"

    if r < 0.45:
        m = rng.choice([1, 2, 3, 5, 7, 8, 10, 12, 15, 20, 25, 30, 40, 45, 50, 60, 90, rng.randint(1, 120)])
        text = unit(m, "minute") if rng.random() < 0.8 else f"{m} min"
        return text, {"minutes": m}
    if r < 0.6:
        s = rng.choice([10, 15, 20, 30, 45, 60, 90, rng.randint(5, 120)])
        return unit(s, "second"), {"seconds": s}
    if r < 0.7:
        h = rng.randint(1, 6)
        return unit(h, "hour"), {"hours": h}
    if r < 0.82:
        h, m = rng.randint(1, 3), rng.choice([5, 10, 15, 20, 30, 40, 45, rng.randint(1, 59)])
        return f"{unit(h, 'hour')} and {unit(m, 'minute')}", {"hours": h, "minutes": m}
    if r < 0.92:
        m, s = rng.randint(1, 20), rng.choice([10, 15, 20, 30, 45, rng.randint(1, 59)])
        return f"{unit(m, 'minute')} and {unit(s, 'second')}", {"minutes": m, "seconds": s}
    return rng.choice([("half an hour", {"minutes": 30}), ("an hour", {"hours": 1}),
                       ("a minute", {"minutes": 1}), ("an hour and a half", {"hours": 1, "minutes": 30}),
                       ("a quarter of an hour", {"minutes": 15})])


def temperature(rng: random.Random) -> tuple[str, dict]:
    """A thermostat target with or without a unit; the unit argument only when said."""
    r = rng.random()
    if r < 0.4:
        t = rng.randint(16, 28)
        return rng.choice([f"{t} degrees", f"{t}"]), {"temperature": t}
    if r < 0.7:
        t = rng.choice([rng.randint(16, 28), rng.randint(16, 27) + 0.5])
        return rng.choice([f"{t} degrees celsius", f"{t} celsius", f"{t} C", f"{t} degrees C"]), \
            {"temperature": t, "unit": "celsius"}
    t = rng.randint(60, 80)
    return rng.choice([f"{t} degrees fahrenheit", f"{t} fahrenheit", f"{t} F", f"{t} degrees F"]), \
        {"temperature": t, "unit": "fahrenheit"}


# (canonical name, surface forms, factor to the base unit of its group, group)
UNITS = {
    "kilometers": (["kilometers", "km", "kilometres"], 1000.0, "len"), "miles": (["miles", "mi"], 1609.344, "len"),
    "meters": (["meters", "m", "metres"], 1.0, "len"), "feet": (["feet", "ft"], 0.3048, "len"),
    "inches": (["inches", "in"], 0.0254, "len"), "centimeters": (["centimeters", "cm"], 0.01, "len"),
    "kilograms": (["kilograms", "kg", "kilos"], 1.0, "mass"), "pounds": (["pounds", "lbs", "lb"], 0.45359237, "mass"),
    "grams": (["grams", "g"], 0.001, "mass"), "ounces": (["ounces", "oz"], 0.028349523, "mass"),
    "liters": (["liters", "l", "litres"], 1.0, "vol"), "gallons": (["gallons", "gal"], 3.785411784, "vol"),
    "milliliters": (["milliliters", "ml"], 0.001, "vol"), "cups": (["cups"], 0.2365882365, "vol"),
    "celsius": (["celsius", "degrees celsius", "C"], 0.0, "temp"),
    "fahrenheit": (["fahrenheit", "degrees fahrenheit", "F"], 0.0, "temp"),
}


def convert(value: float, src: str, dst: str) -> float:
    """The real conversion, so the assistant's follow-up answer is true."""
    if UNITS[src][2] == "temp":
        return value * 9 / 5 + 32 if src == "celsius" else (value - 32) * 5 / 9
    return value * UNITS[src][1] / UNITS[dst][1]


def unit_pair(rng: random.Random) -> tuple[str, str, str, str, float]:
    """(value surface + source unit surface, target unit surface, src, dst, value)."""
    src = rng.choice(list(UNITS))
    dst = rng.choice([u for u in UNITS if UNITS[u][2] == UNITS[src][2] and u != src])
    value = rng.choice([rng.randint(1, 100), rng.randint(1, 20), round(rng.uniform(0.5, 50), 1)])
    sform = rng.choice(UNITS[src][0])
    dform = rng.choice([f for f in UNITS[dst][0] if len(f) > 2] or UNITS[dst][0])
    sep = "" if len(sform) <= 3 and rng.random() < 0.5 and sform not in ("in", "C", "F") else " "
    return f"{value}{sep}{sform}", dform, src, dst, value


def fmt_num(x: float) -> str:
    """Short human number for replies: 6.21, 15, 0.5."""
    return f"{x:.2f}".rstrip("0").rstrip(".") if abs(x) < 1000 else f"{x:,.0f}"
