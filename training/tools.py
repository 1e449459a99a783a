"""The phone and home tools the default model learns to call, as OpenAI function schemas.

Every dict is built with its keys in sorted order (see `canonical`): jinja2's stock
`tojson` sorts keys while transformers' does not, and sorted input makes the two agree.
"""
from __future__ import annotations

from typing import Any

DAYS = ["today", "tomorrow", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]


def canonical(x: Any) -> Any:
    """Recursively sort dict keys so every JSON renderer prints the same text."""
    if isinstance(x, dict):
        return {k: canonical(x[k]) for k in sorted(x)}
    if isinstance(x, list):
        return [canonical(v) for v in x]
    return x


def _p(type_: str, desc: str, **extra: Any) -> dict:
    return {"type": type_, "description": desc, **extra}


def _tool(name: str, desc: str, props: dict, required: list[str]) -> dict:
    return canonical({"type": "function", "function": {
        "name": name, "description": desc,
        "parameters": {"type": "object", "properties": props, "required": required}}})


_TIME = "Time of day in 24-hour HH:MM format"
_DAY = "Day: today, tomorrow or a weekday name"

TOOLS: dict[str, dict] = {t["function"]["name"]: t for t in [
    _tool("set_alarm", "Set an alarm on the phone",
          {"time": _p("string", _TIME), "label": _p("string", "Optional alarm label")}, ["time"]),
    _tool("set_timer", "Start a countdown timer; give only the units the user mentioned",
          {"hours": _p("integer", "Hours"), "minutes": _p("integer", "Minutes"),
           "seconds": _p("integer", "Seconds"), "label": _p("string", "Optional timer label")}, []),
    _tool("create_reminder", "Create a reminder",
          {"text": _p("string", "What to be reminded about"), "time": _p("string", _TIME),
           "day": _p("string", _DAY, enum=DAYS)}, ["text"]),
    _tool("send_message", "Send a text message to a contact",
          {"recipient": _p("string", "Contact name"), "message": _p("string", "Message text")},
          ["recipient", "message"]),
    _tool("make_call", "Place a phone call", {"contact": _p("string", "Contact name or number")}, ["contact"]),
    _tool("create_event", "Add an event to the calendar",
          {"title": _p("string", "Event title"), "day": _p("string", _DAY, enum=DAYS),
           "time": _p("string", _TIME), "location": _p("string", "Optional place")}, ["title", "day", "time"]),
    _tool("get_calendar", "List calendar events for a day",
          {"day": _p("string", _DAY, enum=DAYS)}, ["day"]),
    _tool("get_weather", "Get the weather forecast",
          {"location": _p("string", "City; omit for the current location"),
           "day": _p("string", _DAY, enum=DAYS)}, []),
    _tool("play_music", "Play music by song, artist or playlist",
          {"song": _p("string", "Song title"), "artist": _p("string", "Artist name"),
           "playlist": _p("string", "Playlist name")}, []),
    _tool("set_lights", "Turn smart lights on or off, optionally with a brightness",
          {"room": _p("string", "Room name"), "state": _p("string", "on or off", enum=["on", "off"]),
           "brightness": _p("integer", "Brightness percent 0-100")}, ["room", "state"]),
    _tool("set_thermostat", "Set the thermostat temperature",
          {"temperature": _p("number", "Target temperature"),
           "unit": _p("string", "Temperature unit", enum=["celsius", "fahrenheit"])}, ["temperature"]),
    _tool("web_search", "Search the web", {"query": _p("string", "Search query")}, ["query"]),
    _tool("create_note", "Save a note", {"content": _p("string", "Note text")}, ["content"]),
    _tool("get_directions", "Get directions to a destination",
          {"destination": _p("string", "Where to go"),
           "mode": _p("string", "Travel mode", enum=["driving", "walking", "transit", "cycling"])},
          ["destination"]),
    _tool("convert_units", "Convert a value between units",
          {"value": _p("number", "Amount to convert"), "from_unit": _p("string", "Unit to convert from"),
           "to_unit": _p("string", "Unit to convert to")}, ["value", "from_unit", "to_unit"]),
    _tool("set_volume", "Set the media volume", {"level": _p("integer", "Volume percent 0-100")}, ["level"]),
    _tool("set_do_not_disturb", "Turn do not disturb mode on or off",
          {"enabled": _p("boolean", "true to turn it on")}, ["enabled"]),
    _tool("add_to_shopping_list", "Add items to the shopping list",
          {"items": _p("array", "Items to add", items={"type": "string"})}, ["items"]),
    _tool("get_news", "Get the latest news headlines", {"topic": _p("string", "Optional topic")}, []),
    _tool("translate_text", "Translate text into another language",
          {"text": _p("string", "Text to translate"), "target_language": _p("string", "Language name")},
          ["text", "target_language"]),
    _tool("lock_door", "Lock or unlock a smart door lock",
          {"door": _p("string", "Which door"), "locked": _p("boolean", "true to lock, false to unlock")},
          ["door", "locked"]),
]}

# What each tool lets the assistant do, for refusals when it is not offered.
CAPABILITY = {
    "set_alarm": "set alarms", "set_timer": "start timers", "create_reminder": "create reminders",
    "send_message": "send messages", "make_call": "place calls", "create_event": "add calendar events",
    "get_calendar": "read your calendar", "get_weather": "check the weather", "play_music": "play music",
    "set_lights": "control the lights", "set_thermostat": "control the thermostat",
    "web_search": "search the web", "create_note": "save notes", "get_directions": "give directions",
    "convert_units": "convert units", "set_volume": "change the volume",
    "set_do_not_disturb": "change do not disturb", "add_to_shopping_list": "edit the shopping list",
    "get_news": "fetch the news", "translate_text": "translate text", "lock_door": "control the door locks",
}
