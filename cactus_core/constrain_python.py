"""Constrained decoding of a Python-style tool call, as Gemma writes them in ``tool_code``.

Gemma's template asks for calls as Python, ``get_weather(city="Paris", days=3)``, in a
fenced ```` ```tool_code ```` block. :class:`PythonCall` checks such a call character by
character, the way :class:`cactus_core.constrain.SchemaJson` checks JSON, and does it
by translating on the fly: the name must be an offered tool's, ``(`` opens the
arguments as a JSON object, each ``key=`` becomes ``"key":``, ``True``/``False``/``None``
become ``true``/``false``/``null``, ``)`` closes the object. The JSON automaton under
it applies the tool's parameter schema, so keys, types, enums and required arguments
are checked exactly as for JSON calls. Strings are taken double-quoted only (a JSON
string with JSON escapes is also a Python string literal); a model that would rather
write single quotes is steered to double ones. Keyword arguments only: positional ones
depend on an order the schema does not fix.
"""
from __future__ import annotations

from typing import Optional, Sequence

from .constrain import NUMBER, CallConstraint, SchemaJson

NAME, KEY_START, KEY, VALUE, DONE = range(5)
_PY_LITERALS = {"True": "true", "False": "false", "None": "null"}


class PythonCall:
    """Incremental check that the text so far is a prefix of ``tool(key=value, ...)`` for one
    of ``tools`` (OpenAI tool dicts), with values following that tool's parameter schema."""

    def __init__(self, tools: Sequence[dict], max_name: int = 128):
        self.by_name = {t["function"]["name"]: t["function"].get("parameters") or {"type": "object"}
                        for t in tools}
        self.max_name = max_name
        self.phase = NAME
        self.name = ""
        self.json: Optional[SchemaJson] = None  # the arguments, as the JSON object they stand for
        self.word = ""  # a Python literal being read (True/False/None)
        self.in_string = self.escape = False
        self.depth = 0  # lists and dicts open inside the current value

    def copy(self) -> "PythonCall":
        c = PythonCall.__new__(PythonCall)
        c.__dict__.update(self.__dict__)
        c.json = self.json.copy() if self.json is not None else None
        return c

    @property
    def done(self) -> bool:
        return self.phase == DONE

    def feed(self, text: str) -> bool:
        """Advance over ``text``; False (the state is then undefined) if it breaks the call."""
        return all(self._char(ch) for ch in text)

    def _char(self, ch: str) -> bool:
        if self.phase == NAME:
            if ch == "(":
                if self.name not in self.by_name:
                    return False
                self.json = SchemaJson(self.by_name[self.name])
                self.phase = KEY_START
                return self.json.feed("{")
            self.name += ch
            return len(self.name) <= self.max_name and any(n.startswith(self.name) for n in self.by_name)
        if self.phase == KEY_START:
            if ch == ")":
                return self._close()
            if ch == " ":
                return self.json.feed(ch)
            if ch.isidentifier():
                self.phase = KEY
                return self.json.feed('"' + ch)
            return False
        if self.phase == KEY:
            if ch == "=":
                self.phase = VALUE
                return self.json.feed('":')
            return ("_" + ch).isidentifier() and self.json.feed(ch)
        if self.phase == VALUE:
            return self._value_char(ch)
        return False  # DONE: the call is whole

    def _value_char(self, ch: str) -> bool:
        if self.in_string:
            if self.escape:
                if ch == "/":  # JSON's "\/" is not a Python escape
                    return False
                self.escape = False
            elif ch == "\\":
                self.escape = True
            elif ch == '"':
                self.in_string = False
            return self.json.feed(ch)
        if ch in "eE" and self.json.mode == NUMBER:  # an exponent, not a literal
            return self.json.feed(ch)
        if self.word:
            if ch.isalpha():
                return self._word(self.word + ch)
            if self.word not in _PY_LITERALS or not self.json.feed(_PY_LITERALS[self.word]):
                return False
            self.word = ""
        if ch.isalpha():
            return self._word(ch)
        if ch == '"':
            self.in_string = True
        elif ch in "[{":
            self.depth += 1
        elif ch in "]}":
            if self.depth == 0:  # only ")" ends the arguments
                return False
            self.depth -= 1
        elif self.depth == 0 and ch == ",":
            self.phase = KEY_START
        elif self.depth == 0 and ch == ")":
            return self._close()
        return self.json.feed(ch)

    def _word(self, word: str) -> bool:
        """A Python literal so far: it must still become one the schema takes here."""
        fits = [lit for lit in _PY_LITERALS if lit.startswith(word)]
        if not any(self.json.copy().feed(_PY_LITERALS[lit]) for lit in fits):
            return False
        self.word = word
        return True

    def _close(self) -> bool:
        if not self.json.feed("}"):  # a required argument is missing
            return False
        self.phase = DONE
        return True


class PythonCallConstraint(CallConstraint):
    """:class:`CallConstraint` for Python-style calls: ``prefix`` is what the opening
    already wrote of the call (``"get_weather("`` or ``""``)."""

    def __init__(self, prefix: str, tools: Sequence[dict], closing: str = "\n```", args_key: str = "arguments"):
        self.state = PythonCall(tools)
        if not self.state.feed(prefix):
            raise ValueError(f"the forced opening {prefix!r} does not start a call of these tools")
        self.closing = closing
        self._texts: dict[int, str] = {}
