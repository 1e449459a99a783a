"""Anthropic Messages API.

POST ``{api_base}/v1/messages`` with ``x-api-key`` and ``anthropic-version``.
Translation from OpenAI format:

- system messages (wherever they are) join into the top-level ``system``;
- user/assistant text becomes ``text`` blocks; assistant ``tool_calls`` become
  ``tool_use`` blocks (``input`` is the arguments object);
- tool messages become ``tool_result`` blocks in a user turn; consecutive turns
  of one role are merged, so parallel tool results share one user message;
- tools become ``{name, description, input_schema}``;
- temperature is clamped to Anthropic's [0, 1].

Streaming events: ``message_start``, ``content_block_start`` (a text or
``tool_use`` block), ``content_block_delta`` (``text_delta`` or
``input_json_delta`` fragments), ``content_block_stop``, ``message_delta``,
``message_stop`` (the end marker we require), ``ping`` and ``error``.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator, Optional

from . import messages as msgs
from .base import Provider
from .config import VENDORS
from .sse import Event

API_VERSION = "2023-06-01"


class AnthropicProvider(Provider):
    """Provider for Anthropic's Messages API."""

    name = "anthropic"
    default_api_base, default_model = VENDORS["anthropic"][:2]

    def auth_headers(self, key: Optional[str]) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers

    def url(self, stream: bool) -> str:
        return f"{self.api_base}/v1/messages"

    def request_body(self, messages, tools, max_tokens, temperature, stream) -> dict:
        system, turns = self.translate(messages)
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "temperature": min(1.0, max(0.0, temperature)),
            "messages": turns,
        }
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools
            ]
        if stream:
            body["stream"] = True
        return body

    def force_tool(self, body: dict, name: str) -> None:
        body["tool_choice"] = {"type": "tool", "name": name} if name else {"type": "any"}

    def translate(self, messages: list[dict]) -> tuple[str, list[dict]]:
        """OpenAI messages -> (system text, Anthropic turns)."""
        system, turns = [], []
        for i, m in enumerate(messages):
            role = m["role"]
            if role == "system":
                system.append(msgs.text_of(self.name, m.get("content")))
                continue
            blocks: list[dict] = []
            if role == "tool":
                if not m.get("tool_call_id"):
                    raise self._transport.fail(f"tool message {i} has no tool_call_id")
                blocks.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": m["tool_call_id"],
                        "content": msgs.text_of(self.name, m.get("content")),
                    }
                )
                role = "user"
            else:
                text = msgs.text_of(self.name, m.get("content"))
                if text.strip():  # the API rejects empty text blocks
                    blocks.append({"type": "text", "text": text})
                if role == "assistant":
                    for j, call in enumerate(msgs.tool_calls_of(self.name, m)):
                        blocks.append(
                            {
                                "type": "tool_use",
                                "id": call.id or f"toolu_{i}_{j}",
                                "name": call.name,
                                "input": call.arguments,
                            }
                        )
            if blocks:
                turns.append({"role": role, "content": blocks})
        turns = msgs.merge_runs(turns, "role", "content")
        if not turns:
            raise self._transport.fail("no user or assistant messages to send")
        return "\n\n".join(s for s in system if s), turns

    def parse(self, data: Any) -> dict:
        if not isinstance(data, dict):
            raise self.bad_reply("body is not a JSON object")
        if data.get("type") == "error":
            raise self.bad_reply(f"error: {msgs.error_text(data)}")
        content = data.get("content")
        if not isinstance(content, list):
            raise self.bad_reply("no content list in the reply")
        text, calls = [], []
        for block in content:
            if not isinstance(block, dict):
                raise self.bad_reply("content block is not an object")
            if block.get("type") == "text":
                text.append(str(block.get("text", "")))
            elif block.get("type") == "tool_use":
                name = str(block.get("name") or "")
                if not name:
                    raise self.bad_reply("tool_use block has no name")
                calls.append((name, msgs.parse_arguments(self.name, name, block.get("input"))))
            # thinking / redacted_thinking blocks are not part of the answer
        return msgs.result("".join(text), calls, str(data.get("model") or self.model))

    def parse_stream(self, events: Iterator[Event], on_token: Callable[[str], Any]) -> dict:
        model = self.model
        blocks: dict[int, dict] = {}  # index -> {"type", "name", "parts"}
        stopped = False
        for event in events:
            data = self.decode(event.data)
            if not isinstance(data, dict):
                raise self.bad_reply("stream event is not a JSON object")
            kind = data.get("type", event.event)
            if kind == "error":
                raise self.bad_reply(f"error in stream: {msgs.error_text(data)}")
            if kind == "message_start":
                model = (data.get("message") or {}).get("model") or model
            elif kind == "content_block_start":
                block = data.get("content_block") or {}
                slot = {"type": block.get("type"), "name": block.get("name") or "", "parts": []}
                blocks[data.get("index", len(blocks))] = slot
                if slot["type"] == "text" and block.get("text"):
                    slot["parts"].append(block["text"])
                    on_token(block["text"])
                elif slot["type"] == "tool_use" and block.get("input"):
                    slot["parts"].append(json.dumps(block["input"]))
            elif kind == "content_block_delta":
                slot = blocks.get(data.get("index"))
                delta = data.get("delta") or {}
                if slot is None:
                    raise self.bad_reply("content_block_delta for a block that never started")
                if delta.get("type") == "text_delta" and delta.get("text"):
                    slot["parts"].append(delta["text"])
                    on_token(delta["text"])
                elif delta.get("type") == "input_json_delta":
                    slot["parts"].append(delta.get("partial_json") or "")
            elif kind == "message_stop":
                stopped = True
                break
        if not stopped:
            raise self.bad_reply("stream ended before message_stop; reply is incomplete")
        text, calls = [], []
        for index in sorted(blocks):
            slot = blocks[index]
            if slot["type"] == "text":
                text.append("".join(slot["parts"]))
            elif slot["type"] == "tool_use":
                if not slot["name"]:
                    raise self.bad_reply("streamed tool_use block has no name")
                calls.append((slot["name"], msgs.parse_arguments(self.name, slot["name"], "".join(slot["parts"]))))
        return msgs.result("".join(text), calls, str(model))
