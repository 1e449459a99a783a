"""Find the tool calls in a model's output and return them OpenAI-style.

Each model family writes calls its own way:

- ``qwen``:   ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``, possibly several;
- ``llama3``: ``<|python_tag|>{"name": ..., "parameters": {...}}`` (calls may be
  joined by ``;``), or the whole reply being such a JSON object;
- ``gemma``:  a fenced ```` ```tool_code ```` block holding python calls
  ``name(arg=value, ...)`` (or a ``[call(...), ...]`` list, bare or fenced), or
  JSON ``{"name": ..., "parameters": {...}}``.

Python calls are read with :mod:`ast` and literal values only: nothing is evaluated.
Text that looks like a call but does not parse stays in the response, so a
malformed call is visible to the user instead of silently dropped.
"""

from __future__ import annotations

import ast
import json
import re

STYLES = ("qwen", "llama3", "gemma", "none")

_QWEN_RE = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
# Only tool fences: a ```python block the user asked for is an answer, not a call.
_FENCE_RE = re.compile(r"```(?:tool_code|tool_call)[ \t]*\n?(.*?)(?:```|$)", re.S)
_LLAMA_END = ("<|eom_id|>", "<|eot_id|>")
# Python has no true/false/null, but models write them inside python-style calls.
_JSON_NAMES = {"true": True, "false": False, "null": None, "True": True, "False": False, "None": None}


def detect_style(template: str | None, vocab_tokens=()) -> str:
    """Guess the tool-call style from the chat template text (or, failing that, the vocabulary)."""
    text = template or ""
    tokens = set(vocab_tokens)
    if "<tool_call>" in text:
        return "qwen"
    if "<|python_tag|>" in text or "<|start_header_id|>" in text:
        return "llama3"
    if "<start_of_turn>" in text or "tool_code" in text:
        return "gemma"
    if "<tool_call>" in tokens:
        return "qwen"
    if "<|python_tag|>" in tokens:
        return "llama3"
    if "<start_of_turn>" in tokens:
        return "gemma"
    return "none"


def _call_from_obj(obj) -> dict | None:
    """{"name", "arguments"|"parameters"} -> {"name", "arguments": dict}, else None."""
    if not isinstance(obj, dict):
        return None
    if isinstance(obj.get("function"), dict):  # OpenAI shape echoed back
        obj = obj["function"]
    name = obj.get("name")
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except json.JSONDecodeError:
            return None
    if not isinstance(name, str) or not name or not isinstance(args, dict):
        return None
    return {"name": name, "arguments": args}


def _json_calls(text: str) -> list[dict] | None:
    """One JSON call, a JSON list of calls, or JSON calls separated by ';'."""
    text = text.strip()
    if not text:
        return None
    try:
        objs = [json.loads(text)]
    except json.JSONDecodeError:
        # Llama 3 may chain calls with ';'; raw_decode walks them without guessing at splits.
        objs, pos, dec = [], 0, json.JSONDecoder()
        while pos < len(text):
            try:
                obj, pos = dec.raw_decode(text, pos)
            except json.JSONDecodeError:
                return None
            objs.append(obj)
            while pos < len(text) and text[pos] in "; \t\r\n":
                pos += 1
    if len(objs) == 1 and isinstance(objs[0], list):
        objs = objs[0]
    calls = [_call_from_obj(o) for o in objs]
    return calls if calls and all(calls) else None


def _literal(node):
    """A python literal expression as a JSON-ish value; raises ValueError otherwise."""
    if isinstance(node, ast.Name) and node.id in _JSON_NAMES:
        return _JSON_NAMES[node.id]
    if isinstance(node, ast.Dict):
        return {_literal(k): _literal(v) for k, v in zip(node.keys, node.values)}
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [_literal(e) for e in node.elts]
    return ast.literal_eval(node)  # constants, negative numbers; rejects names and calls


def _call_name(func) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):  # brave_search.call(...) -> "brave_search.call"
        return f"{_call_name(func.value)}.{func.attr}"
    raise ValueError("not a plain function name")


def _python_calls(text: str, tools=None) -> list[dict] | None:
    """`name(a=1)`, several such lines, or `[name(a=1), other()]` -> calls; None if not that."""
    text = text.strip()
    if not text:
        return None
    try:
        tree = ast.parse(text, mode="exec")
    except SyntaxError:
        return None
    nodes = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr):
            return None
        value = stmt.value
        nodes.extend(value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value])
    params = _param_order(tools)
    calls = []
    try:
        for node in nodes:
            if not isinstance(node, ast.Call):
                return None
            name = _call_name(node.func)
            args = {}
            if node.args:  # positional: only meaningful when the schema gives an order
                order = params.get(name)
                if order is None or len(node.args) > len(order):
                    return None
                args.update({order[i]: _literal(a) for i, a in enumerate(node.args)})
            for kw in node.keywords:
                if kw.arg is None:
                    return None  # **kwargs
                args[kw.arg] = _literal(kw.value)
            calls.append({"name": name, "arguments": args})
    except (ValueError, TypeError, SyntaxError, RecursionError):
        return None
    return calls or None


def _param_order(tools) -> dict[str, list[str]]:
    order = {}
    for tool in tools or ():
        fn = tool.get("function", tool) if isinstance(tool, dict) else {}
        props = (fn.get("parameters") or {}).get("properties") or {}
        if isinstance(fn.get("name"), str):
            order[fn["name"]] = list(props)
    return order


def _known(calls, tools):
    """Unmarked calls are ambiguous: with schemas at hand, accept only known tool names."""
    names = _param_order(tools)
    if calls and names and not all(c["name"] in names for c in calls):
        return None
    return calls


def _strip_spans(text: str, spans: list[tuple[int, int]]) -> str:
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + text[end:]
    return text.strip()


def _parse_qwen(text: str, tools=None):
    calls, spans = [], []
    for m in _QWEN_RE.finditer(text):
        found = _json_calls(m.group(1)) or _python_calls(m.group(1), tools)
        if found:
            calls += found
            spans.append(m.span())
    return _strip_spans(text, spans), calls


def _parse_llama3(text: str, tools=None):
    tag = text.find("<|python_tag|>")
    if tag >= 0:
        body = text[tag + len("<|python_tag|>"):]
        for end in _LLAMA_END:
            body = body.split(end, 1)[0]
        found = _json_calls(body) or _python_calls(body, tools)
        if found:
            return text[:tag].strip(), found
        return text, []
    # The whole reply is the call: JSON, or (decoders drop the special <|python_tag|>)
    # a python call, trusted only when it names one of the request's tools.
    found = _known(_json_calls(text) or (_python_calls(text, tools) if tools else None), tools)
    return ("", found) if found else (text, [])


def _parse_gemma(text: str, tools=None):
    calls, spans = [], []
    for m in _FENCE_RE.finditer(text):
        found = _python_calls(m.group(1), tools) or _json_calls(m.group(1))
        if found:
            calls += found
            spans.append(m.span())
    if calls:
        return _strip_spans(text, spans), calls
    # Unfenced: the whole reply is `[f(a=1)]`, `f(a=1)` or a JSON call.
    stripped = text.strip()
    if stripped.startswith(("[", "{")) or re.match(r"^[A-Za-z_][\w.]*\(", stripped):
        found = _known(_json_calls(stripped) or _python_calls(stripped, tools), tools)
        if found:
            return "", found
    return text, []


_PARSERS = {"qwen": _parse_qwen, "llama3": _parse_llama3, "gemma": _parse_gemma}


def parse_tool_calls(text: str, style: str, tools=None) -> tuple[str, list[dict]]:
    """Split model output into (response text, [{"name": str, "arguments": dict}, ...]).

    ``tools`` (the request's schemas) is optional; with it, positional arguments in
    python-style calls map to parameter names in schema order.
    """
    if style not in STYLES:
        raise ValueError(f"unknown tool-call style {style!r}; expected one of {', '.join(STYLES)}")
    if style == "none" or not text:
        return text, []
    return _PARSERS[style](text, tools)


_THINK_RE = re.compile(r"^\s*(?:<think>)?(.*?)</think>\s*", re.S)


def split_reasoning(text: str) -> tuple[str, str | None]:
    """Separate a leading ``<think>...</think>`` block (Qwen3, DeepSeek-R1): (answer, reasoning)."""
    m = _THINK_RE.match(text)
    if not m:
        return text, None
    return text[m.end():], m.group(1).strip()


# Where call markup starts, per style; a reply that *opens* with one of the
# `bare` prefixes may be a whole-reply call (llama3 / gemma JSON or python).
_MARKERS = {"qwen": ("<tool_call>",), "llama3": ("<|python_tag|>",),
            "gemma": ("```tool_code", "```tool_call"), "none": ()}
_BARE = {"llama3": ("{", "["), "gemma": ("{", "[")}


class CallMarkupFilter:
    """Stream the plain text of a reply and withhold its tool-call markup.

    ``feed(piece)`` returns what may be shown now: text up to the first call
    marker; a tail that could still grow into a marker is held back until the
    next piece decides it. After a marker nothing more is shown: the calls come
    back parsed in the result instead. For styles whose whole reply can be a call,
    a reply opening with ``{`` or ``[`` is held entirely until ``finish``.
    ``finish(has_calls)`` releases what was held when the reply held no call.
    """

    def __init__(self, style: str):
        self.markers = _MARKERS.get(style, ())
        self.bare = _BARE.get(style, ())
        self.held = ""
        self.stopped = False   # a marker was seen: show nothing more
        self.hold_all = False  # the reply opened like a bare call: decide at the end
        self.started = False

    def feed(self, piece: str) -> str:
        if self.stopped:
            return ""
        text = self.held + piece
        if not self.started and text.strip():
            self.started = True
            self.hold_all = bool(self.bare) and text.lstrip().startswith(self.bare)
        if self.hold_all:
            self.held = text
            return ""
        cut = min((i for i in (text.find(m) for m in self.markers) if i >= 0), default=-1)
        if cut >= 0:
            self.stopped, self.held = True, ""
            return text[:cut]
        keep = max((k for m in self.markers for k in range(1, len(m)) if text.endswith(m[:k])), default=0)
        self.held = text[len(text) - keep:]
        return text[:len(text) - keep]

    def finish(self, has_calls: bool = False) -> str:
        out = "" if self.stopped or (self.hold_all and has_calls) else self.held
        self.held = ""
        return out


def forced_call_constraint(style: str, opening: str, tools: list[dict]):
    """A :class:`cactus_core.constrain.CallConstraint` for a call forced with ``opening``:
    JSON for qwen and llama3, Python (:mod:`cactus_core.constrain_python`) for gemma."""
    from .constrain import CallConstraint
    from .constrain_python import PythonCallConstraint

    if style == "qwen":
        return CallConstraint(opening.removeprefix("<tool_call>\n"), tools, closing="\n</tool_call>")
    if style == "llama3":
        return CallConstraint(opening, tools, args_key="parameters")
    if style == "gemma":
        return PythonCallConstraint(opening.removeprefix("```tool_code\n"), tools, closing="\n```")
    return None


def call_watcher(style: str, tools: list[dict]):
    """A :class:`cactus_core.constrain.CallWatcher` that constrains the calls a model opens
    on its own, or None where calls have no opening markup to spot (llama3)."""
    from .constrain import CallWatcher
    from .constrain_python import PythonCallConstraint

    if style == "qwen":
        return CallWatcher(tools, "<tool_call>")
    if style == "gemma":
        return CallWatcher(tools, "```tool_code\n", constraint=PythonCallConstraint)
    return None


def forced_call_prefix(style: str, name: str | None = None) -> str:
    """Text that opens the assistant turn so the model can only go on with a call.

    ``tool_choice: "required"`` opens the call markup; a named function also writes
    the call's name, so the model fills in just the arguments. This is how the
    choice is enforced: the decoder never gets to pick plain text, and for the JSON
    styles :func:`forced_call_constraint` keeps what follows valid JSON.
    The opening stops before the space that follows a colon: tokenizers glue that
    space to the next token, and a prompt ending in a bare space derails the model.
    """
    quoted = json.dumps(name, ensure_ascii=False) if name else None
    if style == "qwen":
        return "<tool_call>\n" + (f'{{"name": {quoted}, "arguments":' if quoted else "")
    if style == "llama3":
        return f'{{"name": {quoted}, "parameters":' if quoted else '{"name": "'
    if style == "gemma":
        return "```tool_code\n" + (f"{name}(" if name else "")
    raise ValueError("this model's chat template has no tool-call format, so a tool call cannot be forced")
