"""Google Gemini API (generateContent).

POST ``{api_base}/v1beta/models/{model}:generateContent``, streaming via
``:streamGenerateContent?alt=sse``.  The key goes in the ``x-goog-api-key``
header, never in the URL, so proxies and access logs never see it.

Translation from OpenAI format:

- roles ``user`` and ``model`` (assistant); system messages join into
  ``systemInstruction``;
- assistant ``tool_calls`` -> ``functionCall`` parts ``{name, args}``;
- tool messages -> ``functionResponse`` parts ``{name, response}`` in a user
  turn, the name found from ``tool_call_id`` in the earlier assistant message;
  a JSON-object result is passed as is, anything else as ``{"result": text}``;
- tools -> one ``functionDeclarations`` list using ``parametersJsonSchema``,
  which takes the OpenAI JSON schema unchanged;
- consecutive turns of one role are merged.

A streamed reply is a sequence of whole ``GenerateContentResponse`` chunks with
no end marker; the chunk carrying ``finishReason`` marks a complete reply.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator, Optional
from urllib.parse import quote

from . import messages as msgs
from .base import Provider
from .config import VENDORS
from .sse import Event


class GeminiProvider(Provider):
    """Provider for the Gemini API (Google AI Studio keys)."""

    name = "gemini"
    default_api_base, default_model = VENDORS["gemini"][:2]

    def auth_headers(self, key: Optional[str]) -> dict[str, str]:
        return {"x-goog-api-key": key} if key else {}

    def url(self, stream: bool) -> str:
        model = quote(self.model.removeprefix("models/"), safe="-._")
        base = f"{self.api_base}/v1beta/models/{model}"
        return f"{base}:streamGenerateContent?alt=sse" if stream else f"{base}:generateContent"

    def request_body(self, messages, tools, max_tokens, temperature, stream) -> dict:
        system, contents = self.translate(messages)
        body: dict[str, Any] = {
            "contents": contents,
            "generationConfig": {"maxOutputTokens": max_tokens, "temperature": temperature},
        }
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        if tools:
            body["tools"] = [
                {
                    "functionDeclarations": [
                        {"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters}
                        for t in tools
                    ]
                }
            ]
        return body

    def force_tool(self, body: dict, name: str) -> None:
        config: dict[str, Any] = {"mode": "ANY"}
        if name:
            config["allowedFunctionNames"] = [name]
        body["toolConfig"] = {"functionCallingConfig": config}

    def translate(self, messages: list[dict]) -> tuple[str, list[dict]]:
        """OpenAI messages -> (system text, Gemini contents)."""
        names = msgs.tool_names_by_id(messages)
        system, contents = [], []
        for i, m in enumerate(messages):
            role = m["role"]
            if role == "system":
                system.append(msgs.text_of(self.name, m.get("content")))
                continue
            parts: list[dict] = []
            if role == "tool":
                name = names.get(m.get("tool_call_id") or "") or m.get("name")
                if not name:
                    raise self._transport.fail(
                        f"tool message {i}: cannot find the function for tool_call_id "
                        f"{m.get('tool_call_id')!r}; gemini needs the function name"
                    )
                parts.append({"functionResponse": {"name": name, "response": _tool_response(self.name, m)}})
                role = "user"
            else:
                text = msgs.text_of(self.name, m.get("content"))
                if text:
                    parts.append({"text": text})
                if role == "assistant":
                    role = "model"
                    for call in msgs.tool_calls_of(self.name, m):
                        parts.append({"functionCall": {"name": call.name, "args": call.arguments}})
            if parts:
                contents.append({"role": role, "parts": parts})
        contents = msgs.merge_runs(contents, "role", "parts")
        if not contents:
            raise self._transport.fail("no user or assistant messages to send")
        return "\n\n".join(s for s in system if s), contents

    def _candidate(self, data: Any, streaming: bool) -> tuple[Optional[dict], Optional[str]]:
        """(first candidate, its finishReason) of one response chunk."""
        if not isinstance(data, dict):
            raise self.bad_reply("body is not a JSON object")
        if "error" in data:
            raise self.bad_reply(f"error: {msgs.error_text(data)}")
        candidates = data.get("candidates")
        if not candidates:
            block = (data.get("promptFeedback") or {}).get("blockReason")
            if block:
                raise self._transport.fail(f"the prompt was blocked ({block})")
            if streaming:  # usage-only chunks carry no candidates
                return None, None
            raise self.bad_reply("no candidates in the reply")
        if not isinstance(candidates, list) or not isinstance(candidates[0], dict):
            raise self.bad_reply("candidates is not a list of objects")
        return candidates[0], candidates[0].get("finishReason")

    def _parts(self, candidate: dict) -> Iterator[tuple[str, Any]]:
        """("text", str) and ("call", (name, args)) for each answer part."""
        for part in (candidate.get("content") or {}).get("parts") or []:
            if not isinstance(part, dict) or part.get("thought"):
                continue  # thought summaries are not the answer
            if isinstance(part.get("text"), str):
                yield "text", part["text"]
            elif isinstance(part.get("functionCall"), dict):
                fc = part["functionCall"]
                name = str(fc.get("name") or "")
                if not name:
                    raise self.bad_reply("functionCall part has no name")
                yield "call", (name, msgs.parse_arguments(self.name, name, fc.get("args")))

    def parse(self, data: Any) -> dict:
        candidate, finish = self._candidate(data, streaming=False)
        text, calls = [], []
        for kind, value in self._parts(candidate):
            (text if kind == "text" else calls).append(value)
        if not text and not calls and finish not in (None, "STOP", "MAX_TOKENS"):
            raise self._transport.fail(f"no answer (finishReason {finish})")
        return msgs.result("".join(text), calls, str(data.get("modelVersion") or self.model))

    def parse_stream(self, events: Iterator[Event], on_token: Callable[[str], Any]) -> dict:
        text, calls, model, finish = [], [], self.model, None
        for event in events:
            data = self.decode(event.data)
            candidate, reason = self._candidate(data, streaming=True)
            model = data.get("modelVersion") or model
            if candidate is None:
                continue
            for kind, value in self._parts(candidate):
                if kind == "text" and value:
                    text.append(value)
                    on_token(value)
                elif kind == "call":
                    calls.append(value)
            finish = reason or finish
        if finish is None:
            raise self.bad_reply("stream ended without a finishReason; reply is incomplete")
        if not text and not calls and finish not in ("STOP", "MAX_TOKENS"):
            raise self._transport.fail(f"no answer (finishReason {finish})")
        return msgs.result("".join(text), calls, str(model))


def _tool_response(provider: str, message: dict) -> dict:
    """A tool message's content as the object ``functionResponse.response`` needs."""
    text = msgs.text_of(provider, message.get("content"))
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    return value if isinstance(value, dict) else {"result": text}
