"""The gemini provider's translation and wire format against a local server."""

from __future__ import annotations

import pytest
from cactus_core.errors import CloudError

from cloud_servers import Reply, sse
from conftest import ANTHROPIC_KEY, GEMINI_KEY, OPENAI_KEY
from test_cloud_openai import TOOLS

CALL = dict(max_tokens=50, temperature=0.3, timeout_s=5.0)


def reply(*parts, finish="STOP", version="gemini-served-001"):
    return {"candidates": [{"content": {"role": "model", "parts": list(parts)}, "finishReason": finish, "index": 0}],
            "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 2}, "modelVersion": version}


def test_plain_text_url_header_and_system(server, make_provider):
    server.script(Reply(json=reply({"text": "Hallo"}, {"text": " Welt", "thought": False},
                                   {"text": "thinking...", "thought": True})))
    out = make_provider("gemini", model="models/gemini-test").complete(
        [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hello world in German"}], **CALL)
    assert out == {"response": "Hallo Welt", "function_calls": [], "model": "gemini-served-001"}
    (req,) = server.requests
    assert req.path == "/v1beta/models/gemini-test:generateContent"
    assert GEMINI_KEY not in req.path  # the key never goes in the URL
    assert req.headers["x-goog-api-key"] == GEMINI_KEY
    assert "authorization" not in req.headers and "x-api-key" not in req.headers
    body = req.json
    assert body["systemInstruction"] == {"parts": [{"text": "Be kind."}]}
    assert body["contents"] == [{"role": "user", "parts": [{"text": "Hello world in German"}]}]
    assert body["generationConfig"] == {"maxOutputTokens": 50, "temperature": 0.3}


def test_tool_translation_round_trip(server, make_provider):
    server.script(Reply(json=reply({"functionCall": {"name": "get_weather", "args": {"city": "Kyiv"}}},
                                   {"functionCall": {"name": "get_time", "args": {}}})))
    history = [
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "get_forecast", "arguments": {"city": "Oslo"}}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "{\"temp_c\": 18}"},
        {"role": "tool", "tool_call_id": "c2", "content": "rain"},
        {"role": "assistant", "content": "Paris 18C, Oslo rain."},
        {"role": "user", "content": "Kyiv?"},
    ]
    out = make_provider("gemini").complete(history, TOOLS, **CALL)
    assert out["function_calls"] == [{"name": "get_weather", "arguments": {"city": "Kyiv"}},
                                     {"name": "get_time", "arguments": {}}]
    body = server.requests[0].json
    assert body["tools"] == [{"functionDeclarations": [
        {"name": "get_weather", "description": "Current weather for a city",
         "parametersJsonSchema": TOOLS[0]["function"]["parameters"]}]}]
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "Weather in Paris and Oslo?"}]},
        {"role": "model", "parts": [{"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
                                    {"functionCall": {"name": "get_forecast", "args": {"city": "Oslo"}}}]},
        # tool_call_id mapped back to the function name; results share one turn
        {"role": "user", "parts": [{"functionResponse": {"name": "get_weather", "response": {"temp_c": 18}}},
                                   {"functionResponse": {"name": "get_forecast", "response": {"result": "rain"}}}]},
        {"role": "model", "parts": [{"text": "Paris 18C, Oslo rain."}]},
        {"role": "user", "parts": [{"text": "Kyiv?"}]},
    ]


def test_unknown_tool_call_id_is_a_clear_error(server, make_provider):
    with pytest.raises(CloudError, match="tool_call_id 'nope'"):
        make_provider("gemini").complete([{"role": "user", "content": "x"},
                                          {"role": "tool", "tool_call_id": "nope", "content": "1"}], **CALL)
    assert server.requests == []


def test_streaming_uses_sse_endpoint(server, make_provider):
    server.script(Reply(chunks=sse(
        reply({"text": "Once "}, finish=None),
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "upon"}]}}]},
        reply({"text": " a time"}, {"functionCall": {"name": "get_weather", "args": {"city": "Oz"}}}),
        {"usageMetadata": {"totalTokenCount": 9}, "modelVersion": "gemini-served-002"},
    )))
    tokens = []
    out = make_provider("gemini").complete([{"role": "user", "content": "story"}], TOOLS,
                                           on_token=tokens.append, **CALL)
    assert tokens == ["Once ", "upon", " a time"]
    assert out == {"response": "Once upon a time",
                   "function_calls": [{"name": "get_weather", "arguments": {"city": "Oz"}}],
                   "model": "gemini-served-002"}
    assert server.requests[0].path == "/v1beta/models/gemini-test-model:streamGenerateContent?alt=sse"


@pytest.mark.parametrize("chunks, match", [
    (sse(reply({"text": "Once "}, finish=None)), "without a finishReason"),
    (sse(reply({"text": "Once "}, finish=None), "<html>"), "not JSON"),
    (sse({"error": {"code": 500, "message": "Internal error encountered.", "status": "INTERNAL"}}),
     "Internal error encountered"),
])
def test_bad_streams(server, make_provider, chunks, match):
    server.script(Reply(chunks=chunks))
    with pytest.raises(CloudError, match=match):
        make_provider("gemini").complete([{"role": "user", "content": "hi"}], on_token=lambda t: None, **CALL)


def test_blocked_and_empty_replies(server, make_provider):
    p = make_provider("gemini")
    server.script(Reply(json={"promptFeedback": {"blockReason": "SAFETY"}}))
    with pytest.raises(CloudError, match="blocked \\(SAFETY\\)"):
        p.complete([{"role": "user", "content": "hi"}], **CALL)
    server.script(Reply(json={"candidates": [{"finishReason": "RECITATION"}]}))
    with pytest.raises(CloudError, match="RECITATION"):
        p.complete([{"role": "user", "content": "hi"}], **CALL)
    server.script(Reply(400, json={"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                                             "status": "INVALID_ARGUMENT"}}))
    with pytest.raises(CloudError, match="HTTP 400 .*API key not valid"):
        p.complete([{"role": "user", "content": "hi"}], **CALL)


def test_only_its_own_key_is_sent(server, make_provider):
    server.script(Reply(json=reply({"text": "x"})))
    make_provider("gemini").complete([{"role": "user", "content": "hi"}], **CALL)
    req = server.requests[0]
    values = req.path + " ".join(req.headers.values()) + req.body.decode()
    assert OPENAI_KEY not in values and ANTHROPIC_KEY not in values
    assert [k for k, v in req.headers.items() if GEMINI_KEY in v] == ["x-goog-api-key"]
