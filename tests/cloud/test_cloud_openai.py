"""The openai provider's wire format against a scripted 127.0.0.1 server."""

from __future__ import annotations

import json

import pytest
from cactus_core.errors import CloudError

from cloud_servers import Reply, sse
from conftest import ANTHROPIC_KEY, GEMINI_KEY, OPENAI_KEY

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
CALL = dict(max_tokens=64, temperature=0.2, timeout_s=5.0)


def completion(content=None, tool_calls=None, model="gpt-served"):
    message = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
    }


def chunk(delta, finish=None):
    return {"id": "c", "object": "chat.completion.chunk", "model": "gpt-served",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_plain_text_request_and_reply(server, make_provider):
    server.script(Reply(json=completion("Paris is the capital.")))
    provider = make_provider("openai")
    out = provider.complete([{"role": "system", "content": "Be brief."},
                             {"role": "user", "content": "Capital of France?"}], **CALL)
    assert out == {"response": "Paris is the capital.", "function_calls": [], "model": "gpt-served"}
    (req,) = server.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {OPENAI_KEY}"
    assert "x-api-key" not in req.headers and "x-goog-api-key" not in req.headers
    body = req.json
    assert body["model"] == "openai-test-model"
    assert body["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "Capital of France?"}]
    # a local/compatible server gets max_tokens; api.openai.com gets max_completion_tokens
    assert body["max_tokens"] == 64 and "max_completion_tokens" not in body
    assert body["temperature"] == 0.2 and "stream" not in body and "tools" not in body


def test_official_host_uses_max_completion_tokens():
    from cactus_cloud.openai import OpenAIProvider

    p = OpenAIProvider({"model": "gpt-4o-mini", "api_key": OPENAI_KEY})
    body = p.request_body([{"role": "user", "content": "hi"}], [], 10, 0.0, False)
    assert body["max_completion_tokens"] == 10 and "max_tokens" not in body
    assert p.url(False) == "https://api.openai.com/v1/chat/completions"
    assert OPENAI_KEY not in repr(p)
    p.close()


def test_tool_definitions_and_calls_round_trip(server, make_provider):
    server.script(Reply(json=completion(None, [
        {"id": "call_9", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
        {"id": "call_10", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Rome\"}"}},
    ])))
    history = [
        {"role": "user", "content": "Weather in Paris, then Oslo and Rome?"},
        # arguments as a dict, as the local engine's function_calls hold them
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp_c\": 18}"},
    ]
    out = make_provider("openai").complete(history, TOOLS, **CALL)
    assert out["response"] == ""
    assert out["function_calls"] == [{"name": "get_weather", "arguments": {"city": "Oslo"}},
                                     {"name": "get_weather", "arguments": {"city": "Rome"}}]
    body = server.requests[0].json
    assert body["tools"] == TOOLS
    sent_call = body["messages"][1]["tool_calls"][0]
    assert sent_call == {"id": "call_1", "type": "function",
                         "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}
    assert body["messages"][2] == history[2]


def test_streaming_text_and_tool_call_deltas(server, make_provider):
    events = sse(
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Let me "}),
        chunk({"content": "check."}),
        chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                               "function": {"name": "get_weather", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function",
                               "function": {"name": "get_time", "arguments": "{\"tz\":"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{\"city\": "}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "\"Oslo\"}"}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": " \"CET\"}"}}]}),
        chunk({}, finish="tool_calls"),
        "[DONE]",
    )
    server.script(Reply(chunks=events, chunk_delay_s=0.005))
    tokens = []
    out = make_provider("openai").complete([{"role": "user", "content": "hi"}], TOOLS,
                                           on_token=tokens.append, **CALL)
    assert tokens == ["Let me ", "check."]
    assert out["response"] == "Let me check."
    assert out["function_calls"] == [{"name": "get_weather", "arguments": {"city": "Oslo"}},
                                     {"name": "get_time", "arguments": {"tz": "CET"}}]
    assert server.requests[0].json["stream"] is True


def test_invalid_tool_arguments_is_a_clear_error(server, make_provider):
    server.script(Reply(json=completion(None, [
        {"id": "c", "type": "function", "function": {"name": "get_weather", "arguments": "{city: Oslo"}}])))
    with pytest.raises(CloudError, match="get_weather.*not valid JSON"):
        make_provider("openai").complete([{"role": "user", "content": "hi"}], TOOLS, **CALL)


@pytest.mark.parametrize("events, cut, match", [
    (sse(chunk({"content": "Hel"}), chunk({"content": "lo"})), False, "before \\[DONE\\]"),
    (sse(chunk({"content": "Hel"})), True, "stream broke"),
    (sse(chunk({"content": "Hel"}), "{not json"), False, "not JSON"),
    (sse(chunk({"content": "Hel"}), {"error": {"message": "model overloaded"}}), False, "model overloaded"),
])
def test_truncated_or_garbled_stream(server, make_provider, events, cut, match):
    server.script(Reply(chunks=events, cut=cut))
    tokens = []
    with pytest.raises(CloudError, match=match):
        make_provider("openai").complete([{"role": "user", "content": "hi"}], on_token=tokens.append, **CALL)
    assert tokens[0] == "Hel"  # what arrived before the failure was still streamed


def test_stream_without_done_but_with_finish_reason_is_complete(server, make_provider):
    server.script(Reply(chunks=sse(chunk({"content": "ok"}), chunk({}, finish="stop"))))
    out = make_provider("openai").complete([{"role": "user", "content": "hi"}], on_token=lambda t: None, **CALL)
    assert out["response"] == "ok"


@pytest.mark.parametrize("body", [
    {"choices": []},
    {"object": "list", "data": []},
    [1, 2, 3],
    {"choices": [{"index": 0, "message": {"role": "assistant", "content": [{"type": "image_url"}]}}]},
])
def test_wrong_shaped_replies(server, make_provider, body):
    server.script(Reply(json=body))
    with pytest.raises(CloudError, match="openai"):
        make_provider("openai").complete([{"role": "user", "content": "hi"}], **CALL)
    assert len(server.requests) == 1  # a 200 with a wrong body is not retried


def test_only_its_own_key_is_sent(server, make_provider):
    server.script(Reply(json=completion("x")))
    make_provider("openai").complete([{"role": "user", "content": "hi"}], **CALL)
    sent = json.dumps(server.requests[0].headers) + server.requests[0].body.decode()
    assert OPENAI_KEY in sent and ANTHROPIC_KEY not in sent and GEMINI_KEY not in sent
    assert OPENAI_KEY not in server.requests[0].body.decode()


def test_bad_input_is_rejected_before_sending(server, make_provider):
    p = make_provider("openai")
    with pytest.raises(CloudError, match="role"):
        p.complete([{"content": "no role"}], **CALL)
    with pytest.raises(CloudError, match="timeout_s"):
        p.complete([{"role": "user", "content": "hi"}], max_tokens=5, temperature=0, timeout_s=0)
    with pytest.raises(CloudError, match="tool 0"):
        p.complete([{"role": "user", "content": "hi"}], [{"type": "function"}], **CALL)
    assert server.requests == []
