"""Checks and helpers for OpenAI-format messages and tools, shared by providers.

Everything enters in OpenAI chat format (the format ``Engine.complete`` takes):
roles ``system``/``user``/``assistant``/``tool``, assistant ``tool_calls`` with
``{"id", "type": "function", "function": {"name", "arguments"}}``, tool
messages with ``tool_call_id``, and tools as
``{"type": "function", "function": {"name", "description", "parameters"}}``.
Arguments may arrive as a JSON string (the wire format) or already as a dict
(what the local engine's ``function_calls`` hold); both are accepted.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple, Optional

from cactus_core.errors import CloudError

ROLES = ("system", "user", "assistant", "tool")
EMPTY_SCHEMA = {"type": "object", "properties": {}}


class Tool(NamedTuple):
    name: str
    description: str
    parameters: dict


class ToolCall(NamedTuple):
    id: Optional[str]
    name: str
    arguments: dict


def check_messages(provider: str, messages: Any) -> list[dict]:
    """``messages`` as a list of dicts with known roles, or a one-line CloudError."""
    if not isinstance(messages, (list, tuple)) or not messages:
        raise CloudError(f"{provider}: messages must be a non-empty list of dicts")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise CloudError(
                f"{provider}: message {i} needs a role among {', '.join(ROLES)}"
            )
    return list(messages)


def text_of(provider: str, content: Any) -> str:
    """Plain text of a message's content: a string, None, or text parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict) and part.get("type") in ("text", "input_text"):
                out.append(str(part.get("text", "")))
            else:
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise CloudError(f"{provider}: content parts of type '{kind}' are not supported")
        return "".join(out)
    raise CloudError(f"{provider}: message content must be a string or a list of text parts")


def parse_arguments(provider: str, name: str, raw: Any) -> dict:
    """Tool-call arguments as a dict; a JSON string is decoded and must be an object."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            raise CloudError(
                f"{provider}: tool call '{name}' has arguments that are not valid JSON: {raw[:80]!r}"
            ) from None
        if isinstance(value, dict):
            return value
    raise CloudError(f"{provider}: tool call '{name}' arguments must be a JSON object")


def tool_calls_of(provider: str, message: dict) -> list[ToolCall]:
    """An assistant message's ``tool_calls`` (or legacy ``function_call``) decoded."""
    calls = message.get("tool_calls") or []
    if message.get("function_call"):
        calls = list(calls) + [{"function": message["function_call"]}]
    out = []
    for call in calls:
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise CloudError(f"{provider}: an assistant tool call has no function name")
        out.append(ToolCall(call.get("id"), fn["name"], parse_arguments(provider, fn["name"], fn.get("arguments"))))
    return out


def check_tools(provider: str, tools: Any) -> list[Tool]:
    """Tools in OpenAI format (or bare ``{name, description, parameters}``)."""
    if not tools:
        return []
    if not isinstance(tools, (list, tuple)):
        raise CloudError(f"{provider}: tools must be a list")
    out = []
    for i, tool in enumerate(tools):
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise CloudError(f"{provider}: tool {i} has no function name")
        params = fn.get("parameters") or EMPTY_SCHEMA
        if not isinstance(params, dict):
            raise CloudError(f"{provider}: tool '{fn['name']}' parameters must be a JSON schema object")
        out.append(Tool(fn["name"], str(fn.get("description") or ""), params))
    return out


def tool_names_by_id(messages: list[dict]) -> dict[str, str]:
    """tool_call_id -> function name, from the assistant messages' tool calls."""
    names = {}
    for m in messages:
        if m.get("role") == "assistant":
            for call in m.get("tool_calls") or []:
                fn = call.get("function") if isinstance(call, dict) else None
                if call.get("id") and isinstance(fn, dict) and fn.get("name"):
                    names[call["id"]] = fn["name"]
    return names


def merge_runs(items: list[dict], key: str, field: str) -> list[dict]:
    """Merge consecutive dicts with equal ``item[key]`` by concatenating their
    ``field`` lists (Anthropic and Gemini want one turn per role in a row)."""
    out: list[dict] = []
    for item in items:
        if out and out[-1][key] == item[key]:
            out[-1][field] = out[-1][field] + item[field]
        else:
            out.append(dict(item))
    return out


def result(response: str, calls: list[tuple[str, dict]], model: str) -> dict:
    """The provider contract's return value."""
    return {
        "response": response,
        "function_calls": [{"name": n, "arguments": a} for n, a in calls],
        "model": model,
    }


def error_text(data: dict) -> str:
    """The message of an in-band ``{"error": ...}`` object, kept short."""
    err = data.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err.get("type") or err)[:300]
    return str(err)[:300]
