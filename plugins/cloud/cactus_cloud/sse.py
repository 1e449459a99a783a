"""Server-sent events: turn a stream of text lines into (event, data) pairs.

Follows the WHATWG rules the three vendors rely on: ``field: value`` lines, one
optional space after the colon, several ``data`` lines joined by newlines, a
blank line ends an event, lines starting with ``:`` are comments (keep-alives).
An event not closed by a blank line when the stream ends is dropped, as the
spec says; callers detect truncation from the vendor's own end marker.
"""

from __future__ import annotations

from typing import Iterable, Iterator, NamedTuple


class Event(NamedTuple):
    event: str  # "message" when the server names none
    data: str


def iter_events(lines: Iterable[str]) -> Iterator[Event]:
    """Yield each complete event from ``lines`` (without line terminators)."""
    name, data = "", []
    for line in lines:
        line = line.rstrip("\r\n")
        if not line:
            if data:
                yield Event(name or "message", "\n".join(data))
            name, data = "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
        # "id" and "retry" only matter for EventSource reconnection; we never reconnect.
