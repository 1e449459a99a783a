"""Constrained decoding of forced tool calls (cactus_core.constrain)."""
from __future__ import annotations

import json
import os
import random

import numpy as np
import pytest

import cactus_core as cactus
from cactus_core.constrain import CallConstraint, SchemaJson
from tinymodel import TEMPLATES, make_chat_model, train_tokenizer

ALARM = {"type": "object", "required": ["time"], "properties": {
    "time": {"type": "string"}, "on": {"type": "boolean"}, "repeat": {"type": "integer"},
    "volume": {"type": ["number", "null"]}, "days": {"type": "array", "items": {"type": "string", "enum": ["mon", "tue"]}},
    "extra": {"type": "object"}}}
TOOLS = [{"type": "function", "function": {"name": "set_alarm", "description": "Set an alarm", "parameters": ALARM}},
         {"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {
             "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def _random_json(rng: random.Random, depth: int = 0):
    r = rng.random()
    if depth > 3 or r < 0.3:
        return rng.choice([1, -2.5, 'q"u\\o\u00e9', True, None, 0, 1e-7, "", "\n"])
    if r < 0.65:
        return {f"k{i}": _random_json(rng, depth + 1) for i in range(rng.randint(0, 3))}
    return [_random_json(rng, depth + 1) for _ in range(rng.randint(0, 3))]


def test_any_json_is_accepted_whole_and_broken_json_is_not():
    rng = random.Random(0)
    for _ in range(1500):
        text = json.dumps(_random_json(rng), ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 1]))
        state = SchemaJson()
        assert state.feed(text) and state.done, text
        cut = rng.randrange(len(text))  # every prefix is a prefix, and not done unless it is a number
        prefix = SchemaJson()
        assert prefix.feed(text[:cut])
    for bad in ['{"a" 1}', '{"a": 01}', "[1,]", '{"a": tru }', "{a: 1}", '"\x01"', '{"a": 1}}', "[1 2]",
                '{"a":1,}', '"\\x"', "--1", "1.e5", "nul1"]:
        state = SchemaJson()
        assert not (state.feed(bad) and state.done), bad


def test_schema_rules_names_keys_types_and_required():
    def ok(text: str) -> bool:
        state = CallConstraint("", TOOLS).state
        return state.feed(text)

    assert ok('{"name": "set_alarm", "arguments": {"time": "7", "on": true, "repeat": -3, "volume": null}}')
    assert ok('{"name": "set_alarm", "arguments": {"time": "7", "days": ["mon", "tue"], "extra": {"any": [1]}}}')
    assert not ok('{"name": "set_alarms"')  # not an offered tool
    assert not ok('{"name": "get_weather", "arguments": {"time"')  # not get_weather's parameter
    assert not ok('{"name": "set_alarm", "arguments": {"on": true}}')  # "time" is required
    assert not ok('{"name": "set_alarm", "arguments": {"time": 7')  # a string parameter
    assert not ok('{"name": "set_alarm", "arguments": {"time": "7", "repeat": 1.5')  # an integer
    assert not ok('{"name": "set_alarm", "arguments": {"time": "7", "days": ["wed"')  # not in the enum
    assert not ok('{"name": "set_alarm", "arguments": {"time": "7", "time": "8"')  # a key twice
    assert not ok('{"name": "set_alarm", "arguments": {"time": "7"}, "extra"')  # the call has two keys
    assert not ok('["set_alarm"')  # a call is an object
    capped = SchemaJson({"type": "string"}, max_string=3)
    assert capped.feed('"abc') and not capped.copy().feed("d") and capped.feed('"') and capped.done


def test_a_model_that_wants_anything_still_writes_a_valid_call():
    """Random logits over a real byte-level BPE vocabulary: every walk ends, within a bounded
    number of tokens, in a call that parses and follows the chosen tool's schema."""
    tok = train_tokenizer()
    texts = [tok.decode([i]) for i in range(tok.get_vocab_size())]
    rng = np.random.default_rng(0)
    for walk in range(60):
        prefix = '{"name": "set_alarm", "arguments":' if walk % 3 == 0 else ""
        constraint = CallConstraint(prefix, TOOLS, closing="\n</tool_call>")
        out = prefix
        for _ in range(4000):
            logits = rng.normal(size=len(texts))
            token = int(np.argmax(constraint.mask(logits, texts.__getitem__)))
            out += texts[token]
            constraint.advance(texts[token])
            if constraint.done:
                break
        assert constraint.done, out[-200:]
        call = json.loads(out)
        assert set(call) == {"name", "arguments"}
        assert_follows_schema(call)


def assert_follows_schema(call: dict) -> None:
    """``call`` names one of TOOLS and its arguments follow that tool's parameter schema."""
    assert call["name"] in ("set_alarm", "get_weather")
    params = ALARM if call["name"] == "set_alarm" else TOOLS[1]["function"]["parameters"]
    assert set(params["required"]) <= set(call["arguments"]) <= set(params["properties"])
    for key, value in call["arguments"].items():
        want = params["properties"][key].get("type")
        if want == "integer":
            assert isinstance(value, int) and not isinstance(value, bool)
        elif want == "string":
            assert isinstance(value, str)
        elif want == "boolean":
            assert isinstance(value, bool)


@pytest.fixture(scope="module", params=["qwen", "gemma"])
def random_engine(request, tmp_path_factory):
    """A random model writing Qwen's JSON calls, or Gemma's Python ones in ```tool_code."""
    model = make_chat_model(tmp_path_factory.mktemp("constrain") / "m", max_positions=8192)
    if request.param == "gemma":
        cfg_path = os.path.join(model, "tokenizer_config.json")
        with open(cfg_path, encoding="utf-8") as f:
            cfg = json.load(f)
        with open(os.path.join(TEMPLATES, "gemma3_style.jinja"), encoding="utf-8") as f:
            cfg["chat_template"] = f.read()
        with open(cfg_path, "w", encoding="utf-8") as f:
            json.dump(cfg, f)
    engine = cactus.load(model, backend="numpy_ref", context_length=8192)
    assert engine.tokenizer.tool_call_style == request.param
    return engine


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_forced_call_from_an_untrained_model_parses(random_engine, choice):
    """An untrained model writes noise; forced and constrained, it still returns a call."""
    free = random_engine.complete([{"role": "user", "content": "hi"}], tools=TOOLS, max_tokens=24)
    assert not free["function_calls"]  # left alone, it writes no parseable call
    r = random_engine.complete([{"role": "user", "content": "hi"}], tools=TOOLS, max_tokens=6000,
                               tool_choice=choice, temperature=0.7, seed=3)
    assert r["success"] and r["finish_reason"] == "tool_calls", r
    (call,) = r["function_calls"]
    assert call["name"] in ("set_alarm", "get_weather")
    if isinstance(choice, dict):
        assert call["name"] == "get_weather" and isinstance(call["arguments"]["city"], str)


def test_odd_schemas_give_a_call_or_a_one_line_error(random_engine):
    """A required key that is never declared is not demanded; an enum nothing can match is
    a clear error, not a traceback."""
    odd = [{"type": "function", "function": {"name": "f", "description": "", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a", "ghost"]}}}]
    r = random_engine.complete([{"role": "user", "content": "hi"}], tools=odd, tool_choice="required",
                               max_tokens=300, seed=1)
    assert r["success"] and r["function_calls"][0]["name"] == "f", r
    empty_enum = [{"type": "function", "function": {"name": "g", "description": "", "parameters": {
        "type": "object", "properties": {"mode": {"type": "string", "enum": []}}, "required": ["mode"]}}}]
    r = random_engine.complete([{"role": "user", "content": "hi"}], tools=empty_enum, tool_choice="required",
                               max_tokens=300, seed=1)
    assert not r["success"] and r["error"].startswith("tool_choice:") and "\n" not in r["error"]


def test_call_watcher_constrains_only_inside_calls_the_model_opens():
    from cactus_core.constrain import CallWatcher

    tok = train_tokenizer()
    texts = [tok.decode([i]) for i in range(tok.get_vocab_size())]
    watcher = CallWatcher(TOOLS)
    logits = np.random.default_rng(1).normal(size=len(texts))
    for piece in ["Sure, ", "<tool", "_call>"]:  # plain text is never touched
        assert watcher.mask(logits, texts.__getitem__) is logits
        watcher.advance(piece)
    assert watcher.active.allows('\n{"name": "get_weather"') and not watcher.active.allows('\n{"name": "nope"')
    for piece in ["\n", '{"name": "get_weather", ', '"arguments": {"city": "Oslo"}']:
        masked = watcher.mask(logits, texts.__getitem__)
        assert np.isneginf(masked).sum() > len(texts) // 2  # most tokens are ruled out inside a call
        watcher.advance(piece)
    watcher.advance("}")
    assert watcher.active is None and watcher.mask(logits, texts.__getitem__) is logits
    watcher.advance("\n</tool_call>\n<tool_call>")  # a second call arms it again
    assert watcher.active is not None and not watcher.done


def test_greedy_mask_keeps_the_most_likely_allowed_token():
    tok = train_tokenizer()
    texts = [tok.decode([i]) for i in range(tok.get_vocab_size())]
    logits = np.random.default_rng(2).normal(size=len(texts))
    full = CallConstraint("", TOOLS).mask(logits, texts.__getitem__)
    greedy = CallConstraint("", TOOLS).mask(logits, texts.__getitem__, greedy=True)
    assert np.isfinite(greedy).sum() == 1 and int(np.argmax(greedy)) == int(np.argmax(full))
