"""Constrained decoding of a forced tool call: valid JSON that follows the tool's schema.

``tool_choice: "required"`` (or a named function) opens the assistant turn with the
model's call markup (tool_calls.forced_call_prefix). That alone does not stop a small
model from writing a call that does not parse. :class:`CallConstraint` goes further:
at each step the sampler may only pick a token whose text keeps the call a prefix of
``{"name": <an offered tool>, "arguments": <an object of that tool's parameters>}``,
and decoding ends the moment that object is complete.

The check is a character-level pushdown automaton (:class:`SchemaJson`) guided by a
small subset of JSON Schema (``type``, ``properties``, ``required``, ``items``,
``enum``), so a token is tested by feeding its characters to a copy of the state: no
grammar compilation, no vocabulary-wide tables. Candidate tokens are tried in order
of their logits; the first one usually passes. Strings (1000 characters), numbers (32),
runs of whitespace (16, room for pretty-printed JSON), arrays and free-form objects (64 items) have a size cap, so
even a model that never wants to stop ends up with a whole call.
"""
from __future__ import annotations

from typing import Callable, Optional, Sequence

import numpy as np

from .errors import BadRequestError

_WS = " \t\n\r"
_LITERALS = {"t": "true", "f": "false", "n": "null"}
_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\", "/": "/"}
_ALL_TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
# Where the automaton is: expecting a value, inside a string/number/literal, or
# between the parts of an object or array.
VALUE, ARRAY_START, KEY_OR_END, KEY, COLON, COMMA_OR_END, STRING, NUMBER, LITERAL, DONE = range(10)
BY_NAME = {"$by_name": True}  # marks the arguments object, whose schema is the named tool's


class _Frame:
    """An open object or array, with the schema it follows."""

    __slots__ = ("kind", "schema", "seen", "key", "count", "values")

    def __init__(self, kind: str, schema: Optional[dict]):
        self.kind, self.schema = kind, schema
        self.seen: list[str] = []  # object keys written so far
        self.key: Optional[str] = None
        self.count = 0
        self.values: dict[str, str] = {}  # string values by key (the call's "name")

    def copy(self) -> "_Frame":
        c = _Frame(self.kind, self.schema)
        c.seen, c.key, c.count, c.values = list(self.seen), self.key, self.count, dict(self.values)
        return c


def _types(schema: Optional[dict]) -> frozenset:
    if not schema:
        return _ALL_TYPES
    if "enum" in schema:
        kinds = {"string" if isinstance(v, str) else "boolean" if isinstance(v, bool) else
                 "integer" if isinstance(v, int) else "number" if isinstance(v, float) else "null" for v in schema["enum"]}
        return frozenset(kinds)
    t = schema.get("type")
    if t is None:
        return frozenset({"object"}) if "properties" in schema else _ALL_TYPES
    types = frozenset([t] if isinstance(t, str) else t)
    return types | {"integer"} if "number" in types else types


class SchemaJson:
    """Incremental check that the text fed so far is a prefix of a JSON value following
    ``schema``; ``tools`` maps tool names to their parameter schemas for ``BY_NAME``."""

    def __init__(self, schema: Optional[dict] = None, tools: Optional[dict] = None,
                 max_string: int = 1000, max_items: int = 64, max_space: int = 16):
        self.schema, self.tools = schema, tools or {}
        self.max_string, self.max_items, self.max_space = max_string, max_items, max_space
        self.space = 0  # whitespace characters in a row, outside strings
        self.frames: list[_Frame] = []
        self.mode = VALUE
        self.value_schema = schema  # of the value about to start
        self.buf = ""  # the string, number or literal being read
        self.escape = ""  # inside a string: "" | "\\" | "u" + hex digits so far
        self.is_key = False
        self.options: Optional[list[str]] = None  # the strings the current one may become
        self.number_type = "number"

    def copy(self) -> "SchemaJson":
        c = SchemaJson.__new__(SchemaJson)
        c.__dict__.update(self.__dict__)
        c.frames = [f.copy() for f in self.frames]
        return c

    @property
    def done(self) -> bool:
        """A whole value has been read (trailing whitespace allowed)."""
        return self.mode == DONE or (self.mode == NUMBER and not self.frames and _number_complete(self.buf))

    def feed(self, text: str) -> bool:
        """Advance over ``text``; False (the state is then undefined) if it breaks the JSON or the schema."""
        return all(self._char(ch) for ch in text)

    # --- the automaton ---------------------------------------------------------
    def _char(self, ch: str) -> bool:
        m = self.mode
        if m == STRING:
            return self._string_char(ch)
        if m == NUMBER:
            if ch in "0123456789+-.eE":
                if (self.number_type == "integer" and ch in ".eE+") or len(self.buf) >= 32 \
                        or not _number_prefix(self.buf + ch):
                    return False
                self.buf += ch
                return True
            if not _number_complete(self.buf):
                return False
            self._close_value()
            return self._char(ch)
        if m == LITERAL:
            self.buf += ch
            if not any(lit.startswith(self.buf) for lit in _LITERALS.values()):
                return False
            if self.buf in _LITERALS.values():
                self._close_value()
            return True
        if ch in _WS:
            self.space += 1
            return self.space <= self.max_space
        self.space = 0
        if m in (VALUE, ARRAY_START):
            if m == ARRAY_START and ch == "]":
                return self._close_container("[")
            return self._value_start(ch)
        if m in (KEY, KEY_OR_END):
            if m == KEY_OR_END and ch == "}":
                return self._close_container("{")
            keys = self._allowed_keys()
            if ch != '"' or keys == []:
                return False
            self.mode, self.buf, self.is_key, self.options = STRING, "", True, keys
            return True
        if m == COLON:
            if ch != ":":
                return False
            top = self.frames[-1]
            self.mode, self.value_schema = VALUE, self._schema_for_key(top, top.key)
            return True
        if m == COMMA_OR_END:
            top = self.frames[-1]
            if ch == ",":
                if top.kind == "{":
                    if self._allowed_keys() == []:  # None means any key
                        return False
                    self.mode = KEY
                    return True
                if top.count >= self.max_items:
                    return False
                self.mode, self.value_schema = VALUE, (top.schema or {}).get("items")
                return True
            if ch in "}]":
                return ch == ("}" if top.kind == "{" else "]") and self._close_container(top.kind)
        return False  # DONE, or a character that fits nowhere

    def _value_start(self, ch: str) -> bool:
        schema = self.value_schema
        types = _types(schema)
        if ch == "{" and "object" in types:
            self.frames.append(_Frame("{", schema))
            self.mode = KEY_OR_END
        elif ch == "[" and "array" in types:
            self.frames.append(_Frame("[", schema))
            self.mode, self.value_schema = ARRAY_START, (schema or {}).get("items")
        elif ch == '"' and "string" in types:
            enum = (schema or {}).get("enum")
            self.mode, self.buf, self.is_key = STRING, "", False
            self.options = [v for v in enum if isinstance(v, str)] if enum is not None else None
        elif ch in "-0123456789" and types & {"number", "integer"}:
            self.mode, self.buf = NUMBER, ch
            self.number_type = "number" if "number" in types else "integer"
        elif ch in _LITERALS and ("boolean" if ch != "n" else "null") in types:
            self.mode, self.buf = LITERAL, ch
        else:
            return False
        return True

    def _string_char(self, ch: str) -> bool:
        if self.escape:
            if self.escape == "\\":
                if ch == "u":
                    self.escape = "u"
                    return True
                self.escape = ""
                return ch in _ESCAPES and self._string_add(_ESCAPES[ch])
            if ch not in "0123456789abcdefABCDEF":
                return False
            self.escape += ch
            if len(self.escape) == 5:
                code, self.escape = int(self.escape[1:], 16), ""
                return self._string_add(chr(code))
            return True
        if ch == '"':
            if self.options is not None and self.buf not in self.options:
                return False
            top = self.frames[-1] if self.frames else None
            if self.is_key:
                top.key = self.buf
                top.seen.append(self.buf)
                self.mode = COLON
                return True
            if top is not None and top.kind == "{":
                top.values[top.key] = self.buf
            self._close_value()
            return True
        if len(self.buf) >= self.max_string:
            return False  # only the closing quote may come now
        if ch == "\\":  # an escape could spell a character no option has: none in keys and enums
            self.escape = "\\"
            return self.options is None
        return ord(ch) >= 0x20 and self._string_add(ch)  # raw control characters are not JSON

    def _string_add(self, ch: str) -> bool:
        self.buf += ch
        return self.options is None or any(o.startswith(self.buf) for o in self.options)

    def _allowed_keys(self) -> Optional[list[str]]:
        """Keys the open object may still take (None: any key); [] once none is left."""
        top = self.frames[-1]
        props = (top.schema or {}).get("properties")
        if props is None:
            return None if len(top.seen) < self.max_items else []
        left = [k for k in props if k not in top.seen]
        return left[:1] if top.schema.get("x-ordered") else left

    def _schema_for_key(self, frame: _Frame, key: str) -> Optional[dict]:
        schema = ((frame.schema or {}).get("properties") or {}).get(key)
        if schema is BY_NAME:  # the arguments of whichever tool was named
            return self.tools.get(frame.values.get("name"), {"type": "object"})
        return schema

    def _close_value(self) -> None:
        self.buf = ""
        self.options = None
        if self.frames:
            self.frames[-1].count += 1
            self.mode = COMMA_OR_END
        else:
            self.mode = DONE

    def _close_container(self, kind: str) -> bool:
        top = self.frames[-1]
        if top.kind != kind:
            return False
        schema = top.schema or {}
        required = set(schema.get("required") or ())
        if "properties" in schema:  # a required key the schema never declares cannot be written
            required &= set(schema["properties"])
        if kind == "{" and not required <= set(top.seen):
            return False  # a required key is still missing
        self.frames.pop()
        self._close_value()
        return True


def _number_prefix(s: str) -> bool:
    """Whether ``s`` can still grow into a JSON number."""
    i, n = (1 if s[:1] == "-" else 0), len(s)
    if i == n:
        return True
    if s[i] == "0":
        i += 1
    elif s[i].isdigit():
        while i < n and s[i].isdigit():
            i += 1
    else:
        return False
    for marks in (".", "eE"):
        if i < n and s[i] in marks:
            i += 1
            if marks == "eE" and i < n and s[i] in "+-":
                i += 1
            if i == n:
                return True
            if not s[i].isdigit():
                return False
            while i < n and s[i].isdigit():
                i += 1
    return i == n


def _number_complete(s: str) -> bool:
    return _number_prefix(s) and s[-1:].isdigit()


def call_schema(tools: Sequence[dict], args_key: str = "arguments") -> tuple[dict, dict]:
    """The JSON Schema of one call of ``tools`` (OpenAI tool dicts), and their parameter schemas by name."""
    by_name = {t["function"]["name"]: t["function"].get("parameters") or {"type": "object"} for t in tools}
    # "name" must come first: the arguments' schema depends on it
    schema = {"type": "object", "required": ["name", args_key], "x-ordered": True,
              "properties": {"name": {"type": "string", "enum": list(by_name)}, args_key: BY_NAME}}
    return schema, by_name


class CallConstraint:
    """Which tokens may come next in a forced tool call, and when the call is finished.

    ``prefix`` is the JSON the opening already wrote (``'{"name": "x", "arguments":'``
    or ``""``); ``closing`` the markup that ends a call (``"\\n</tool_call>"`` for
    Qwen), which the engine adds once the object is complete.
    """

    def __init__(self, prefix: str, tools: Sequence[dict], closing: str = "", args_key: str = "arguments"):
        schema, by_name = call_schema(tools, args_key)
        self.state = SchemaJson(schema, by_name)
        if not self.state.feed(prefix):
            raise ValueError(f"the forced opening {prefix!r} does not start a call of these tools")
        self.closing = closing
        self._texts: dict[int, str] = {}

    @property
    def done(self) -> bool:
        return self.state.done

    def allows(self, piece: str) -> bool:
        """Whether ``piece`` may come next: it must add text and keep the call valid."""
        return bool(piece) and self.state.copy().feed(piece)

    def advance(self, piece: str) -> None:
        if not self.state.feed(piece):
            raise ValueError(f"token {piece!r} breaks the forced call")

    def mask(self, logits: np.ndarray, token_text: Callable[[int], str], first: int = 64,
             greedy: bool = False) -> np.ndarray:
        """``logits`` with every token that may not come next set to ``-inf``.

        The ``first`` most likely tokens are tested, then (if none passes) the rest in
        order of likelihood until one does. ``greedy`` keeps only the most likely
        allowed token, found by testing in order of likelihood (usually one test).
        """
        out = np.full(logits.shape, -np.inf, dtype=np.float64)
        k = min(first, logits.size)
        top = np.argpartition(-logits, k - 1)[:k]
        if greedy:
            top = top[np.argsort(-logits[top], kind="stable")]
        for tok in top:
            if self.allows(self._text(int(tok), token_text)):
                out[tok] = logits[tok]
                if greedy:
                    return out
        if np.isfinite(out).any():
            return out
        for tok in np.argsort(-logits, kind="stable")[k:]:
            if self.allows(self._text(int(tok), token_text)):
                out[tok] = logits[tok]
                return out
        raise BadRequestError("tool_choice: no token of the model's vocabulary can continue the forced call "
                              "under this tool's parameter schema")

    def _text(self, tok: int, token_text: Callable[[int], str]) -> str:
        text = self._texts.get(tok)
        if text is None:
            text = self._texts[tok] = token_text(tok)
        return text


class CallWatcher:
    """Constrains every call a model opens on its own (``tool_choice`` auto).

    Plain text is left alone; from the call markup's opening (``<tool_call>`` for
    Qwen) to the end of the call's JSON object, a :class:`CallConstraint` applies,
    then the model writes the closing markup itself and may go on or open another
    call. Decoding never ends because of it (``done`` is always False).
    """

    done = False

    def __init__(self, tools: Sequence[dict], opening: str = "<tool_call>", args_key: str = "arguments",
                 constraint: type = None):
        self.tools, self.opening, self.args_key = tools, opening, args_key
        self.constraint = constraint or CallConstraint  # PythonCallConstraint for tool_code calls
        self.tail = ""  # the last characters of plain text, to spot the opening
        self.active: Optional[CallConstraint] = None

    def mask(self, logits: np.ndarray, token_text: Callable[[int], str], greedy: bool = False) -> np.ndarray:
        if self.active is None:
            return logits
        return self.active.mask(logits, token_text, greedy=greedy)

    def advance(self, piece: str) -> None:
        if self.active is not None:
            self.active.advance(piece)
            if self.active.done:
                self.active, self.tail = None, ""
            return
        self.tail = (self.tail + piece)[-len(self.opening):]
        if self.tail == self.opening:
            self.active = self.constraint("", self.tools, args_key=self.args_key)
