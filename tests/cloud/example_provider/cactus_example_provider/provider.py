"""A provider for Ollama's native chat API (``POST {api_base}/api/chat``).

Built on :class:`cactus_cloud.base.Provider`, so retries, the total time
budget, key redaction and argument checking come for free; this file only
translates.  Ollama streams newline-delimited JSON rather than server-sent
events, so it overrides ``stream_reply`` instead of ``parse_stream``.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator, Optional

from cactus_cloud import messages as msgs
from cactus_cloud.base import Provider


class OllamaProvider(Provider):
    name = "ollama"
    default_api_base = "http://127.0.0.1:11434"
    default_model = "llama3.2"

    def auth_headers(self, key: Optional[str]) -> dict[str, str]:
        # Local Ollama needs no key; hosted instances take a bearer token.
        return {"authorization": f"Bearer {key}"} if key else {}

    def url(self, stream: bool) -> str:
        return f"{self.api_base}/api/chat"

    def request_body(self, messages, tools, max_tokens, temperature, stream) -> dict:
        wire = []
        for m in messages:
            out = {"role": m["role"], "content": msgs.text_of(self.name, m.get("content"))}
            if m["role"] == "assistant":
                calls = msgs.tool_calls_of(self.name, m)
                if calls:  # Ollama wants arguments as objects, not JSON strings
                    out["tool_calls"] = [{"function": {"name": c.name, "arguments": c.arguments}} for c in calls]
            wire.append(out)
        body: dict[str, Any] = {
            "model": self.model,
            "messages": wire,
            "stream": stream,
            "options": {"temperature": temperature, "num_predict": max_tokens},
        }
        if tools:
            body["tools"] = [
                {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
                for t in tools
            ]
        return body

    def _calls(self, message: dict) -> list[tuple[str, dict]]:
        return [(c.name, c.arguments) for c in msgs.tool_calls_of(self.name, message)]

    def parse(self, data: Any) -> dict:
        if not isinstance(data, dict) or not isinstance(data.get("message"), dict):
            raise self.bad_reply("no message in the reply")
        message = data["message"]
        text = msgs.text_of(self.name, message.get("content"))
        return msgs.result(text, self._calls(message), str(data.get("model") or self.model))

    def stream_reply(self, lines: Iterator[str], on_token: Callable[[str], Any]) -> dict:
        text, calls, model, done = [], [], self.model, False
        for line in lines:
            if not line.strip():
                continue
            try:
                chunk = json.loads(line)
            except ValueError:
                raise self.bad_reply(f"stream line is not JSON: {line[:80]!r}") from None
            if "error" in chunk:
                raise self.bad_reply(f"error in stream: {msgs.error_text(chunk)}")
            model = chunk.get("model") or model
            message = chunk.get("message") or {}
            if message.get("content"):
                text.append(message["content"])
                on_token(message["content"])
            calls.extend(self._calls(message))
            if chunk.get("done"):
                done = True
                break
        if not done:
            raise self.bad_reply("stream ended before done=true; reply is incomplete")
        return msgs.result("".join(text), calls, str(model))
