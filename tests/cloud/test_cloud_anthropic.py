"""The anthropic provider's translation and wire format against a local server."""

from __future__ import annotations

import pytest
from cactus_core.errors import CloudError

from cloud_servers import Reply, sse
from conftest import ANTHROPIC_KEY, GEMINI_KEY, OPENAI_KEY
from test_cloud_openai import TOOLS

CALL = dict(max_tokens=100, temperature=0.0, timeout_s=5.0)


def message(*content, model="claude-served", stop="end_turn"):
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": model,
            "content": list(content), "stop_reason": stop, "usage": {"input_tokens": 5, "output_tokens": 3}}


def test_plain_text_headers_and_system(server, make_provider):
    server.script(Reply(json=message({"type": "text", "text": "Bonjour"})))
    out = make_provider("anthropic").complete(
        [{"role": "system", "content": "You are terse."},
         {"role": "user", "content": "Say hello in French"},
         {"role": "system", "content": "Answer in one word."}],
        max_tokens=100, temperature=1.7, timeout_s=5.0)
    assert out == {"response": "Bonjour", "function_calls": [], "model": "claude-served"}
    (req,) = server.requests
    assert req.path == "/v1/messages"
    assert req.headers["x-api-key"] == ANTHROPIC_KEY
    assert req.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in req.headers
    body = req.json
    assert body["system"] == "You are terse.\n\nAnswer in one word."
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Say hello in French"}]}]
    assert body["max_tokens"] == 100 and body["model"] == "anthropic-test-model"
    assert body["temperature"] == 1.0  # clamped to Anthropic's range


def test_tool_translation_round_trip(server, make_provider):
    server.script(Reply(json=message(
        {"type": "text", "text": "Checking Rome too."},
        {"type": "tool_use", "id": "toolu_3", "name": "get_weather", "input": {"city": "Rome"}},
        stop="tool_use")))
    history = [
        {"role": "user", "content": "Weather in Paris and Oslo?"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            {"id": "toolu_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
            {"id": "toolu_2", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": [{"type": "text", "text": "9C"}]},
        {"role": "user", "content": "And Rome?"},
    ]
    out = make_provider("anthropic").complete(history, TOOLS, **CALL)
    assert out["response"] == "Checking Rome too."
    assert out["function_calls"] == [{"name": "get_weather", "arguments": {"city": "Rome"}}]
    body = server.requests[0].json
    assert body["tools"] == [{"name": "get_weather", "description": "Current weather for a city",
                              "input_schema": TOOLS[0]["function"]["parameters"]}]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Oslo?"}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Oslo"}}]},
        # consecutive tool results and the next user text merge into one user turn
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "9C"},
            {"type": "text", "text": "And Rome?"}]},
    ]


STREAM = sse(
    {"type": "message_start", "message": {"id": "m", "model": "claude-streamed", "content": []}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "ping"},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Sure, "}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "one moment."}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1,
     "content_block": {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {}}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"city\": \"Li"}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "ma\"}"}},
    {"type": "content_block_stop", "index": 1},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 20}},
    {"type": "message_stop"},
    event_names=["message_start", "content_block_start", "ping", "content_block_delta", "content_block_delta",
                 "content_block_stop", "content_block_start", "content_block_delta", "content_block_delta",
                 "content_block_delta", "content_block_stop", "message_delta", "message_stop"],
)


def test_streaming_text_and_tool_use(server, make_provider):
    server.script(Reply(chunks=STREAM))
    tokens = []
    out = make_provider("anthropic").complete([{"role": "user", "content": "weather in Lima"}], TOOLS,
                                              on_token=tokens.append, **CALL)
    assert tokens == ["Sure, ", "one moment."]
    assert out == {"response": "Sure, one moment.",
                   "function_calls": [{"name": "get_weather", "arguments": {"city": "Lima"}}],
                   "model": "claude-streamed"}
    assert server.requests[0].json["stream"] is True


@pytest.mark.parametrize("chunks, match", [
    (STREAM[:5], "before message_stop"),
    (STREAM[:4] + sse({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
                      event_names=["error"]), "Overloaded"),
    (STREAM[:4] + [b"data: {\"type\": \"content_block_delta\", \"ind\n\n"], "not JSON"),
])
def test_bad_streams(server, make_provider, chunks, match):
    server.script(Reply(chunks=chunks))
    with pytest.raises(CloudError, match=match):
        make_provider("anthropic").complete([{"role": "user", "content": "hi"}], on_token=lambda t: None, **CALL)


def test_error_and_odd_replies(server, make_provider):
    p = make_provider("anthropic")
    server.script(Reply(400, json={"type": "error", "error": {"type": "invalid_request_error",
                                                             "message": "max_tokens: must be positive"}}))
    with pytest.raises(CloudError, match=r"HTTP 400 .*max_tokens: must be positive"):
        p.complete([{"role": "user", "content": "hi"}], **CALL)
    server.script(Reply(json={"type": "message", "content": "not a list"}))
    with pytest.raises(CloudError, match="no content list"):
        p.complete([{"role": "user", "content": "hi"}], **CALL)
    with pytest.raises(CloudError, match="tool_call_id"):
        p.complete([{"role": "tool", "content": "x"}], **CALL)


def test_only_its_own_key_is_sent(server, make_provider):
    server.script(Reply(json=message({"type": "text", "text": "x"})))
    make_provider("anthropic").complete([{"role": "user", "content": "hi"}], **CALL)
    req = server.requests[0]
    values = " ".join(req.headers.values()) + req.body.decode()
    assert OPENAI_KEY not in values and GEMINI_KEY not in values
    assert [k for k, v in req.headers.items() if ANTHROPIC_KEY in v] == ["x-api-key"]
