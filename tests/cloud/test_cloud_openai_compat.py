"""Our openai provider against a server that implements the OpenAI API.

The official ``openai`` SDK is pointed at the same server first: if the SDK
and our provider agree on every answer, the server speaks the real wire
format and our provider parses it the same way.  Point ``CACTUS_TEST_OPENAI_BASE``
(and ``CACTUS_TEST_OPENAI_KEY``) at any other compatible server, such as
``cactus serve``, to run the same checks against it.
"""

from __future__ import annotations

import json
import os

import pytest
from cactus_core.errors import CloudError

from cloud_servers import UvicornServer
from fake_openai import make_app
from test_cloud_openai import TOOLS

KEY = "sk-test-OPENAI-5f1d2c3b4a69788796a5b4c3"


@pytest.fixture(scope="module")
def compat_server():
    base = os.environ.get("CACTUS_TEST_OPENAI_BASE")
    if base:
        yield base.rstrip("/"), os.environ.get("CACTUS_TEST_OPENAI_KEY", KEY)
        return
    server = UvicornServer(make_app(KEY))
    yield server.url + "/v1", KEY
    server.close()


@pytest.fixture
def ours(compat_server):
    from cactus_cloud.openai import OpenAIProvider

    base, key = compat_server
    with OpenAIProvider({"model": "fake-model", "api_base": base, "api_key": key, "max_retries": 0}) as p:
        yield p


@pytest.fixture
def sdk(compat_server):
    openai = pytest.importorskip("openai")
    base, key = compat_server
    client = openai.OpenAI(base_url=base, api_key=key, max_retries=0, timeout=5)
    yield client
    client.close()


CASES = [
    [{"role": "user", "content": "Hello there"}],
    [{"role": "user", "content": "What is the weather in Oslo?"}],
    [{"role": "user", "content": "What is the weather in Oslo?"},
     {"role": "assistant", "content": None, "tool_calls": [
         {"id": "call_w1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
     {"role": "tool", "tool_call_id": "call_w1", "content": "7C and windy"}],
]


def sdk_result(sdk, messages, stream):
    """What the official SDK makes of the same request, in our result shape."""
    kwargs = dict(model="fake-model", messages=messages, tools=TOOLS, max_tokens=32, temperature=0)
    if not stream:
        msg = sdk.chat.completions.create(**kwargs).choices[0].message
        calls = [(c.function.name, json.loads(c.function.arguments)) for c in msg.tool_calls or []]
        return msg.content or "", calls
    text, calls = [], {}
    for chunk in sdk.chat.completions.create(stream=True, **kwargs):
        delta = chunk.choices[0].delta if chunk.choices else None
        if delta is None:
            continue
        text.append(delta.content or "")
        for tc in delta.tool_calls or []:
            slot = calls.setdefault(tc.index, ["", ""])
            slot[0] = tc.function.name or slot[0]
            slot[1] += tc.function.arguments or ""
    return "".join(text), [(n, json.loads(a)) for n, a in calls.values()]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("messages", CASES, ids=["text", "tool_call", "tool_result"])
def test_provider_agrees_with_official_sdk(ours, sdk, messages, stream):
    expected_text, expected_calls = sdk_result(sdk, messages, stream)
    tokens = []
    out = ours.complete(messages, TOOLS, max_tokens=32, temperature=0, timeout_s=5,
                        on_token=tokens.append if stream else None)
    assert out["response"] == expected_text
    assert [(c["name"], c["arguments"]) for c in out["function_calls"]] == expected_calls
    assert out["response"] or out["function_calls"]
    if stream:
        assert "".join(tokens) == out["response"]


def test_wrong_key_is_a_clean_error(compat_server):
    from cactus_cloud.openai import OpenAIProvider

    base, _ = compat_server
    with OpenAIProvider({"model": "fake-model", "api_base": base, "api_key": "sk-wrong-key-0000000000000000"}) as p:
        with pytest.raises(CloudError, match="HTTP 401") as info:
            p.complete([{"role": "user", "content": "hi"}], max_tokens=4, temperature=0, timeout_s=5)
    assert "sk-wrong" not in str(info.value)
