"""The chat template (Qwen3's tool layout, written for this model) and a Python
renderer that produces the same text split into prompt and trained segments.

The jinja template uses only standard jinja2 plus `tojson`; `tojson` must behave like
transformers' (json.dumps, ensure_ascii=False, keys in given order). Our tool schemas
and arguments carry sorted keys, so jinja2's stock sorting `tojson` agrees as well.
"""
from __future__ import annotations

import json

TOOLS_HEADER = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
TOOLS_FOOTER = ("\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>")

CHAT_TEMPLATE = r"""{%- if tools %}
{{- '<|im_start|>system\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\n\n' }}{%- endif %}
{{- '# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>' }}
{%- for tool in tools %}{{- '\n' }}{{- tool | tojson }}{%- endfor %}
{{- '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}
{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant\n' }}
{%- if message.content %}{{- message.content }}{%- endif %}
{%- if message.tool_calls %}
{%- for tc in message.tool_calls %}
{%- if tc.function is defined %}{%- set fn = tc.function %}{%- else %}{%- set fn = tc %}{%- endif %}
{%- if (loop.first and message.content) or not loop.first %}{{- '\n' }}{%- endif %}
{{- '<tool_call>\n{"name": "' + fn.name + '", "arguments": ' }}
{%- if fn.arguments is string %}{{- fn.arguments }}{%- else %}{{- fn.arguments | tojson }}{%- endif %}
{{- '}\n</tool_call>' }}
{%- endfor %}
{%- endif %}
{{- '<|im_end|>\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\n<tool_response>\n' + message.content + '\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n' }}{%- endif %}"""


def dumps(x) -> str:
    """JSON exactly as transformers' tojson writes it."""
    return json.dumps(x, ensure_ascii=False)


def tool_call_text(name: str, arguments: dict) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {dumps(arguments)}}}\n</tool_call>'


def render_segments(messages: list[dict], tools: list[dict] | None = None,
                    add_generation_prompt: bool = False) -> list[tuple[str, bool]]:
    """The template's output as (text, trained) pieces; trained = assistant-written text."""
    seg: list[tuple[str, bool]] = []
    first_system = messages and messages[0]["role"] == "system"
    if tools:
        head = "<|im_start|>system\n" + (messages[0]["content"] + "\n\n" if first_system else "") + TOOLS_HEADER
        head += "".join("\n" + dumps(t) for t in tools) + TOOLS_FOOTER + "<|im_end|>\n"
        seg.append((head, False))
    elif first_system:
        seg.append(("<|im_start|>system\n" + messages[0]["content"] + "<|im_end|>\n", False))
    for i, m in enumerate(messages):
        role = m["role"]
        if role == "user" or (role == "system" and i > 0):
            seg.append((f"<|im_start|>{role}\n{m['content']}<|im_end|>\n", False))
        elif role == "assistant":
            seg.append(("<|im_start|>assistant\n", False))
            body = m.get("content") or ""
            for j, tc in enumerate(m.get("tool_calls") or []):
                fn = tc.get("function", tc)
                args = fn["arguments"] if isinstance(fn["arguments"], str) else dumps(fn["arguments"])
                sep = "\n" if (j == 0 and m.get("content")) or j > 0 else ""
                body += f'{sep}<tool_call>\n{{"name": "{fn["name"]}", "arguments": {args}}}\n</tool_call>'
            seg.append((body + "<|im_end|>", True))
            seg.append(("\n", False))
        elif role == "tool":
            opened = i == 0 or messages[i - 1]["role"] != "tool"
            closed = i == len(messages) - 1 or messages[i + 1]["role"] != "tool"
            seg.append((("<|im_start|>user" if opened else "") + f"\n<tool_response>\n{m['content']}\n</tool_response>"
                        + ("<|im_end|>\n" if closed else ""), False))
    if add_generation_prompt:
        seg.append(("<|im_start|>assistant\n", False))
    return seg


def render(messages: list[dict], tools: list[dict] | None = None, add_generation_prompt: bool = False) -> str:
    return "".join(t for t, _ in render_segments(messages, tools, add_generation_prompt))


def parse_tool_calls(text: str) -> tuple[list[dict], bool]:
    """Tool calls in generated text, and whether every <tool_call> block parsed as JSON."""
    calls, ok = [], True
    for part in text.split("<tool_call>")[1:]:
        body = part.split("</tool_call>")[0].strip()
        try:
            obj = json.loads(body)
            calls.append({"name": obj["name"], "arguments": obj.get("arguments", {})})
        except (ValueError, KeyError, TypeError):
            ok = False
    return calls, ok
