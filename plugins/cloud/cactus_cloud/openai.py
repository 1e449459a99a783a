"""OpenAI-compatible chat completions: OpenAI, vLLM, llama.cpp, Ollama, ``cactus serve``.

POST ``{api_base}/chat/completions`` with ``Authorization: Bearer KEY``;
``api_base`` includes the version prefix (``https://api.openai.com/v1``,
``http://localhost:8000/v1``).  Messages and tools are already in this format,
so the translation is light: tool-call arguments given as dicts are encoded to
the JSON strings the wire format wants, and replies are decoded back to dicts.

Streaming uses ``stream: true``: ``data: {chunk}`` events ending with
``data: [DONE]``; tool calls arrive in pieces keyed by ``index`` (id and name
in the first piece, ``arguments`` as string fragments to concatenate).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator, Optional

from . import messages as msgs
from .base import Provider
from .config import VENDORS, official_host
from .sse import Event


class OpenAIProvider(Provider):
    """Provider for any server speaking the OpenAI chat completions API."""

    name = "openai"
    default_api_base, default_model = VENDORS["openai"][:2]

    def auth_headers(self, key: Optional[str]) -> dict[str, str]:
        return {"authorization": f"Bearer {key}"} if key else {}

    def url(self, stream: bool) -> str:
        return f"{self.api_base}/chat/completions"

    def request_body(self, messages, tools, max_tokens, temperature, stream) -> dict:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [self._wire_message(m) for m in messages],
            "temperature": temperature,
        }
        # OpenAI itself deprecated max_tokens (o-series models reject it);
        # other servers (vLLM, llama.cpp, Ollama) only know max_tokens.
        official = official_host("openai", self.api_base)
        body["max_completion_tokens" if official else "max_tokens"] = max_tokens
        if tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                }
                for t in tools
            ]
        if stream:
            body["stream"] = True
        return body

    def force_tool(self, body: dict, name: str) -> None:
        body["tool_choice"] = {"type": "function", "function": {"name": name}} if name else "required"

    def _wire_message(self, m: dict) -> dict:
        out = {k: v for k, v in m.items() if k not in ("tool_calls", "function_call")}
        if m.get("role") == "assistant" and (m.get("tool_calls") or m.get("function_call")):
            calls = msgs.tool_calls_of(self.name, m)
            out["tool_calls"] = [
                {
                    "id": c.id or f"call_{i}",
                    "type": "function",
                    "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                }
                for i, c in enumerate(calls)
            ]
            out.setdefault("content", None)
        return out

    def parse(self, data: Any) -> dict:
        if not isinstance(data, dict):
            raise self.bad_reply("body is not a JSON object")
        if "error" in data and "choices" not in data:
            raise self.bad_reply(f"error: {msgs.error_text(data)}")
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self.bad_reply("no choices in the reply")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise self.bad_reply("choice has no message")
        text = msgs.text_of(self.name, message.get("content"))
        calls = [(c.name, c.arguments) for c in msgs.tool_calls_of(self.name, message)]
        return msgs.result(text, calls, str(data.get("model") or self.model))

    def parse_stream(self, events: Iterator[Event], on_token: Callable[[str], Any]) -> dict:
        text: list[str] = []
        calls: dict[int, dict] = {}  # index -> {"name", "arguments" fragments}
        model, finished, done = self.model, False, False
        for event in events:
            if event.data.strip() == "[DONE]":
                done = True
                break
            chunk = self.decode(event.data)
            if not isinstance(chunk, dict):
                raise self.bad_reply("stream chunk is not a JSON object")
            if "error" in chunk:
                raise self.bad_reply(f"error in stream: {msgs.error_text(chunk)}")
            model = chunk.get("model") or model
            for choice in chunk.get("choices") or []:
                if choice.get("index", 0) != 0:
                    continue
                delta = choice.get("delta") or {}
                piece = delta.get("content")
                if isinstance(piece, str) and piece:
                    text.append(piece)
                    on_token(piece)
                for pos, tc in enumerate(delta.get("tool_calls") or []):
                    slot = calls.setdefault(tc.get("index", pos), {"name": "", "arguments": []})
                    fn = tc.get("function") or {}
                    if fn.get("name"):
                        slot["name"] = fn["name"]
                    if isinstance(fn.get("arguments"), str):
                        slot["arguments"].append(fn["arguments"])
                    elif isinstance(fn.get("arguments"), dict):  # some servers send objects
                        slot["arguments"].append(json.dumps(fn["arguments"]))
                finished = finished or bool(choice.get("finish_reason"))
        # Servers that forget [DONE] still end cleanly with a finish_reason.
        if not (done or finished):
            raise self.bad_reply("stream ended before [DONE]; reply is incomplete")
        out = []
        for index in sorted(calls):
            slot = calls[index]
            if not slot["name"]:
                raise self.bad_reply(f"streamed tool call {index} has no name")
            out.append((slot["name"], msgs.parse_arguments(self.name, slot["name"], "".join(slot["arguments"]))))
        return msgs.result("".join(text), out, str(model))

