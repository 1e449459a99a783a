"""A small OpenAI-compatible chat server (starlette) with deterministic answers.

It implements the parts of ``POST /v1/chat/completions`` a client relies on
(bearer auth, errors in OpenAI's shape, tool calls, SSE streaming with
``[DONE]``), so the official ``openai`` SDK and our provider can both be
pointed at it and must agree.  Rules:

- last message from a tool -> "The tool said: {content}";
- tools offered and the user asks "weather in CITY" -> a ``get_weather`` call;
- otherwise -> "You said: {last user text}".
"""

from __future__ import annotations

import json
import re
import time

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route


def _error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": None}}, status)


def _answer(body: dict) -> tuple[str | None, list[dict]]:
    messages = body["messages"]
    last = messages[-1]
    if last["role"] == "tool":
        return f"The tool said: {last['content']}", []
    text = last.get("content") or ""
    match = re.search(r"weather in (\w+)", text, re.I)
    if match and body.get("tools"):
        args = json.dumps({"city": match.group(1)})
        return None, [{"id": "call_w1", "type": "function", "function": {"name": "get_weather", "arguments": args}}]
    return f"You said: {text}", []


def make_app(api_key: str) -> Starlette:
    async def chat(request: Request):
        if request.headers.get("authorization") != f"Bearer {api_key}":
            return _error(401, "Incorrect API key provided.", "invalid_request_error")
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "We could not parse the JSON body of your request.", "invalid_request_error")
        if not body.get("messages") or not body.get("model"):
            return _error(400, "'messages' and 'model' are required.", "invalid_request_error")
        content, calls = _answer(body)
        base = {"id": "chatcmpl-fake", "created": int(time.time()), "model": body["model"]}
        finish = "tool_calls" if calls else "stop"
        if not body.get("stream"):
            message = {"role": "assistant", "content": content}
            if calls:
                message["tool_calls"] = calls
            usage = {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}
            return JSONResponse({**base, "object": "chat.completion", "usage": usage,
                                 "choices": [{"index": 0, "message": message, "finish_reason": finish}]})

        def chunk(delta, finish_reason=None):
            data = {**base, "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
            return f"data: {json.dumps(data)}\n\n"

        async def events():
            yield chunk({"role": "assistant", "content": ""})
            for word in re.findall(r"\S+\s*", content or ""):
                yield chunk({"content": word})
            for i, call in enumerate(calls):
                args = call["function"]["arguments"]
                head = {"index": i, "id": call["id"], "type": "function",
                        "function": {"name": call["function"]["name"], "arguments": ""}}
                yield chunk({"tool_calls": [head]})
                for piece in (args[: len(args) // 2], args[len(args) // 2:]):
                    yield chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
            yield chunk({}, finish)
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
