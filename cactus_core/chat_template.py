"""Chat templates: validate OpenAI-style requests and render them with jinja2.

The prompt must be byte-identical to what ``transformers``' ``apply_chat_template``
produces, because models are trained on exactly that text.  So the jinja
environment mirrors the one transformers builds (sandboxed, ``trim_blocks``,
``lstrip_blocks``, loop controls, its own ``tojson``, ``raise_exception``,
``strftime_now``, a guarded ``dict``/``namespace``, the ``{% generation %}`` tag)
and the template sees the same variables: ``messages``, ``tools``, ``documents``,
``add_generation_prompt``, the named special tokens, plus any extra keyword
arguments (``enable_thinking=False``...).

Requests are validated first, so a bad message gets a one-line
:class:`BadRequestError` here rather than a jinja traceback later.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from functools import lru_cache
from typing import Any, Optional

from cactus_core.errors import BadRequestError, ModelLoadError

ROLES = ("system", "user", "assistant", "tool", "ipython")
# OpenAI's newer "developer" role means "system" to every open-weight template.
ROLE_ALIASES = {"developer": "system"}
# Names a message's reasoning may arrive under; templates read reasoning_content
# (gpt-oss reads thinking), so transformers fills both from whichever is given.
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")
# OpenAI allows [a-zA-Z0-9_-]{1,64}; we also need the name to start like an
# identifier so python-call tool formats (Gemma) can express it.
TOOL_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")


# ---------------------------------------------------------------- validation

def _text_content(content: Any, where: str) -> str:
    """A str, or OpenAI content parts [{"type": "text", "text": ...}] joined by newlines."""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        texts = []
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise BadRequestError(
                    f"{where}.content[{j}] is a {kind!r} part; only {{'type': 'text', 'text': ...}} "
                    "content parts are supported")
            if not isinstance(part.get("text"), str):
                raise BadRequestError(f"{where}.content[{j}].text must be a string")
            texts.append(part["text"])
        return "\n".join(texts)
    raise BadRequestError(
        f"{where}.content must be a string or a list of text parts, got {type(content).__name__}")


def _arguments(args: Any, where: str) -> dict:
    """Tool-call arguments as a dict: OpenAI sends a JSON string, templates want a mapping."""
    if isinstance(args, str):
        if not args.strip():
            return {}
        try:
            args = json.loads(args)
        except json.JSONDecodeError as e:
            raise BadRequestError(f"{where} is not valid JSON ({e.msg} at char {e.pos})") from None
    if not isinstance(args, dict):
        raise BadRequestError(f"{where} must be a JSON object, got {type(args).__name__}")
    return args


def _tool_calls(calls: Any, where: str) -> list[dict]:
    if not isinstance(calls, (list, tuple)) or not calls:
        raise BadRequestError(f"{where}.tool_calls must be a non-empty list")
    out = []
    for j, call in enumerate(calls):
        w = f"{where}.tool_calls[{j}]"
        if not isinstance(call, dict):
            raise BadRequestError(f"{w} must be an object like {{'type': 'function', 'function': {{...}}}}")
        # Accept the flat {"name", "arguments"} shape some clients send; emit OpenAI's.
        fn = call.get("function", call)
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise BadRequestError(f"{w}.function.name must be a non-empty string")
        if call.get("type", "function") != "function":
            raise BadRequestError(f"{w}.type must be 'function', got {call.get('type')!r}")
        norm = {"type": "function",
                "function": {"name": fn["name"],
                             "arguments": _arguments(fn.get("arguments", {}), f"{w}.function.arguments")}}
        if call.get("id") is not None:
            if not isinstance(call["id"], str):
                raise BadRequestError(f"{w}.id must be a string")
            norm["id"] = call["id"]
        out.append(norm)
    return out


def validate_messages(messages: Any) -> list[dict]:
    """Check an OpenAI-style message list and return normalised copies.

    Content parts are flattened to text, ``developer`` becomes ``system``, tool-call
    arguments become dicts, and keys whose value is None are dropped (as
    transformers does, so templates test for a missing key, not for None).
    """
    if not isinstance(messages, (list, tuple)):
        raise BadRequestError(
            f"messages must be a list of {{'role': ..., 'content': ...}} objects, got {type(messages).__name__}")
    if not messages:
        raise BadRequestError("messages is empty; send at least one {'role': 'user', 'content': ...} message")
    out = []
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise BadRequestError(f"{where} must be an object with 'role' and 'content', got {type(msg).__name__}")
        role = msg.get("role")
        role = ROLE_ALIASES.get(role, role) if isinstance(role, str) else role
        if role not in ROLES:
            raise BadRequestError(
                f"{where}.role is {msg.get('role')!r}; expected one of system, developer, user, assistant, tool")
        norm = {k: v for k, v in msg.items() if v is not None}
        norm["role"] = role
        has_calls = role == "assistant" and norm.get("tool_calls") is not None
        if has_calls:
            norm["tool_calls"] = _tool_calls(norm["tool_calls"], where)
        elif "tool_calls" in norm:
            raise BadRequestError(f"{where} has tool_calls but only assistant messages may carry them")
        if "content" in norm:
            norm["content"] = _text_content(norm["content"], where)
        elif not has_calls:
            raise BadRequestError(
                f"{where} ({role}) has no content; only an assistant message with tool_calls may omit it")
        for key in ("tool_call_id", "name"):
            if key in norm and not isinstance(norm[key], str):
                raise BadRequestError(f"{where}.{key} must be a string")
        reasoning = next((norm[k] for k in REASONING_FIELDS if k in norm), None)
        if reasoning is not None:
            if not isinstance(reasoning, str):
                raise BadRequestError(f"{where}.reasoning_content must be a string")
            norm = {"thinking": reasoning, **norm, "reasoning_content": reasoning}
        out.append(norm)
    return out


def _check_schema(params: Any, where: str) -> None:
    if not isinstance(params, dict):
        raise BadRequestError(f"{where} must be a JSON-schema object, got {type(params).__name__}")
    if params.get("type", "object") != "object":
        raise BadRequestError(f"{where}.type must be 'object', got {params.get('type')!r}")
    props = params.get("properties", {})
    if not isinstance(props, dict) or not all(isinstance(v, dict) for v in props.values()):
        raise BadRequestError(f"{where}.properties must map parameter names to JSON-schema objects")
    required = params.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise BadRequestError(f"{where}.required must be a list of parameter names")


def validate_tools(tools: Any) -> list[dict] | None:
    """Check OpenAI-style tool schemas; returns copies, or None for no tools."""
    if tools is None:
        return None
    if not isinstance(tools, (list, tuple)):
        raise BadRequestError(f"tools must be a list of {{'type': 'function', 'function': {{...}}}}, "
                              f"got {type(tools).__name__}")
    if not tools:
        return None  # OpenAI clients send [] for "no tools"; don't render an empty tools section
    out, seen = [], set()
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(tool.get("function"), dict):
            raise BadRequestError(f"{where} must look like {{'type': 'function', 'function': {{'name': ..., "
                                  "'description': ..., 'parameters': {...}}}}")
        fn = tool["function"]
        name = fn.get("name")
        if not isinstance(name, str) or not TOOL_NAME_RE.match(name):
            raise BadRequestError(f"{where}.function.name {name!r} is not a valid tool name "
                                  "(letters, digits, _ . -, starting with a letter or _, at most 64 chars)")
        if name in seen:
            raise BadRequestError(f"{where}.function.name {name!r} is used by two tools; names must be unique")
        seen.add(name)
        if "description" in fn and not isinstance(fn["description"], str):
            raise BadRequestError(f"{where}.function.description must be a string")
        if "parameters" in fn:
            _check_schema(fn["parameters"], f"{where}.function.parameters")
        out.append(json.loads(json.dumps(tool)))  # deep copy, and proves it is JSON
    return out


# ---------------------------------------------------------------- jinja environment

def _tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    # jinja's own tojson HTML-escapes <, >, & and ' which would corrupt prompts.
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(fmt):
    return datetime.now().strftime(fmt)


@lru_cache(maxsize=1)
def _environment():
    import jinja2
    import jinja2.ext
    import jinja2.nodes
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class GenerationTag(jinja2.ext.Extension):
        # {% generation %}...{% endgeneration %} marks assistant text for training
        # masks; for inference it renders its body unchanged.
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

        def _render(self, caller):
            return caller()

    class GuardedNamespace(jinja2.utils.Namespace):
        # Underscore attributes on a namespace are a sandbox-escape vector.
        def __init__(*args, **kwargs):
            self, rest = args[0], args[1:]
            attrs = dict(*rest, **kwargs)
            for name in attrs:
                GuardedNamespace._check(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name, value):
            GuardedNamespace._check(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check(name):
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(f"namespace attribute {name!r} may not start with '_'")

    class GuardedDict:
        # Exposes dict() and dict.fromkeys() without handing the template the type itself.
        def __call__(self, *args, **kwargs):
            return dict(*args, **kwargs)

        def fromkeys(self, *args, **kwargs):
            return dict.fromkeys(*args, **kwargs)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals.update(raise_exception=raise_exception, strftime_now=_strftime_now,
                       dict=GuardedDict(), namespace=GuardedNamespace)
    return env


@lru_cache(maxsize=16)
def compile_template(source: str):
    """Compile a chat template once; a broken template is the model's fault, not the request's."""
    import jinja2

    try:
        return _environment().from_string(source)
    except jinja2.TemplateSyntaxError as e:
        raise ModelLoadError(f"the model's chat template does not parse: {e.message} (line {e.lineno})") from None


def render(source: str, messages: list[dict], tools: list[dict] | None = None,
           documents: list[dict] | None = None, add_generation_prompt: bool = True,
           special_tokens: dict[str, str] | None = None, **extra) -> str:
    """Render already-validated messages with a template source, as transformers would."""
    import jinja2

    template = compile_template(source)
    if documents is not None and (not isinstance(documents, (list, tuple))
                                  or not all(isinstance(d, dict) for d in documents)):
        raise BadRequestError("documents must be a list of objects like {'title': ..., 'text': ...}")
    # Explicit keyword arguments win over the special tokens, as in transformers.
    variables = {**(special_tokens or {}), **extra}
    try:
        return template.render(messages=messages, tools=tools, documents=documents,
                               add_generation_prompt=add_generation_prompt, **variables)
    except jinja2.exceptions.SecurityError as e:
        raise BadRequestError(f"the chat template refused an unsafe operation: {e}") from None
    except jinja2.TemplateError as e:
        # raise_exception() lands here: the template's own verdict on the conversation.
        raise BadRequestError(f"the model's chat template rejected the conversation: {e}") from None
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as e:
        raise BadRequestError(f"the model's chat template failed on these messages: "
                              f"{type(e).__name__}: {e}") from None


# ---------------------------------------------------------------- control-token sanitising
#
# Untrusted text that contains "<|im_end|>\n<|im_start|>system" would otherwise be
# encoded as real control tokens: a prompt injection.  With sanitising on, control
# tokens inside request strings are wrapped in private-use markers before rendering,
# and encoded as plain text afterwards (transformers' sanitize_control_tokens=True).

MARK_START, MARK_END = "\U000f0000", "\U000f0001"


@lru_cache(maxsize=16)
def template_literals(source: str) -> str:
    """Every literal string in a template, NUL-joined so a search can't straddle two."""
    import jinja2.nodes

    tree = compile_template(source).environment.parse(source)
    texts = {n.data for n in tree.find_all(jinja2.nodes.TemplateData)}
    texts |= {n.value for n in tree.find_all(jinja2.nodes.Const) if isinstance(n.value, str)}
    return "\0".join(texts)


@lru_cache(maxsize=16)
def control_patterns(tokens: tuple[str, ...]) -> tuple[re.Pattern, re.Pattern]:
    """(a regex for any control token, a regex for a marked token or a stray marker); longest first."""
    alternatives = "|".join(re.escape(t) for t in sorted(tokens, key=len, reverse=True)) or "(?!)"
    return re.compile(alternatives), re.compile(f"{MARK_START}({alternatives}){MARK_END}|[{MARK_START}{MARK_END}]")


def mark_control_tokens(obj: Any, pattern: re.Pattern) -> Any:
    """Wrap control tokens in every string of ``obj`` (dict keys excepted) with the markers."""
    if isinstance(obj, str):
        # Strip markers the user sent, so nobody can forge a "trusted" token.
        obj = obj.replace(MARK_START, "").replace(MARK_END, "")
        return pattern.sub(lambda m: MARK_START + m.group(0) + MARK_END, obj)
    if isinstance(obj, dict):
        return {k: mark_control_tokens(v, pattern) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [mark_control_tokens(v, pattern) for v in obj]
    return obj


def apply_tool_choice(choice: Any, tools: Optional[list]) -> tuple[Optional[list], Optional[str]]:
    """(tools to offer, forced call: None = not forced, "" = any tool, else that tool's name)."""
    if choice is None or choice == "auto":
        return tools, None
    if choice == "none":
        return None, None
    if choice == "required":
        if not tools:
            raise BadRequestError("tool_choice 'required' needs tools")
        return tools, ""
    name = choice.get("function", {}).get("name") if isinstance(choice, dict) and \
        choice.get("type") == "function" and isinstance(choice.get("function"), dict) else None
    if not isinstance(name, str):
        raise BadRequestError("tool_choice must be 'none', 'auto', 'required' or "
                              "{'type': 'function', 'function': {'name': ...}}")
    chosen = [t for t in tools or [] if t["function"]["name"] == name]
    if not chosen:
        raise BadRequestError(f"tool_choice names '{name}', which is not among the tools")
    return chosen, name
